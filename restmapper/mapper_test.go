package restmapper_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestAmbiguousShortName: where client-go picks either resource sharing a
// short name at random (map order), kubeatlas picks the first in discovery
// order, every time, and warns as client-go does.
func TestAmbiguousShortName(t *testing.T) {
	_, base := docserver.Start(t)
	var warnings []string
	m, _ := newMapper(t, base, restmapper.WithWarningHandler(func(w string) { warnings = append(warnings, w) }))
	for range 3 {
		gvr, err := m.ResourceFor(schema.GroupVersionResource{Resource: "ev"})
		if err != nil || gvr != (schema.GroupVersionResource{Version: "v1", Resource: "events"}) {
			t.Fatalf("ev: %v %v, want the core group's events", gvr, err)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "events.events.k8s.io") {
		t.Errorf("warnings %q", warnings)
	}
	if gvr, err := m.ResourceFor(schema.GroupVersionResource{Group: "events.k8s.io", Resource: "ev"}); err != nil || gvr.Group != "events.k8s.io" {
		t.Errorf("ev in events.k8s.io: %v %v", gvr, err)
	}
}

// TestMissesAreCheap: lookups of a kind that never exists, asked for in a
// loop, cost a handful of refreshes (two 304s each) in the first second and
// then one a second; 100,000 misses over 500 other missing kinds at once
// cost at most the first-miss burst.
func TestMissesAreCheap(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	gk := schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}
	if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
		t.Fatalf("first miss: %v", err)
	}
	srv.ResetRequests()
	for i := range 100_000 {
		gk := gk
		if i%2 == 1 {
			gk.Kind = fmt.Sprintf("Nope%d", i%1000) // 500 other missing kinds
		}
		if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
			t.Fatalf("miss: %v", err)
		}
	}
	// The first-miss budget is 8 refreshes (the first miss read discovery
	// cold, and a refresh then would have read the same).
	if st := srv.Stats(); st.Requests > 2*8 || st.NotModified != st.Requests {
		t.Errorf("100,000 misses within a second of the first: %+v, want at most 8 refreshes of two 304s", st)
	}

	// One kind asked for every 10 ms for 20 s: its backoff grows to a second.
	srv.ResetRequests()
	var lastFive int
	for i := range 2000 {
		clk.Step(10 * time.Millisecond)
		if i == 1500 {
			lastFive = srv.Stats().Requests
		}
		if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
			t.Fatalf("miss: %v", err)
		}
	}
	st := srv.Stats()
	if lastFive = st.Requests - lastFive; lastFive > 2*5 {
		t.Errorf("the last 5 s of a loop over a missing kind sent %d requests, want at most one refresh (2) a second", lastFive)
	}
	if st.Requests > 2*(5+20) {
		t.Errorf("20 s of a loop over a missing kind sent %d requests, want at most 5 refreshes in its first second and one a second after", st.Requests)
	}
}

// TestNewKindFoundAtFirstLookup: a controller creates a CRD and maps its
// kind, and 100 ms later does the same with a second; each is found at its
// first lookup,
// although other misses (a kind that never exists, asked for in a loop,
// and a few optional kinds probed once) refreshed discovery just before.
// With one limiter for the whole mapper the second was "no matches for
// kind" for up to a second.
func TestNewKindFoundAtFirstLookup(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	for i := range 200 {
		m.RESTMapping(schema.GroupKind{Group: "nope.example.com", Kind: "Nope"})
		if i%50 == 0 {
			m.RESTMapping(schema.GroupKind{Group: "optional.example.com", Kind: fmt.Sprintf("Optional%d", i)})
		}
		clk.Step(5 * time.Millisecond)
	}
	for _, crd := range []docserver.CRD{
		{Group: "a.example.com", Versions: []string{"v1"}, Kind: "First"},
		{Group: "b.example.com", Versions: []string{"v1"}, Kind: "Second"},
	} {
		if err := srv.AddCRD(crd); err != nil {
			t.Fatal(err)
		}
		gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
		if mp, err := m.RESTMapping(gk); err != nil || mp.Resource.Group != gk.Group {
			t.Errorf("%v at its first lookup: %v %v", gk, mp, err)
		}
		clk.Step(100 * time.Millisecond)
	}
}

// TestKindPolledWhileItsCRDBecomesServedIsFoundSoon: a kind looked up
// every 10 ms from before its CRD is served (controller-runtime's test
// polls so, for a second) is found within 200 ms of being served, not a
// second later: a question's backoff starts at 50 ms.
func TestKindPolledWhileItsCRDBecomesServedIsFoundSoon(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	for range 3 {
		if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
			t.Fatalf("before install: %v", err)
		}
		clk.Step(10 * time.Millisecond)
	}
	if err := srv.AddCRD(docserver.CRD{Group: gk.Group, Versions: []string{"v1"}, Kind: gk.Kind}); err != nil {
		t.Fatal(err)
	}
	for step := 0; ; step++ {
		if _, err := m.RESTMapping(gk); err == nil {
			break
		} else if step == 20 {
			t.Fatalf("not found 200 ms after install: %v", err)
		}
		clk.Step(10 * time.Millisecond)
	}
}

