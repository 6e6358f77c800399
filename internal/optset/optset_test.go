package optset

import (
	"strings"
	"testing"
)

func TestNamedOnce(t *testing.T) {
	type opts struct {
		given Given
		n     int
	}
	with := func(n int) func(*opts) error {
		return Named("pkg", "WithN", func(o *opts) *Given { return &o.given }, func(o *opts) error { o.n = n; return nil })
	}
	o := &opts{}
	if err := with(1)(o); err != nil || o.n != 1 {
		t.Fatalf("once: %v, n %d", err, o.n)
	}
	if err := with(2)(o); err == nil || !strings.Contains(err.Error(), "pkg: WithN given twice") || o.n != 1 {
		t.Errorf("twice: %v, n %d; want an error naming it, n unchanged", err, o.n)
	}
}
