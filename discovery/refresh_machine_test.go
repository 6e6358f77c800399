package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// The tests of the refresh machine (refresh.go) and of change delivery
// (change.go): one per defect the machine was rebuilt for, each of which
// failed before it, and TestRefreshMachineRandomized, which checks the
// machine's promises on every observation of many randomized rounds.

// memStore is a diskcache.Store in memory whose Put can be made slow.
type memStore struct {
	mu      sync.Mutex
	m       map[diskcache.Key][]byte
	putWait time.Duration // each Put sleeps this long first
	getWait time.Duration // each Get sleeps this long first
}

func newMemStore() *memStore { return &memStore{m: map[diskcache.Key][]byte{}} }

func (s *memStore) Get(key diskcache.Key) ([]byte, bool) {
	s.mu.Lock()
	wait := s.getWait
	s.mu.Unlock()
	time.Sleep(wait)
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok
}

func (s *memStore) Put(key diskcache.Key, value []byte) error {
	s.mu.Lock()
	wait := s.putWait
	s.mu.Unlock()
	time.Sleep(wait)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = append([]byte(nil), value...)
	return nil
}

func (s *memStore) Delete(key diskcache.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

func (s *memStore) slow(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putWait = d
}

// within runs fn in a goroutine and fails the test when it has not
// returned after d of real time: a call that never returns fails the test
// rather than hanging it. The bound is far above any normal cost; it
// catches a wedge, it does not measure speed.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s has not returned after %v: wedged", what, d)
	}
}

