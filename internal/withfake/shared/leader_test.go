package shared_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/shared"
)

// TestWatchMovesToAnIdentityThatMayWatch: the server's watch runs with
// the credentials of an identity that may watch: a refused first
// identity gives it to the next that comes; when the identity that runs
// it is released while others remain, another runs it; with none that
// may watch, one identity polls for the server, and a newcomer, tried
// and refused, takes the polling over rather than adding a poller.
func TestWatchMovesToAnIdentityThatMayWatch(t *testing.T) {
	d := startDoor(t, discoverytest.WithCRDs(20, 2))
	r := newRegistry(t, clocktesting.NewFakeClock(time.Now()))
	held := map[string]*shared.Handle{}
	take := func(tok string) {
		held[tok] = acquire(t, r, d, tok)
		if _, err := held[tok].Mapper().RESTMapping(widget, "v1"); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	drop := func(tok string) {
		held[tok].Release()
		delete(held, tok)
	}
	defer func() {
		for _, h := range held {
			h.Release()
		}
		waitWatchStopped(t)
	}()
	watchedBy := func(tok string) func() bool {
		return func() bool { w := d.watching(); return len(w) == 1 && w[0] == tok }
	}
	allFollowed := func() bool {
		for _, h := range held {
			if !h.Discovery().Following() {
				return false
			}
		}
		return true
	}

	take("deny-0")
	waitFor(t, "deny-0 refused", func() bool { return d.of("deny-0").watches > 0 })
	take("tok-1")
	waitFor(t, "the watch run by tok-1", watchedBy("tok-1"))
	take("tok-2")
	waitFor(t, "deny-0 and tok-2 followed through tok-1's watch", allFollowed)
	if held["deny-0"].Watcher() != nil || held["tok-1"].Watcher() == nil {
		t.Fatal("Watcher is not the handle whose identity runs the watch")
	}
	refused := d.of("deny-0").watches

	drop("tok-1")
	waitFor(t, "the watch run by tok-2", watchedBy("tok-2"))
	waitFor(t, "deny-0 followed through tok-2's watch", allFollowed)
	if n := d.of("deny-0").watches; n != refused {
		t.Fatalf("deny-0, refused once, was tried again (%d lists or watches, %d before)", n, refused)
	}

	// Nobody left who may watch: deny-0 polls for the server.
	drop("tok-2")
	polls := func(tok string) int { return d.of(tok).discovery }
	p0 := polls("deny-0")
	waitFor(t, "deny-0 polling", func() bool { return polls("deny-0") >= p0+4 })
	if held["deny-0"].Discovery().Following() {
		t.Fatal("followed while only a poll runs")
	}
	take("deny-1")
	waitFor(t, "deny-1 refused", func() bool { return d.of("deny-1").watches > 0 })
	waitFor(t, "deny-1 polling", func() bool { return polls("deny-1") >= 2+4 })
	p0 = polls("deny-0")
	time.Sleep(500 * time.Millisecond) // five rounds of the 100ms poll
	if n := polls("deny-0") - p0; n != 0 {
		t.Fatalf("two pollers: deny-0 sent %d discovery requests while deny-1 polls", n)
	}
	// One that may watch comes: the poll ends, the watch runs with it.
	take("tok-3")
	waitFor(t, "the watch run by tok-3", watchedBy("tok-3"))
	waitFor(t, "everyone followed through tok-3's watch", allFollowed)
	p0, p1 := polls("deny-0"), polls("deny-1")
	time.Sleep(300 * time.Millisecond)
	if polls("deny-0") != p0 || polls("deny-1") != p1 {
		t.Fatal("a poll still runs while an identity watches")
	}
}

// TestIdentitiesComeAndGo: identities acquired and released at random
// by many goroutines, some that may not watch, while CRDs are added (a
// change signalled as identities come and go, the identity that runs the
// watch among them): every refresh shows each CRD added before it began,
// at most one watch of the server is open at any time, and when every
// identity is gone nothing runs. Then a few identities held at once are
// all followed through one watch.
func TestIdentitiesComeAndGo(t *testing.T) {
	d := startDoor(t, discoverytest.WithCRDs(20, 2))
	r := newRegistry(t, clocktesting.NewFakeClock(time.Now()))
	var added atomic.Int32 // CRDs Gadget0..added-1 are served
	kind := func(i int32) schema.GroupKind {
		return schema.GroupKind{Group: "new.example.com", Kind: fmt.Sprintf("Gadget%d", i)}
	}
	stop := make(chan struct{})
	var changes, watchers sync.WaitGroup
	changes.Go(func() {
		for i := int32(0); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			k := kind(i)
			if err := d.srv.AddCRD(discoverytest.CRD{Group: k.Group, Versions: []string{"v1"}, Kind: k.Kind}); err != nil {
				t.Error(err)
				return
			}
			added.Store(i + 1)
		}
	})
	// Watches open at the server by more than one identity at once, for
	// longer than a handover takes to reach it (the run before returns
	// before the next starts; its connection's close reaches the server
	// a moment later).
	var overlapped atomic.Bool
	watchers.Go(func() {
		var since time.Time
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			switch n := len(d.watching()); {
			case n <= 1:
				since = time.Time{}
			case since.IsZero():
				since = time.Now()
			case time.Since(since) > time.Second:
				overlapped.Store(true)
			}
		}
	})
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 45))
			for range 25 {
				tok := fmt.Sprintf("tok-%d", rnd.IntN(6))
				if rnd.IntN(4) == 0 {
					tok = fmt.Sprintf("deny-%d", rnd.IntN(2))
				}
				n := added.Load()
				h, err := r.Acquire(d.config(tok))
				if err != nil {
					t.Error(err)
					return
				}
				if n > 0 {
					// Refreshed, not looked up: the mapper's miss budget
					// (8 new kinds at once, then one a second) is not
					// what is tested here.
					snap, err := h.Discovery().Refresh(context.Background())
					if err != nil {
						t.Errorf("%s: %v", tok, err)
					} else if !serves(snap, kind(n-1)) {
						t.Errorf("%s: %s, added before the refresh began, not served", tok, kind(n-1))
					}
				}
				if _, err := h.Mapper().RESTMapping(widget); err != nil {
					t.Errorf("%s: %v", tok, err)
				}
				time.Sleep(time.Duration(rnd.IntN(3000)) * time.Microsecond)
				h.Release()
			}
		})
	}
	wg.Wait()
	close(stop)
	changes.Wait()
	watchers.Wait()
	if r.Len() != 0 {
		t.Fatalf("Len = %d after every user left", r.Len())
	}
	waitWatchStopped(t)
	if overlapped.Load() {
		t.Error("two identities had a watch open at once for more than a second, want one")
	}

	var handles []*shared.Handle
	for _, tok := range []string{"deny-0", "tok-0", "tok-1", "deny-1"} {
		handles = append(handles, acquire(t, r, d, tok))
	}
	defer func() {
		for _, h := range handles {
			h.Release()
		}
		waitWatchStopped(t)
	}()
	for _, h := range handles {
		if _, err := h.Mapper().RESTMapping(widget, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "four identities followed through one watch", func() bool {
		return !slices.ContainsFunc(handles, func(h *shared.Handle) bool { return !h.Discovery().Following() }) && len(d.watching()) == 1
	})
}

// serves says whether s lists kind k.
func serves(s *discovery.Snapshot, k schema.GroupKind) bool {
	g, ok := s.Group(k.Group)
	if !ok {
		return false
	}
	for _, v := range g.Versions {
		for _, r := range v.Resources {
			if r.Kind.Kind == k.Kind {
				return true
			}
		}
	}
	return false
}
