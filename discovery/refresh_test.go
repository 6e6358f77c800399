package discovery_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

// The promises of the refresh machine (refresh.go) and its disk writes
// (persist.go) at their edges: an unsubscribe while a call is under way, a
// store that hangs. Each of these tests failed before the fix it names.
// TestRefreshMachineRandomized tries the same promises at random.

// movingClient is a client of a new moving cluster, in the test's bubble.
func movingClient(t *testing.T, opts ...discovery.Option) (*discovery.Client, *movingCluster) {
	t.Helper()
	cluster := newMovingCluster(1)
	hc := &http.Client{Transport: handlerTransport{quickCluster{cluster}}}
	c, err := discovery.NewForHTTPClient(hc, "https://moving.invalid", append([]discovery.Option{discovery.WithJSONOnly()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, cluster
}

// quickCluster serves a moving cluster's documents at once, without its
// random waits and failures.
type quickCluster struct{ *movingCluster }

func (q quickCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q.mu.Lock()
	d, ok := q.docs[r.URL.Path]
	q.mu.Unlock()
	switch {
	case !ok:
		http.NotFound(w, r)
	case r.Header.Get("If-None-Match") == d[1]:
		w.WriteHeader(http.StatusNotModified)
	default:
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		w.Header().Set("ETag", d[1])
		_, _ = w.Write([]byte(d[0]))
	}
}

// TestUnsubscribeWaitsForTheCallUnderWay: an unsubscribe from another
// goroutine returns only once the subscriber's call under way has, so that
// the usual unsubscribe(); close(ch) never meets a send on ch. Before, it
// returned at once (and a call could even begin after it had).
func TestUnsubscribeWaitsForTheCallUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := movingClient(t)
		release := make(chan struct{})
		var calls atomic.Int64
		unsubscribe := c.Subscribe(func(discovery.Change) {
			calls.Add(1)
			<-release
		})
		if _, err := c.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the call is under way, and blocks
		var returned atomic.Bool
		go func() {
			unsubscribe()
			returned.Store(true)
		}()
		synctest.Wait()
		if returned.Load() {
			t.Fatal("unsubscribe returned while the subscriber's call was under way")
		}
		close(release)
		synctest.Wait()
		if !returned.Load() {
			t.Fatal("unsubscribe did not return once the call ended")
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
	})
}

// TestUnsubscribeFromTheCallback: a subscriber that unsubscribes from its
// own callback is not waited for (that would wait for itself) and is not
// called again.
func TestUnsubscribeFromTheCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, cluster := movingClient(t)
		var calls atomic.Int64
		var unsubscribe func()
		ready := make(chan struct{})
		unsubscribe = c.Subscribe(func(discovery.Change) {
			<-ready
			calls.Add(1)
			unsubscribe()
		})
		close(ready)
		for range 3 {
			if _, err := c.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			cluster.change()
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%d calls of a subscriber that unsubscribed in its first, want 1", n)
		}
	})
}

// hangingStore is a store whose operations op hang until release is
// closed.
func hangingStore(op string, release <-chan struct{}) *diskcachetest.Memory {
	return &diskcachetest.Memory{Before: func(o string, _ diskcache.Key) {
		if o == op {
			<-release
		}
	}}
}

// TestHangingStoreDelaysNoRefresh: with a store whose Put hangs, every
// refresh still publishes at once and returns its snapshot within its
// caller's deadline, without an error: the write is not the refresh's.
// Before, the disk write was taken in turns under a lock held across Put,
// so a later Refresh with a 2 s deadline queued behind an abandoned one's
// write and returned context.DeadlineExceeded, although its own snapshot
// had been published long before.
func TestHangingStoreDelaysNoRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		c, cluster := movingClient(t, discovery.WithDiskCache(hangingStore("put", release)))
		for i := range 3 {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			start := time.Now()
			s, err := c.Refresh(ctx)
			cancel()
			if err != nil || shows(s) != cluster.current() || time.Since(start) > 2*time.Second {
				t.Fatalf("refresh %d with a hanging store: %v after %v, showing version %d of %d; want the current version within the deadline", i, err, time.Since(start), shows(s), cluster.current())
			}
			if cur := c.Current(); cur != s {
				t.Errorf("refresh %d returned a snapshot that is not the current one", i)
			}
			cluster.change()
		}
		// Without a deadline, a caller waits for the write no longer than
		// a refresh may take.
		start := time.Now()
		if _, err := c.Refresh(context.Background()); err != nil || time.Since(start) > 30*time.Second {
			t.Errorf("a refresh without a deadline and a hanging store: %v after %v; want its snapshot within the refresh timeout (30s)", err, time.Since(start))
		}
	})
}

// TestWarmStartStoreHangs: a store whose Get hangs is given up on after the
// refresh timeout, and the server is read. Before, every Snapshot waited
// for it until its context ended, forever without a deadline.
func TestWarmStartStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		c, cluster := movingClient(t, discovery.WithDiskCache(hangingStore("get", release)), discovery.WithRefreshTimeout(5*time.Second))
		start := time.Now()
		s, err := c.Snapshot(context.Background())
		if err != nil || shows(s) != cluster.current() || s.FromDisk() {
			t.Fatalf("Snapshot with a hanging store: %v; want the server's snapshot", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("Snapshot with a hanging store returned after %v, want the refresh timeout (5s)", d)
		}
	})
}