// TestChangeHandlerMapsMissingKind: a change handler that asks the mapper
// for a kind nobody serves (a miss, which refreshes discovery) does not
// wedge discovery: lookups from other goroutines keep their cost, and a
// CRD added later is delivered to the handler. Before the handlers ran
// after publication, the miss waited for a refresh that waited for the
// handler, and every later miss in the process blocked for good.
func TestChangeHandlerMapsMissingKind(t *testing.T) {
	srv, hc, base := docserver.StartInProcess(t)
	c, err := discovery.NewForHTTPClient(hc, base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(c, restmapper.WithMissRefreshInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	missing := schema.GroupKind{Group: "nobody.example.com", Kind: "Nothing"}
	added := schema.GroupKind{Group: "later.example.com", Kind: "Later"}
	var mu sync.Mutex
	var sawAdded bool
	c.Subscribe(func(ch discovery.Change) {
		if _, err := m.RESTMapping(missing); !meta.IsNoMatchError(err) {
			t.Errorf("a missing kind from a handler: %v, want no match", err)
		}
		if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
			t.Errorf("a served kind from a handler: %v", err)
		}
		if _, err := m.RESTMapping(added); err == nil {
			mu.Lock()
			sawAdded = true
			mu.Unlock()
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	polled := make(chan struct{})
	go func() { defer close(polled); c.Poll(ctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-polled }()

	for range 20 {
		within(t, 10*time.Second, "a miss from another goroutine", func() {
			if _, err := m.RESTMapping(missing); !meta.IsNoMatchError(err) {
				t.Errorf("a missing kind: %v, want no match", err)
			}
		})
		time.Sleep(5 * time.Millisecond)
	}
	if err := srv.AddCRD(docserver.CRD{Group: added.Group, Versions: []string{"v1"}, Kind: added.Kind}); err != nil {
		t.Fatal(err)
	}
	within(t, 10*time.Second, "the new CRD's mapping", func() {
		for {
			if _, err := m.RESTMapping(added); err == nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	within(t, 10*time.Second, "the handler hearing of the new CRD", func() {
		for {
			mu.Lock()
			ok := sawAdded
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestWarmStartSubscriberRefreshes: a client started from the disk cache
// whose subscriber refreshes on the first change returns its first
// Snapshot within one refresh. Before, the subscriber ran inside the warm
// start's sync.Once, and its Refresh waited for that Once for good.
func TestWarmStartSubscriberRefreshes(t *testing.T) {
	_, hc, base := docserver.StartInProcess(t)
	store := newMemStore()
	first, err := discovery.NewForHTTPClient(hc, base, discovery.WithDiskCache(store))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := discovery.NewForHTTPClient(hc, base, discovery.WithDiskCache(store), discovery.WithMaxAge(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	refreshed := make(chan error, 1)
	var once sync.Once
	c.Subscribe(func(ch discovery.Change) {
		once.Do(func() {
			_, err := c.Refresh(t.Context())
			refreshed <- err
		})
	})
	within(t, 10*time.Second, "the warm-started client's first Snapshot", func() {
		s, err := c.Snapshot(t.Context())
		if err != nil || s == nil {
			t.Errorf("first Snapshot: %v", err)
		}
	})
	within(t, 10*time.Second, "the subscriber's Refresh", func() {
		if err := <-refreshed; err != nil {
			t.Errorf("the subscriber's Refresh: %v", err)
		}
	})
	if st := c.Stats(); st.DiskLoads != 1 {
		t.Errorf("%d disk loads, want a warm start", st.DiskLoads)
	}
}

// TestSubscriberRefreshDoesNotHoldRefresh: a subscriber that refreshes
// from its callback holds neither the refresh that told it (its caller
// returns as soon as it has published) nor itself: its own refresh
// succeeds. Before, the caller waited until the subscriber's deadline, and
// the subscriber's refresh failed with it. In a bubble, so that "as soon
// as" is exact.
func TestSubscriberRefreshDoesNotHoldRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		c, err := discovery.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		results := make(chan error, 1)
		c.Subscribe(func(discovery.Change) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := c.Refresh(ctx)
			results <- err
		})
		if err := srv.AddCRD(docserver.CRD{Group: "told.example.com", Versions: []string{"v1"}, Kind: "Told"}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		s, err := c.Refresh(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the refresh that told a subscriber took %v of bubble time, want none (it does not wait for the subscriber)", d)
		}
		if _, ok := s.Group("told.example.com"); !ok {
			t.Errorf("the refresh's snapshot lacks the new CRD")
		}
		if err := <-results; err != nil {
			t.Errorf("the subscriber's own refresh: %v", err)
		}
	})
}

// generationLog records what a subscriber was told.
type generationLog struct {
	mu      sync.Mutex
	changes []discovery.Change
}

func (l *generationLog) add(ch discovery.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, ch)
}

// check fails t unless the changes are a chain: exactly one first
// snapshot (Old nil) and it first, each Old the New before it, and
// generations growing.
func (l *generationLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, ch := range l.changes {
		if i == 0 {
			if ch.Old != nil {
				t.Errorf("the first change has an Old snapshot")
			}
			continue
		}
		prev := l.changes[i-1].New
		if ch.Old == nil {
			t.Errorf("change %d is a second first snapshot (Old nil)", i)
		} else if ch.Old != prev {
			t.Errorf("change %d: Old is not the New of the change before (generation %d, want %d)", i, ch.Old.Generation(), prev.Generation())
		}
		if ch.New.Generation() <= prev.Generation() {
			t.Errorf("change %d: generation %d after %d: went back", i, ch.New.Generation(), prev.Generation())
		}
	}
}

// TestAbandonedRefreshDoesNotPublishOverNewer: a refresh whose disk write
// is slow, and whose caller leaves, does not replace the snapshot
// of a refresh that began after it, and subscribers hear one first
// snapshot and generations that grow. Before, the abandoned refresh
// finished last and published its older snapshot: the current generation
// went back, and subscribers were told two first snapshots.
func TestAbandonedRefreshDoesNotPublishOverNewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		store := newMemStore()
		c, err := discovery.NewForHTTPClient(hc, base, discovery.WithDiskCache(store))
		if err != nil {
			t.Fatal(err)
		}
		var log generationLog
		c.Subscribe(log.add)
		store.slow(10 * time.Second)
		ctxA, cancelA := context.WithTimeout(t.Context(), time.Second)
		defer cancelA()
		// Its snapshot is published at once; the caller waits for the
		// write until its deadline, and then has the snapshot, without an
		// error: the write is not the refresh's.
		start := time.Now()
		if s, err := c.Refresh(ctxA); err != nil || s == nil || time.Since(start) != time.Second {
			t.Fatalf("the refresh held by the disk: %v after %v, want its snapshot at its caller's deadline (1s)", err, time.Since(start))
		}
		store.slow(0)
		if err := srv.AddCRD(docserver.CRD{Group: "newer.example.com", Versions: []string{"v1"}, Kind: "Newer"}); err != nil {
			t.Fatal(err)
		}
		newer, err := c.Refresh(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := newer.Group("newer.example.com"); !ok {
			t.Fatalf("the newer refresh lacks the CRD added before it")
		}
		time.Sleep(time.Minute) // every write has ended
		synctest.Wait()         // and every subscriber has been told
		cur := c.Current()
		if cur.Generation() < newer.Generation() {
			t.Errorf("current generation %d after the newer refresh's %d: went back", cur.Generation(), newer.Generation())
		}
		if _, ok := cur.Group("newer.example.com"); !ok {
			t.Errorf("the current snapshot lacks the newer refresh's CRD: an older one was published over it")
		}
		log.check(t)
		// What is on disk is the newer snapshot, whoever wrote last: the
		// server confirms it (a store that is not a *diskcache.Cache is
		// believed once the server answers 304 to its ETags).
		warm, err := discovery.NewForHTTPClient(hc, base, discovery.WithDiskCache(store), discovery.WithMaxAge(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		s, err := warm.Snapshot(t.Context())
		if st := warm.Stats(); err != nil || st.DiskLoads != 1 || st.NotModified != 2 {
			t.Fatalf("warm start: %v, %+v; want the disk's entry confirmed by two 304s", err, st)
		}
		if _, ok := s.Group("newer.example.com"); !ok {
			t.Errorf("the disk cache holds the older snapshot: the abandoned write landed over the newer one")
		}
	})
}

// TestSubscribePromises pins what Subscribe's doc promises, in a bubble:
// a subscriber that blocks delays neither the refresh nor another
// subscriber; the changes published while it blocks reach it joined into
// one whose Old is what it saw last; a subscriber made after the first
// snapshot hears of changes from the snapshot current then (not a first
// snapshot); and no call begins after unsubscribe returns.
func TestSubscribePromises(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		c, err := discovery.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var slow, fast generationLog
		c.Subscribe(func(ch discovery.Change) {
			slow.add(ch)
			<-release
		})
		unsubscribeFast := c.Subscribe(fast.add)
		first, err := c.Refresh(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // both were called with the first snapshot; slow blocks
		var later generationLog
		c.Subscribe(later.add)
		var news []*discovery.Snapshot
		for i := range 3 {
			if err := srv.AddCRD(docserver.CRD{Group: fmt.Sprintf("s%d.promise.example.com", i), Versions: []string{"v1"}, Kind: "Promise"}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			s, err := c.Refresh(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(start) != 0 {
				t.Errorf("a refresh waited %v for a blocked subscriber", time.Since(start))
			}
			news = append(news, s)
			synctest.Wait()
		}
		fast.mu.Lock()
		if n := len(fast.changes); n != 4 || fast.changes[3].New != news[2] {
			t.Errorf("the subscriber that does not block got %d changes, want 4 up to the last refresh's", n)
		}
		fast.mu.Unlock()
		later.mu.Lock()
		if len(later.changes) != 3 || later.changes[0].Old != first {
			t.Errorf("a subscriber made after the first snapshot: %d changes, the first from %v; want 3, from the snapshot current when it subscribed", len(later.changes), later.changes[0].Old == first)
		}
		later.mu.Unlock()
		close(release)
		synctest.Wait()
		slow.mu.Lock()
		if len(slow.changes) != 2 || slow.changes[1].Old != first || slow.changes[1].New != news[2] || len(slow.changes[1].AddedVersions) != 3 {
			t.Errorf("the blocked subscriber: %d changes; want 2, the second joining the three it missed (from the first snapshot to the last)", len(slow.changes))
		}
		slow.mu.Unlock()
		slow.check(t)
		fast.check(t)

		unsubscribeFast()
		if err := srv.AddCRD(docserver.CRD{Group: "after.promise.example.com", Versions: []string{"v1"}, Kind: "After"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		fast.mu.Lock()
		if n := len(fast.changes); n != 4 {
			t.Errorf("an unsubscribed function was called: %d changes, want 4", n)
		}
		fast.mu.Unlock()
	})
}

// TestWarmStartWaitsWithinContext pins warmStart's promise: callers wait
// for the disk cache's one read until their context ends, and the read,
// once done (and confirmed by the server: the store is not a
// *diskcache.Cache), is published and served. In a bubble, with a store
// whose reads take 10 s.
func TestWarmStartWaitsWithinContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, hc, base := docserver.StartInProcess(t)
		store := newMemStore()
		first, err := discovery.NewForHTTPClient(hc, base, discovery.WithDiskCache(store))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		store.mu.Lock()
		store.getWait = 10 * time.Second
		store.mu.Unlock()
		c, err := discovery.NewForHTTPClient(hc, base, discovery.WithDiskCache(store), discovery.WithMaxAge(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if s, err := c.Snapshot(ctx); s != nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Snapshot during a slow warm start: %v after %v; want ctx's deadline after 1s", err, time.Since(start))
		}
		s, err := c.Snapshot(t.Context())
		if st := c.Stats(); err != nil || s == nil || st.DiskLoads != 1 || st.NotModified != 2 || time.Since(start) != 10*time.Second {
			t.Errorf("Snapshot after the warm start: %v, %+v, after %v; want the disk's snapshot, confirmed by two 304s, when its read ends (10s)", err, st, time.Since(start))
		}
	})
}
