package watch

import (
	"errors"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestFollowerFollowsOnlyWhileItWouldSeeAChange: the client is followed
// exactly while every stream has a watch open, the informers have synced
// and a refresh begun after that succeeded with none failing since; an
// old watch that ends after its successor opened does not stop it; after
// the run ends nothing follows again.
func TestFollowerFollowsOnlyWhileItWouldSeeAChange(t *testing.T) {
	c, _ := newWatcher(t)
	f := newFollower(c)
	crds, apiServices := f.stream(), f.stream()
	check := func(step string, want bool) {
		t.Helper()
		if c.Following() != want {
			t.Fatalf("%s: Following %v, want %v", step, !want, want)
		}
	}
	closeCRDs := crds.opened()
	closeAPIServices := apiServices.opened()
	f.refreshed(false, nil)
	check("watches open, a refresh before the sync", false)
	f.sync()
	check("synced, no refresh since", false)
	f.refreshed(true, nil)
	check("synced and caught up", true)
	closeCRDs()
	check("one watch closed", false)
	closeCRDs2 := crds.opened()
	check("that watch open again", true)
	closeCRDs()
	check("the old watch's late end", true)
	f.refreshed(true, errors.New("connection refused"))
	check("a refresh failed", false)
	f.refreshed(true, &discovery.PartialError{})
	check("a refresh read the server, some group-versions failed", true)
	closeAPIServices()
	closeAPIServices()
	check("the other watch closed (twice)", false)
	apiServices.opened()
	check("open again", true)
	f.end()
	check("the run ended", false)
	closeCRDs2()
	crds.opened()
	f.refreshed(true, nil)
	check("after the end", false)
}

// TestFollowerConcurrent runs under -race: watches that open and close,
// refreshes and the sync, from goroutines of their own, leave the client
// followed as the final state says, and not at all after the end.
func TestFollowerConcurrent(t *testing.T) {
	c, _ := newWatcher(t)
	f := newFollower(c)
	streams := []*stream{f.stream(), f.stream()}
	var wg sync.WaitGroup
	for _, s := range streams {
		wg.Go(func() {
			for range 1000 {
				closed := s.opened()
				wg.Go(closed) // a late end of an old watch, or this one's
			}
		})
	}
	wg.Go(f.sync)
	wg.Go(func() {
		for i := range 1000 {
			f.refreshed(true, [2]error{nil, errors.New("x")}[i%2])
		}
	})
	wg.Wait()
	f.refreshed(true, nil)
	for _, s := range streams {
		s.opened()
	}
	if !c.Following() {
		t.Fatal("not Following with every watch open, synced and caught up")
	}
	f.end()
	if c.Following() {
		t.Fatal("Following after the end")
	}
}

// TestBoundedWatchIsLive: a watch is live (live called) at once, or, if
// it streams the initial list first, at the bookmark that ends it; its
// end is told when its connection closes, or it is stopped.
func TestBoundedWatchIsLive(t *testing.T) {
	var mu sync.Mutex
	lives, ends := 0, 0
	live := func() func() {
		mu.Lock()
		lives++
		mu.Unlock()
		return func() { mu.Lock(); ends++; mu.Unlock() }
	}
	count := func() (int, int) { mu.Lock(); defer mu.Unlock(); return lives, ends }
	in := apiwatch.NewFake()
	w := newObjectBound(slimCRD).watch(in, true, live)
	go func() {
		in.Add(crdMeta(0))
		in.Action(apiwatch.Bookmark, &metav1.PartialObjectMetadata{})
		in.Action(apiwatch.Bookmark, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
		in.Add(crdMeta(1))
		in.Stop() // the connection closes
	}()
	n := 0
	for range w.ResultChan() {
		n++
		// The loop reads the next event while this one is read: after
		// the first, it may hold the plain bookmark, not the one that
		// ends the list; when that one arrives, live has been told.
		if l, _ := count(); n == 1 && l != 0 || n == 3 && l != 1 {
			t.Fatalf("live told %d times at event %d of a watch-list", l, n)
		}
	}
	if l, e := count(); l != 1 || e != 1 {
		t.Fatalf("a watch-list: live told %d times, its end %d, want 1 and 1", l, e)
	}

	in = apiwatch.NewFake()
	w = newObjectBound(slimCRD).watch(in, false, live)
	go in.Add(crdMeta(0))
	<-w.ResultChan()
	if l, e := count(); l != 2 || e != 1 {
		t.Fatalf("a watch: live told %d times, its end %d, want 2 and 1", l, e)
	}
	w.Stop()
	for range w.ResultChan() {
	}
	if l, e := count(); l != 2 || e != 2 {
		t.Fatalf("a stopped watch: live told %d times, its end %d, want 2 and 2", l, e)
	}
}
