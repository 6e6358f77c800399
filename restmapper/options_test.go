package restmapper_test

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

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

// TestNewHoldsLittle: until it is used, a mapper holds two objects,
// itself and its freshness (the miss budgets are made at the first miss,
// and the clock is kept, not its method value), with the real clock or a
// fake one: a process holds one mapper per identity (package shared),
// most of which never miss. New allocates as well its options while they
// apply, and with an option given their record (two objects more).
func TestNewHoldsLittle(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "https://c.invalid")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []restmapper.Option
		want float64
	}{
		{"real clock", nil, 3},
		{"fake clock", []restmapper.Option{restmapper.WithClock(clocktesting.NewFakeClock(time.Now()))}, 5},
	} {
		if n := testing.AllocsPerRun(100, func() {
			if _, err := restmapper.New(c, tc.opts...); err != nil {
				t.Fatal(err)
			}
		}); n > tc.want {
			t.Errorf("%s: New allocates %v objects, want at most %v", tc.name, n, tc.want)
		}
	}
}
