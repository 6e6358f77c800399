package watch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
)

// TestOptionGivenTwice: an option given twice (which would be silently
// last-wins) is New's error, naming it.
func TestOptionGivenTwice(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "https://c.invalid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.New(c, watch.WithServedAPI(false), watch.WithServedAPI(true)); err == nil || !strings.Contains(err.Error(), "WithServedAPI given twice") {
		t.Errorf("twice: %v, want an error naming it", err)
	}
	if _, err := watch.New(c, watch.WithServedAPI(false), watch.WithDebounce(time.Second)); err != nil {
		t.Errorf("two options once each: %v", err)
	}
}
