package restmapper_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

func newMapper(t testing.TB, base string, opts ...restmapper.Option) (*restmapper.Mapper, *discovery.Client) {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

// clientGoMapper is what the issue compares against: client-go's deferred
// discovery mapper over its memory cache, wrapped in its ShortcutExpander.
func clientGoMapper(t testing.TB, base string) (meta.RESTMapper, cgrestmapper.CategoryExpander) {
	t.Helper()
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(&rest.Config{Host: base, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	mc := memory.NewMemCacheClient(dc)
	return cgrestmapper.NewShortcutExpander(cgrestmapper.NewDeferredDiscoveryRESTMapper(mc), mc, nil),
		cgrestmapper.NewDiscoveryCategoryExpander(mc)
}

// questions builds inputs from the server's own resources: plural,
// singular, short and kind names, in several cases, with and without group
// and version, plus names that exist nowhere and partial group names.
//
// With stride n > 1, only every nth CRD's resources are asked about
// (client-go's answers cost up to a millisecond each at 500 CRDs).
func questions(t *testing.T, c *discovery.Client, stride int) ([]schema.GroupVersionResource, []schema.GroupKind) {
	snap, err := c.Snapshot(context.Background())
	if snap == nil {
		t.Fatal(err)
	}
	// client-go resolves a short name shared by two resources in map order,
	// so differently from run to run; those are tested on their own.
	owners := map[string]map[string]bool{}
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				for _, s := range r.ShortNames {
					if owners[s] == nil {
						owners[s] = map[string]bool{}
					}
					owners[s][g.Name+"/"+r.Name] = true
				}
			}
		}
	}
	var rs []schema.GroupVersionResource
	var ks []schema.GroupKind
	seen := 0
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				if strings.Contains(g.Name, ".example.") {
					if seen++; seen%stride != 0 {
						continue
					}
				}
				names := []string{r.Name, r.SingularName, strings.ToUpper(r.Name), strings.ToLower(r.Kind.Kind) + "lists"}
				for _, s := range r.ShortNames {
					if len(owners[s]) == 1 {
						names = append(names, s)
					}
				}
				for _, n := range names {
					rs = append(rs,
						schema.GroupVersionResource{Resource: n},
						schema.GroupVersionResource{Group: g.Name, Resource: n},
						schema.GroupVersionResource{Version: v.Version, Resource: n},
						schema.GroupVersionResource{Group: g.Name, Version: v.Version, Resource: n})
				}
				if len(g.Name) > 3 {
					rs = append(rs, schema.GroupVersionResource{Group: g.Name[:3], Resource: r.Name})
				}
				for _, k := range []string{r.Kind.Kind, strings.ToLower(r.Kind.Kind), strings.ToUpper(r.Kind.Kind), r.Kind.Kind + "List"} {
					ks = append(ks, schema.GroupKind{Group: g.Name, Kind: k}, schema.GroupKind{Kind: k})
				}
			}
		}
	}
	rs = append(rs, schema.GroupVersionResource{Resource: "doesnotexist"}, schema.GroupVersionResource{Group: "apps", Resource: "doesnotexist"},
		schema.GroupVersionResource{Resource: "lists"}, schema.GroupVersionResource{Resource: "list"})
	ks = append(ks, schema.GroupKind{Kind: "DoesNotExist"}, schema.GroupKind{Kind: "List"})
	return dedupe(rs), dedupe(ks)
}

func dedupe[T comparable](xs []T) []T {
	seen := map[T]bool{}
	return slices.DeleteFunc(xs, func(x T) bool {
		if seen[x] {
			return true
		}
		seen[x] = true
		return false
	})
}

func same(t *testing.T, what string, got, want any, gotErr, wantErr error) {
	t.Helper()
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %v, %v\nwant %v, %v", what, got, gotErr, want, wantErr)
	}
}