// TestLongAskedKindFoundWithinASecond: a kind a controller kept asking for
// during 45 s before its CRD was served is found within a second of it
// (the per-input backoff this replaced had grown to 32 s).
func TestLongAskedKindFoundWithinASecond(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	for range 450 {
		if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
			t.Fatalf("before install: %v", err)
		}
		clk.Step(100 * time.Millisecond)
	}
	if err := srv.AddCRD(docserver.CRD{Group: gk.Group, Versions: []string{"v1"}, Kind: gk.Kind}); err != nil {
		t.Fatal(err)
	}
	for step := 0; ; step++ {
		if _, err := m.RESTMapping(gk); err == nil {
			break
		} else if step == 10 {
			t.Fatalf("not found a second after install: %v", err)
		}
		clk.Step(100 * time.Millisecond)
	}
}

// TestFollowsCRDChanges: installed, re-scoped, re-versioned and deleted CRDs
// are picked up without a new mapper.
func TestFollowsCRDChanges(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
		t.Fatalf("before install: %v", err)
	}
	crd := docserver.CRD{Group: gk.Group, Versions: []string{"v1"}, Kind: gk.Kind, Namespaced: true, ShortNames: []string{"lt"}}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	// A second after the last miss, a miss refreshes again.
	clk.Step(time.Second)
	mapping, err := m.RESTMapping(gk, "v1")
	if err != nil || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("after install: %v %v", mapping, err)
	}
	if gvr, err := m.ResourceFor(schema.GroupVersionResource{Resource: "lt"}); err != nil || gvr.Resource != "lates" {
		t.Errorf("short name after install: %v %v", gvr, err)
	}
	// Re-scope and add a preferred version: the change shows after a Reset.
	crd.Namespaced, crd.Versions = false, []string{"v2", "v1"}
	if err := srv.RemoveCRD(gk.Group, "lates"); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	m.Reset()
	mapping, err = m.RESTMapping(gk)
	if err != nil || mapping.Scope.Name() != meta.RESTScopeNameRoot || mapping.GroupVersionKind.Version != "v2" {
		t.Fatalf("after re-scope: %+v %v", mapping, err)
	}
	if err := srv.RemoveCRD(gk.Group, "lates"); err != nil {
		t.Fatal(err)
	}
	m.Reset()
	if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
		t.Errorf("after delete: %v", err)
	}
}

// TestConcurrentLookups runs under -race: lookups while discovery changes.
func TestConcurrentLookups(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(30, 5))
	m, _ := newMapper(t, base, restmapper.WithMissRefreshInterval(time.Millisecond))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
					t.Error(err)
					return
				}
				m.KindFor(schema.GroupVersionResource{Resource: fmt.Sprintf("churn%ds", i%2)})
				m.Expand("all")
			}
		}()
	}
	for i := range 10 {
		crd := docserver.CRD{Group: "churn.example.com", Versions: []string{"v1"}, Kind: fmt.Sprintf("Churn%d", i%2)}
		if err := srv.AddCRD(crd); err != nil {
			t.Error(err)
		}
		m.Reset()
		if err := srv.RemoveCRD(crd.Group, strings.ToLower(crd.Kind)+"s"); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

// TestHitsAllocateNothing: a repeated lookup is a map read.
func TestHitsAllocateNothing(t *testing.T) {
	_, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	// An hour: lookups without a version revalidate discovery an
	// interval after it was read, and a stalled machine must not make
	// that happen within AllocsPerRun.
	m, _ := newMapper(t, base, restmapper.WithMissRefreshInterval(time.Hour))
	gvr := schema.GroupVersionResource{Resource: "deploy"}
	gk := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	if _, err := m.KindFor(gvr); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(gk); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		m.KindFor(gvr)
		m.RESTMapping(gk)
	}); n != 0 {
		t.Errorf("%v allocations per hit", n)
	}
}

// TestStats: Stats counts what a lookup found as its caller saw it: hits,
// misses (after the refresh a miss made, which MissRefreshes counts), and
// errors when there is no discovery at all; a kind found by its miss
// refresh is a hit.
func TestStats(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	if st := m.Stats(); st != (restmapper.Stats{}) {
		t.Fatalf("a new mapper's stats: %+v", st)
	}
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	for range 3 {
		if _, err := m.RESTMapping(deploy); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st != (restmapper.Stats{Hits: 3}) {
		t.Errorf("after 3 hits: %+v", st)
	}
	nope := schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}
	if _, err := m.RESTMapping(nope); !meta.IsNoMatchError(err) {
		t.Fatalf("a missing kind: %v", err)
	}
	if st := m.Stats(); st != (restmapper.Stats{Hits: 3, Misses: 1, MissRefreshes: 1}) {
		t.Errorf("after a miss: %+v", st)
	}
	late := docserver.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}
	if err := srv.AddCRD(late); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: late.Group, Kind: late.Kind}); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st != (restmapper.Stats{Hits: 4, Misses: 1, MissRefreshes: 2}) {
		t.Errorf("after a kind found by its miss refresh: %+v", st)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	m2, _ := newMapper(t, down.URL)
	if _, err := m2.KindFor(schema.GroupVersionResource{Resource: "pods"}); err == nil || meta.IsNoMatchError(err) {
		t.Fatalf("a lookup without discovery: %v, want the discovery error", err)
	}
	if st := m2.Stats(); st != (restmapper.Stats{Errors: 1}) {
		t.Errorf("after a lookup without discovery: %+v", st)
	}
}
