package fleet_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/fleet"
	"github.com/kubeatlas/kubeatlas/internal/stuckclock"
)

// TestStuckClockHoldsUpNoCaller pins that a cluster's failure is
// recorded reading the clock (WithClock, the user's code) under no lock:
// while the round is stuck in the clock, the cluster's Err and the
// fleet's Stats answer. Before, the clock was read holding the cluster's
// lock, which they wait for.
func TestStuckClockHoldsUpNoCaller(t *testing.T) {
	clk := stuckclock.New()
	f := newFleet(t, fleet.WithClock(clk))
	// The cluster's transport fails every request and arms the clock: the
	// next clock read is the one that records the failure.
	refuse := roundTripFunc(func(*http.Request) (*http.Response, error) {
		clk.Arm()
		return nil, errors.New("connection refused")
	})
	c, err := f.Add("down", &rest.Config{Host: "https://down.invalid", Transport: refuse})
	if err != nil {
		t.Fatal(err)
	}
	round := make(chan error, 1)
	go func() { round <- f.Refresh(context.Background()) }()
	select {
	case <-clk.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("the failed refresh did not read the clock")
	}
	defer func() {
		clk.Release()
		if err := <-round; err == nil {
			t.Error("the round of a cluster that is down did not fail")
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Err()
		_ = f.Stats()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Cluster.Err and Fleet.Stats wait for a clock read the round is stuck in")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