// TestSameAnswersAsClientGo asks both mappers everything and requires the
// same answers and errors, on the real v1.36.3 discovery and with CRDs in
// several versions.
func TestSameAnswersAsClientGo(t *testing.T) {
	for name, opts := range map[string][]discoverytest.Option{
		"fixture":                   nil,
		"crds":                      {discoverytest.WithCRDs(40, 6)},
		"legacy+crds":               {discoverytest.WithGeneration(discoverytest.GenerationLegacy), discoverytest.WithCRDs(20, 4)},
		"real server with 500 CRDs": nil,
	} {
		t.Run(name, func(t *testing.T) {
			var base string
			if strings.HasPrefix(name, "real") {
				base = serveCapture(t, "../../../restmapper/testdata/crd500")
			} else {
				_, base = discoverytest.Start(t, opts...)
			}
			m, c := newMapper(t, base)
			ref, refCategories := clientGoMapper(t, base)
			stride := 1
			if strings.HasPrefix(name, "real") {
				stride = 20
			}
			rs, ks := questions(t, c, stride)
			for _, r := range rs {
				gvk, err := m.KindFor(r)
				wgvk, werr := ref.KindFor(r)
				same(t, fmt.Sprintf("KindFor(%v)", r), gvk, wgvk, err, werr)
				gvks, err := m.KindsFor(r)
				wgvks, werr := ref.KindsFor(r)
				same(t, fmt.Sprintf("KindsFor(%v)", r), gvks, wgvks, err, werr)
				gvr, err := m.ResourceFor(r)
				wgvr, werr := ref.ResourceFor(r)
				same(t, fmt.Sprintf("ResourceFor(%v)", r), gvr, wgvr, err, werr)
				gvrs, err := m.ResourcesFor(r)
				wgvrs, werr := ref.ResourcesFor(r)
				same(t, fmt.Sprintf("ResourcesFor(%v)", r), gvrs, wgvrs, err, werr)
				if r.Group == "" && r.Version == "" {
					s, err := m.ResourceSingularizer(r.Resource)
					ws, werr := ref.ResourceSingularizer(r.Resource)
					same(t, fmt.Sprintf("ResourceSingularizer(%q)", r.Resource), s, ws, err, werr)
				}
			}
			for _, gk := range ks {
				for _, versions := range [][]string{nil, {"v1"}, {"v1beta1", "v1"}} {
					mp, err := m.RESTMapping(gk, versions...)
					wmp, werr := ref.RESTMapping(gk, versions...)
					same(t, fmt.Sprintf("RESTMapping(%v, %v)", gk, versions), mp, wmp, err, werr)
					mps, err := m.RESTMappings(gk, versions...)
					wmps, werr := ref.RESTMappings(gk, versions...)
					same(t, fmt.Sprintf("RESTMappings(%v, %v)", gk, versions), mps, wmps, err, werr)
				}
			}
			// Category expansion: client-go lists in map order and once per
			// version; kubeatlas in discovery order, once per resource.
			for _, cat := range []string{"all", "api-extensions", "stress", "nope"} {
				got, ok := m.Expand(cat)
				want, wok := refCategories.Expand(cat)
				if ok != wok || !slices.Equal(sortedGR(got), dedupe(sortedGR(want))) {
					t.Errorf("Expand(%q): %v %v, client-go %v %v", cat, got, ok, want, wok)
				}
			}
			if len(rs) < 200 || len(ks) < 100 {
				t.Fatalf("too few questions: %d, %d", len(rs), len(ks))
			}
		})
	}
}

func sortedGR(in []schema.GroupResource) []schema.GroupResource {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// TestAmbiguousShortName: where client-go picks either resource sharing a
// short name at random (map order), kubeatlas picks the first in discovery
// order, every time, and warns as client-go does.
func TestAmbiguousShortName(t *testing.T) {
	_, base := discoverytest.Start(t)
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
	srv, base := discoverytest.Start(t)
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
	srv, base := discoverytest.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	for i := range 200 {
		m.RESTMapping(schema.GroupKind{Group: "nope.example.com", Kind: "Nope"})
		if i%50 == 0 {
			m.RESTMapping(schema.GroupKind{Group: "optional.example.com", Kind: fmt.Sprintf("Optional%d", i)})
		}
		clk.Step(5 * time.Millisecond)
	}
	for _, crd := range []discoverytest.CRD{
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
	srv, base := discoverytest.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	for range 3 {
		if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
			t.Fatalf("before install: %v", err)
		}
		clk.Step(10 * time.Millisecond)
	}
	if err := srv.AddCRD(discoverytest.CRD{Group: gk.Group, Versions: []string{"v1"}, Kind: gk.Kind}); err != nil {
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
	srv, base := discoverytest.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	for range 450 {
		if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
			t.Fatalf("before install: %v", err)
		}
		clk.Step(100 * time.Millisecond)
	}
	if err := srv.AddCRD(discoverytest.CRD{Group: gk.Group, Versions: []string{"v1"}, Kind: gk.Kind}); err != nil {
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
	srv, base := discoverytest.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m, _ := newMapper(t, base, restmapper.WithClock(clk))
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
		t.Fatalf("before install: %v", err)
	}
	crd := discoverytest.CRD{Group: gk.Group, Versions: []string{"v1"}, Kind: gk.Kind, Namespaced: true, ShortNames: []string{"lt"}}
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
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(30, 5))
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
		crd := discoverytest.CRD{Group: "churn.example.com", Versions: []string{"v1"}, Kind: fmt.Sprintf("Churn%d", i%2)}
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
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	m, _ := newMapper(t, base)
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

// serveCapture serves /api and /apis as a real server answered them
// (captured aggregated discovery, protobuf or JSON as the Accept header
// prefers), for questions asked of real data rather than the fake
// server's.
func serveCapture(t testing.TB, dir string) string {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bodies := map[string][2][]byte{
		"/api":  {read("api.v2.pb"), read("api.v2.json")},
		"/apis": {read("apis.v2.pb"), read("apis.v2.json")},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		accept := r.Header.Get("Accept")
		if !ok || !strings.Contains(accept, "g=apidiscovery.k8s.io;v=v2;") {
			http.NotFound(w, r)
			return
		}
		// The first type named decides, as the API server's negotiation does.
		if strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;") {
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
			w.Write(b[0])
			return
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		w.Write(b[1])
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestStats: Stats counts what a lookup found as its caller saw it: hits,
// misses (after the refresh a miss made, which MissRefreshes counts), and
// errors when there is no discovery at all; a kind found by its miss
// refresh is a hit.
func TestStats(t *testing.T) {
	srv, base := discoverytest.Start(t)
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
	late := discoverytest.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}
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
