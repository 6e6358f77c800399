package restmapper_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestOptionGivenTwice: an option given twice (which would be silently
// last-wins) is a constructor error that names it.
func TestOptionGivenTwice(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "https://c.invalid")
	if err != nil {
		t.Fatal(err)
	}
	opt := restmapper.WithMissRefreshInterval(time.Second)
	if _, err := restmapper.New(c, opt, opt); err == nil || !strings.Contains(err.Error(), "WithMissRefreshInterval given twice") {
		t.Errorf("twice: %v, want an error naming it", err)
	}
	if _, err := restmapper.New(c, opt, restmapper.WithIndexes(restmapper.NewIndexes())); err != nil {
		t.Errorf("two options once each: %v", err)
	}
}
