package openapi3_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// pausingClock is a fake clock that, once armed, pauses the n-th call to
// it (Now or Since) until released: it holds one caller between reading
// the clock and what it decides from it, while others go on.
type pausingClock struct {
	*clocktesting.FakePassiveClock

	mu      sync.Mutex
	left    int           // calls until the one to pause; 0: none
	paused  chan struct{} // closed when that call pauses
	release chan struct{} // closed to let it go on
}

func (c *pausingClock) arm(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left, c.paused, c.release = n, make(chan struct{}), make(chan struct{})
}

func (c *pausingClock) pause() {
	c.mu.Lock()
	if c.left == 0 {
		c.mu.Unlock()
		return
	}
	c.left--
	if c.left > 0 {
		c.mu.Unlock()
		return
	}
	paused, release := c.paused, c.release
	c.mu.Unlock()
	close(paused)
	<-release
}

func (c *pausingClock) Now() time.Time { c.pause(); return c.FakePassiveClock.Now() }
func (c *pausingClock) Since(t time.Time) time.Duration {
	c.pause()
	return c.FakePassiveClock.Since(t)
}

// TestReadDecidedWithItsClaim: a caller that decides the root is due a
// read (a miss, or marks of Changed) and is held between its look at the
// clock and the read while another caller reads the root does not read it
// again: the decision and the claim of the read are one step (missRead).
// Before, a caller held so read the root a second time within the second,
// which callers missing in a loop on many goroutines could do again and
// again.
func TestReadDecidedWithItsClaim(t *testing.T) {
	for _, c := range []struct {
		name string
		call int // the caller's clock call that decides the read
		prep func(*openapi3.Client)
		do   func(context.Context, *openapi3.Client) error
	}{
		{"a path the root does not list", 2, func(*openapi3.Client) {}, func(ctx context.Context, c *openapi3.Client) error {
			_, err := c.Document(ctx, "apis/none.example.com/v1")
			if !errors.Is(err, openapi3.ErrNotFound) {
				return err
			}
			return nil
		}},
		{"marks", 1, (*openapi3.Client).Changed, func(ctx context.Context, c *openapi3.Client) error {
			_, err := c.Paths(ctx)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, base := docserver.Start(t)
			clk := &pausingClock{FakePassiveClock: clocktesting.NewFakePassiveClock(time.Now())}
			oc := newClient(t, base, openapi3.WithClock(clk), openapi3.WithMaxAge(time.Hour))
			ctx := context.Background()
			if _, err := oc.Paths(ctx); err != nil {
				t.Fatal(err)
			}
			clk.SetTime(clk.Now().Add(2 * time.Second))
			c.prep(oc)
			srv.ResetRequests()

			clk.arm(c.call)
			held := make(chan error)
			go func() { held <- c.do(ctx, oc) }()
			<-clk.paused
			if err := c.do(ctx, oc); err != nil {
				t.Fatal(err)
			}
			close(clk.release)
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			if n := rootReads(srv); n != 1 {
				t.Errorf("%d root reads by two callers due one at the same time; want 1", n)
			}
		})
	}
}
