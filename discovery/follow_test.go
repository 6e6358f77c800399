package discovery_test

import (
	"sync"
	"testing"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestFollow: a client is Following while any follower has not stopped;
// a stop called again, or from a follower already stopped, takes nothing
// from the others, whoever calls it concurrently.
func TestFollow(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Following() {
		t.Fatal("a new client is Following")
	}
	a, b := c.Follow(), c.Follow()
	a()
	a()
	if !c.Following() {
		t.Fatal("not Following with one follower left, after the other's stop was called twice")
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 1000 {
				stop := c.Follow()
				if !c.Following() {
					t.Error("not Following right after Follow")
				}
				wg.Go(stop)
				stop()
			}
		})
	}
	wg.Wait()
	if !c.Following() {
		t.Fatal("concurrent followers took the remaining follower's count")
	}
	b()
	if c.Following() {
		t.Fatal("Following after every follower stopped")
	}
}
