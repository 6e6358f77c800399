package openapi3_test

import (
	"context"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/internal/stuckclock"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestStuckClockHoldsUpNoCaller pins that the clock (WithClock, the
// user's code) is read under no lock of the client: while a read of the
// root is stuck in the clock, Paths with a deadline returns the root it
// holds in time, and StaleRoot answers. Before, readRoot read the clock
// holding rootMu, which Paths and StaleRoot wait for without their
// contexts.
func TestStuckClockHoldsUpNoCaller(t *testing.T) {
	_, base := docserver.Start(t, docserver.WithCRDs(2, 1))
	clk := stuckclock.New()
	c := newClient(t, base, openapi3.WithClock(clk))
	if _, err := c.Paths(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Arm()
	refreshed := make(chan error, 1)
	go func() {
		_, err := c.RefreshRoot(context.Background())
		refreshed <- err
	}()
	select {
	case <-clk.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("the root's read did not read the clock")
	}
	defer func() {
		clk.Release()
		if err := <-refreshed; err != nil {
			t.Error(err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if root, err := c.Paths(ctx); err != nil || len(root) == 0 {
			t.Errorf("Paths: %d paths, %v", len(root), err)
		}
		_ = c.StaleRoot()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Paths and StaleRoot wait, past Paths's deadline, for a clock read another goroutine is stuck in")
	}
}
