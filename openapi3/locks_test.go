package openapi3_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
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
	clk := &stuckClock{entered: make(chan struct{}), release: make(chan struct{})}
	c := newClient(t, base, openapi3.WithClock(clk))
	if _, err := c.Paths(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.armed.Store(true)
	refreshed := make(chan error, 1)
	go func() {
		_, err := c.RefreshRoot(context.Background())
		refreshed <- err
	}()
	select {
	case <-clk.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the root's read did not read the clock")
	}
	defer func() {
		close(clk.release)
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

// stuckClock is the real clock whose first Now once armed blocks until
// release is closed (telling entered); Since never blocks.
type stuckClock struct {
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (c *stuckClock) Now() time.Time {
	if c.armed.Load() {
		first := false
		c.once.Do(func() { first = true; close(c.entered) })
		if first {
			<-c.release
		}
	}
	return time.Now()
}

func (c *stuckClock) Since(t time.Time) time.Duration { return time.Since(t) }
