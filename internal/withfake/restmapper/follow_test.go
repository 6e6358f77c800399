package restmapper_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Lookups without a version while discovery/watch follows the client
// (restmapper's doc, "Freshness"; discovery.Client.Follow): they send
// nothing, however long they go on, and still see a version added to a
// group, through the watch's refresh; when the watch stops following (its
// connection lost and backing off, its context ended), the interval rule
// applies again.

// followEnv is a mapper over a client that a Watcher keeps current; the
// mapper and the client share a fake clock (the interval), the watch
// runs on real time.
type followEnv struct {
	srv   *discoverytest.Server
	c     *discovery.Client
	m     *restmapper.Mapper
	clk   *clocktesting.FakeClock
	gk    schema.GroupKind
	crd   discoverytest.CRD
	stop  context.CancelFunc
	ended chan struct{} // closed when Run has returned
}

func startFollowEnv(t *testing.T) *followEnv {
	t.Helper()
	srv, base := discoverytest.Start(t)
	e := &followEnv{srv: srv, clk: clocktesting.NewFakeClock(time.Now()), ended: make(chan struct{}),
		crd: discoverytest.CRD{Group: "infra.example.com", Versions: []string{"v1alpha1"}, Kind: "Cluster"}}
	e.gk = schema.GroupKind{Group: e.crd.Group, Kind: e.crd.Kind}
	if err := srv.AddCRD(e.crd); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.c, err = discovery.NewForHTTPClient(nil, base, discovery.WithClock(e.clk)); err != nil {
		t.Fatal(err)
	}
	if e.m, err = restmapper.New(e.c, restmapper.WithClock(e.clk)); err != nil {
		t.Fatal(err)
	}
	if v := e.version(t); v != "v1alpha1" {
		t.Fatalf("before: %s", v)
	}
	w, err := watch.New(e.c, watch.WithUpgradePoll(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	go func() { defer close(e.ended); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-e.ended })
	waitFor(t, "the watch following the client", e.c.Following)
	return e
}

// version is the version RESTMapping(gk) maps the CRD's kind at.
func (e *followEnv) version(t *testing.T) string {
	t.Helper()
	mp, err := e.m.RESTMapping(e.gk)
	if err != nil {
		t.Fatal(err)
	}
	return mp.GroupVersionKind.Version
}

// lookFor makes every kind of versionless lookup for intervals
// intervals of the fake clock, 100 rounds each, and returns the discovery
// requests the client sent meanwhile.
func (e *followEnv) lookFor(t *testing.T, intervals int) int64 {
	t.Helper()
	before := e.c.Stats().Requests
	gr := schema.GroupVersionResource{Group: e.gk.Group, Resource: "clusters"}
	for range intervals {
		e.clk.Step(time.Second)
		for range 100 {
			if _, err := e.m.RESTMapping(e.gk); err != nil {
				t.Fatal(err)
			}
			_, _ = e.m.RESTMappings(e.gk)
			_, _ = e.m.KindFor(gr)
			_, _ = e.m.ResourcesFor(gr)
		}
	}
	return e.c.Stats().Requests - before
}

// TestVersionlessFollowedByWatch: with a watch following the client, ten
// intervals of versionless lookups send no discovery request, yet a
// version added to the CRD is in their answers as soon as the watch has
// refreshed (the fake clock does not move: no interval could have made
// the mapper look). Ending the watch's context ends following before Run
// returns, and the next lookup an interval on revalidates.
func TestVersionlessFollowedByWatch(t *testing.T) {
	e := startFollowEnv(t)
	if n := e.lookFor(t, 10); n != 0 {
		t.Errorf("10 intervals of versionless lookups while the watch follows sent %d discovery requests, want none", n)
	}
	e.crd.Versions = []string{"v1", "v1alpha1"}
	if err := e.srv.AddCRD(e.crd); err != nil { // a MODIFIED event, a new generation
		t.Fatal(err)
	}
	waitFor(t, "RESTMapping at v1, added to the CRD", func() bool { return e.version(t) == "v1" })
	if st := e.m.Stats(); st.StaleRefreshes != 0 {
		t.Errorf("%d stale refreshes while the watch followed, want none", st.StaleRefreshes)
	}

	e.stop()
	<-e.ended
	if e.c.Following() {
		t.Fatal("Following after Run returned")
	}
	if n := e.lookFor(t, 3); n < 4 {
		t.Errorf("3 intervals of versionless lookups after the watch ended sent %d discovery requests, want a revalidation (2) an interval", n)
	}
	if st := e.m.Stats(); st.StaleRefreshes < 2 {
		t.Errorf("%d stale refreshes after the watch ended, want about one an interval", st.StaleRefreshes)
	}
}

// TestVersionlessWatchConnectionLost: the watch's connection dropped, and
// the server refusing its CRD lists and watches (500), it backs off and
// does not follow: versionless lookups revalidate once an interval again.
// When the server serves them again, it follows again and lookups are
// free again.
func TestVersionlessWatchConnectionLost(t *testing.T) {
	e := startFollowEnv(t)
	const crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	e.srv.InjectFault(crds, discoverytest.Fault{Status: http.StatusInternalServerError})
	e.srv.DropWatches()
	waitFor(t, "following to stop", func() bool { return !e.c.Following() })
	if n := e.lookFor(t, 3); n < 4 {
		t.Errorf("3 intervals of versionless lookups with the watch's connection lost sent %d discovery requests, want a revalidation (2) an interval", n)
	}
	stale := e.m.Stats().StaleRefreshes
	if stale < 2 {
		t.Errorf("%d stale refreshes with the watch's connection lost, want about one an interval", stale)
	}
	// A version added meanwhile is seen by the interval rule.
	e.crd.Versions = []string{"v1", "v1alpha1"}
	if err := e.srv.AddCRD(e.crd); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(time.Second)
	if e.c.Following() {
		t.Fatal("Following while the server refuses the CRD watch")
	}
	if v := e.version(t); v != "v1" {
		t.Errorf("an interval after v1 was added, the watch not following: %s", v)
	}

	e.srv.ClearFaults()
	waitFor(t, "following again", e.c.Following)
	waitFor(t, "v1", func() bool { return e.version(t) == "v1" })
	stale = e.m.Stats().StaleRefreshes
	if n := e.lookFor(t, 5); n != 0 {
		t.Errorf("5 intervals of versionless lookups once the watch follows again sent %d discovery requests, want none", n)
	}
	if st := e.m.Stats(); st.StaleRefreshes != stale {
		t.Errorf("%d stale refreshes once the watch follows again", st.StaleRefreshes-stale)
	}
}

// TestVersionlessWatchDropsConcurrent runs under -race: lookups from
// several goroutines while the watch's connection is dropped again and
// again (it resumes at once) and the clock moves; every answer is a
// version the server serves, and each request sent is a revalidation made
// while the watch was not following (at most one an interval).
func TestVersionlessWatchDropsConcurrent(t *testing.T) {
	e := startFollowEnv(t)
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !done.Load() {
				if mp, err := e.m.RESTMapping(e.gk); err != nil || mp.GroupVersionKind.Version != "v1alpha1" {
					t.Errorf("RESTMapping: %v %v", mp, err)
				}
				_, _ = e.m.KindsFor(schema.GroupVersionResource{Group: e.gk.Group, Resource: "clusters"})
			}
		})
	}
	for range 20 {
		e.srv.DropWatches()
		e.clk.Step(500 * time.Millisecond)
		time.Sleep(20 * time.Millisecond)
	}
	done.Store(true)
	wg.Wait()
	if st := e.m.Stats(); st.StaleRefreshes > 10+1 {
		t.Errorf("%d stale refreshes in 10 intervals, want at most about one an interval", st.StaleRefreshes)
	}
	waitFor(t, "following after the drops", e.c.Following)
	if n := e.lookFor(t, 3); n != 0 {
		t.Errorf("3 intervals of versionless lookups once the watch follows again sent %d discovery requests", n)
	}
}

// waitFor polls cond until it holds, for at most 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
