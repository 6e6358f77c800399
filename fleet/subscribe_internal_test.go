package fleet

import (
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestUnsubscribeWaitsForTheCallUnderWay pins Subscribe's promise: an
// unsubscribe from another goroutine returns only once a call under way
// has, and no call begins after it; one from inside the callback returns
// at once. Before, unsubscribe returned while a cluster's change was being
// handed to fn, which could then write to what the caller had closed.
func TestUnsubscribeWaitsForTheCallUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := New()
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var calls atomic.Int64
		unsubscribe := f.Subscribe(func(Change) {
			calls.Add(1)
			<-release
		})
		go f.notify("c1", discovery.Change{}) // as a cluster's subscriber goroutine does
		synctest.Wait()                       // the call is under way, and blocks
		var returned atomic.Bool
		go func() {
			unsubscribe()
			returned.Store(true)
		}()
		synctest.Wait()
		if returned.Load() {
			t.Fatal("unsubscribe returned while a call was under way")
		}
		close(release)
		synctest.Wait()
		if !returned.Load() {
			t.Fatal("unsubscribe did not return once the call ended")
		}
		f.notify("c1", discovery.Change{})
		if n := calls.Load(); n != 1 {
			t.Errorf("%d calls, want 1: a call began after unsubscribe returned", n)
		}

		// From inside the callback: no wait for itself, and no later call.
		var inner atomic.Int64
		var self func()
		ready := make(chan struct{})
		self = f.Subscribe(func(Change) {
			<-ready
			inner.Add(1)
			self()
		})
		close(ready)
		f.notify("c1", discovery.Change{})
		f.notify("c1", discovery.Change{})
		if n := inner.Load(); n != 1 {
			t.Errorf("a subscriber that unsubscribed in its first call was called %d times", n)
		}
	})
}
