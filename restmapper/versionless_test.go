package restmapper_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
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
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Lookups without a version (restmapper's doc, "Freshness"): the version a
// mapper picks for them follows the server's versions of the group, as
// kind lookups follow its kinds (controller-runtime#3542 and
// fluxcd/kustomize-controller#1680: a group known at one version never saw
// a later one there).

// clockedMapper is a mapper and its discovery client on one fake clock.
func clockedMapper(t *testing.T, base string, opts ...restmapper.Option) (*restmapper.Mapper, *discovery.Client, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	c, err := discovery.NewForHTTPClient(nil, base, discovery.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(c, append([]restmapper.Option{restmapper.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m, c, clk
}

// clientGoAfterReset is what client-go's DeferredDiscoveryRESTMapper
// answers over the server's discovery as it is now (a fresh memory cache,
// as after its Reset).
func clientGoAfterReset(t *testing.T, base string) meta.RESTMapper {
	t.Helper()
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(&rest.Config{Host: base, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	m := cgrestmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	m.Reset()
	return m
}

// versionlessAnswers asks every versionless question about gk (its
// resource plural) and renders the answers, errors included.
func versionlessAnswers(m meta.RESTMapper, gk schema.GroupKind, plural string) string {
	gr := schema.GroupVersionResource{Group: gk.Group, Resource: plural}
	mapping, err1 := m.RESTMapping(gk)
	mappings, err2 := m.RESTMappings(gk)
	kind, err3 := m.KindFor(gr)
	kinds, err4 := m.KindsFor(gr)
	res, err5 := m.ResourceFor(gr)
	ress, err6 := m.ResourcesFor(gr)
	var mv []string
	for _, mp := range mappings {
		mv = append(mv, mp.GroupVersionKind.Version+"/"+string(mp.Scope.Name()))
	}
	v := ""
	if mapping != nil {
		v = mapping.GroupVersionKind.Version + "/" + string(mapping.Scope.Name())
	}
	return fmt.Sprintf("RESTMapping %s %v\nRESTMappings %v %v\nKindFor %v %v\nKindsFor %v %v\nResourceFor %v %v\nResourcesFor %v %v",
		v, noMatch(err1), mv, noMatch(err2), kind, noMatch(err3), kinds, noMatch(err4), res, noMatch(err5), ress, noMatch(err6))
}

// noMatch renders an error as whether it is a no-match: the texts of
// client-go's and our errors may differ where both say "no match".
func noMatch(err error) string {
	switch {
	case err == nil:
		return "ok"
	case meta.IsNoMatchError(err):
		return "no match"
	}
	return err.Error()
}

// TestVersionlessSeesNewVersion: a kind looked up without a version at
// v1alpha1 is mapped at v1 once v1 is added to its CRD (and preferred),
// by every versionless question, in the order client-go's deferred mapper
// gives after a Reset; lookups within the interval cost the server
// nothing.
func TestVersionlessSeesNewVersion(t *testing.T) {
	srv, base := docserver.Start(t)
	m, _, clk := clockedMapper(t, base)
	crd := docserver.CRD{Group: "infra.example.com", Versions: []string{"v1alpha1"}, Kind: "Cluster", Namespaced: true}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
	if got, want := versionlessAnswers(m, gk, "clusters"), versionlessAnswers(clientGoAfterReset(t, base), gk, "clusters"); got != want {
		t.Fatalf("before:\n%s\nclient-go:\n%s", got, want)
	}
	clk.Step(100 * time.Millisecond)

	crd.Versions = []string{"v1", "v1alpha1"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	for range 100 {
		versionlessAnswers(m, gk, "clusters")
	}
	if n := srv.Stats().Requests; n != 0 {
		t.Errorf("100 rounds of versionless lookups within the interval of the last read sent %d requests, want none", n)
	}
	clk.Step(time.Second)
	want := versionlessAnswers(clientGoAfterReset(t, base), gk, "clusters")
	if got := versionlessAnswers(m, gk, "clusters"); got != want {
		t.Errorf("an interval after v1 was added:\n%s\nclient-go after a Reset:\n%s", got, want)
	}
	if mp, err := m.RESTMapping(gk); err != nil || mp.GroupVersionKind.Version != "v1" {
		t.Errorf("RESTMapping(%v) = %v, %v; want the new preferred version v1", gk, mp, err)
	}
	if st := m.Stats(); st.StaleRefreshes != 1 {
		t.Errorf("stale refreshes %d, want 1 (the first versionless lookup an interval after the last read)", st.StaleRefreshes)
	}
}

// TestVersionlessNewKindInNewVersion is controller-runtime#3542's case: a
// group known at v1alpha1 (a kind of it looked up without a version)
// gains a CRD served only at v1beta1; its kind, looked up without a
// version, is found at its first lookup, as is its resource.
func TestVersionlessNewKindInNewVersion(t *testing.T) {
	srv, base := docserver.Start(t)
	m, _, clk := clockedMapper(t, base)
	old := docserver.CRD{Group: "infrastructure.cluster.x-k8s.io", Versions: []string{"v1alpha1"}, Kind: "OldMachine", Namespaced: true}
	if err := srv.AddCRD(old); err != nil {
		t.Fatal(err)
	}
	if mp, err := m.RESTMapping(schema.GroupKind{Group: old.Group, Kind: old.Kind}); err != nil || mp.GroupVersionKind.Version != "v1alpha1" {
		t.Fatalf("before: %v %v", mp, err)
	}
	gk := schema.GroupKind{Group: old.Group, Kind: "OpenStackCluster"}
	if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
		t.Fatalf("before its CRD: %v", err)
	}
	clk.Step(10 * time.Millisecond)
	if err := srv.AddCRD(docserver.CRD{Group: gk.Group, Versions: []string{"v1beta1"}, Kind: gk.Kind, Namespaced: true}); err != nil {
		t.Fatal(err)
	}
	// The question missed 10 ms ago: its backoff (50 ms) has not passed,
	// but the other questions are first misses.
	if mps, err := m.RESTMappings(gk); err != nil || len(mps) != 1 || mps[0].GroupVersionKind.Version != "v1beta1" {
		t.Errorf("RESTMappings(%v) after its CRD: %v %v", gk, mps, err)
	}
	gvr := schema.GroupVersionResource{Group: gk.Group, Resource: "openstackclusters"}
	if kinds, err := m.KindsFor(gvr); err != nil || len(kinds) != 1 || kinds[0] != gk.WithVersion("v1beta1") {
		t.Errorf("KindsFor(%v) after its CRD: %v %v", gvr, kinds, err)
	}
	clk.Step(50 * time.Millisecond)
	if mp, err := m.RESTMapping(gk); err != nil || mp.GroupVersionKind.Version != "v1beta1" {
		t.Errorf("RESTMapping(%v) after its CRD: %v %v", gk, mp, err)
	}
}

// TestVersionlessGroupAppearsLater: a group the server does not serve at
// the first lookups, asked for by group and resource or group and kind,
// is found after its CRD is installed.
func TestVersionlessGroupAppearsLater(t *testing.T) {
	srv, base := docserver.Start(t)
	m, _, clk := clockedMapper(t, base)
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	gvr := schema.GroupVersionResource{Group: gk.Group, Resource: "lates"}
	if _, err := m.KindsFor(gvr); !meta.IsNoMatchError(err) {
		t.Fatalf("before: %v", err)
	}
	if _, err := m.RESTMappings(gk); !meta.IsNoMatchError(err) {
		t.Fatalf("before: %v", err)
	}
	if err := srv.AddCRD(docserver.CRD{Group: gk.Group, Versions: []string{"v2", "v1"}, Kind: gk.Kind}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	want := versionlessAnswers(clientGoAfterReset(t, base), gk, "lates")
	if got := versionlessAnswers(m, gk, "lates"); got != want {
		t.Errorf("after the group appeared:\n%s\nclient-go:\n%s", got, want)
	}
}

// TestVersionlessVersionDisappears: when the preferred version of a CRD is
// removed, lookups without a version stop naming it an interval later.
func TestVersionlessVersionDisappears(t *testing.T) {
	srv, base := docserver.Start(t)
	m, _, clk := clockedMapper(t, base)
	crd := docserver.CRD{Group: "infra.example.com", Versions: []string{"v2", "v1"}, Kind: "Cluster"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
	if mp, err := m.RESTMapping(gk); err != nil || mp.GroupVersionKind.Version != "v2" {
		t.Fatalf("before: %v %v", mp, err)
	}
	if err := srv.RemoveCRD(crd.Group, "clusters"); err != nil {
		t.Fatal(err)
	}
	crd.Versions = []string{"v1"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second + time.Millisecond)
	want := versionlessAnswers(clientGoAfterReset(t, base), gk, "clusters")
	if got := versionlessAnswers(m, gk, "clusters"); got != want {
		t.Errorf("an interval after v2 was removed:\n%s\nclient-go:\n%s", got, want)
	}
	if kinds, err := m.KindsFor(schema.GroupVersionResource{Group: gk.Group, Resource: "clusters"}); err != nil || slices.Contains(kinds, gk.WithVersion("v2")) {
		t.Errorf("KindsFor names the removed version: %v %v", kinds, err)
	}
}

// TestVersionlessSparseCaller: a caller that looks a kind up every 5 s (a
// health check) sees a new version at its first lookup after the change,
// not after some number of lookups.
func TestVersionlessSparseCaller(t *testing.T) {
	srv, base := docserver.Start(t)
	m, _, clk := clockedMapper(t, base)
	crd := docserver.CRD{Group: "infra.example.com", Versions: []string{"v1alpha1"}, Kind: "Cluster"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
	for range 3 {
		if mp, err := m.RESTMapping(gk); err != nil || mp.GroupVersionKind.Version != "v1alpha1" {
			t.Fatalf("before: %v %v", mp, err)
		}
		clk.Step(5 * time.Second)
	}
	crd.Versions = []string{"v1", "v1alpha1"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	clk.Step(5 * time.Second)
	if mp, err := m.RESTMapping(gk); err != nil || mp.GroupVersionKind.Version != "v1" {
		t.Errorf("the first lookup 5 s after v1 was added: %v %v", mp, err)
	}
}

// TestVersionlessIsCheap: versionless lookups in a loop (hits, and misses
// of a kind that never exists, mixed) cost what a loop over a missing kind
// costs: about one refresh (two 304s) a second; lookups with a version do
// not refresh for freshness at all.
func TestVersionlessIsCheap(t *testing.T) {
	srv, base := docserver.Start(t)
	m, _, clk := clockedMapper(t, base)
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	nope := schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}
	pods := schema.GroupVersionResource{Resource: "pods"}
	if _, err := m.RESTMapping(deploy); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	// 20 s of fake time: under the discovery client's max age (30 s),
	// which would add its own background revalidation.
	for range 2000 {
		clk.Step(10 * time.Millisecond)
		if _, err := m.RESTMapping(deploy); err != nil {
			t.Fatal(err)
		}
		if _, err := m.KindFor(pods); err != nil {
			t.Fatal(err)
		}
		if _, err := m.RESTMapping(nope); !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
	}
	st := srv.Stats()
	if st.Requests > 2*(8+20) || st.NotModified != st.Requests {
		t.Errorf("20 s of versionless hits and misses: %+v, want at most a burst of 8 and one refresh a second, all 304s", st)
	}
	if ms := m.Stats(); ms.StaleRefreshes+ms.MissRefreshes != int64(st.Requests/2) {
		t.Errorf("mapper stats %+v do not account for the %d refreshes", ms, st.Requests/2)
	}

	m2, _, clk2 := clockedMapper(t, base)
	if _, err := m2.RESTMapping(deploy, "v1"); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	for range 1000 {
		clk2.Step(10 * time.Millisecond)
		if _, err := m2.RESTMapping(deploy, "v1"); err != nil {
			t.Fatal(err)
		}
		if _, err := m2.KindFor(schema.GroupVersionResource{Version: "v1", Resource: "pods"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Stats().Requests; n != 0 {
		t.Errorf("10 s of lookups with a version sent %d requests, want none", n)
	}
}

// TestVersionlessServerDown: with the server failing, versionless lookups
// are still answered from the last snapshot, and try the server again at
// most once an interval.
func TestVersionlessServerDown(t *testing.T) {
	srv, base := docserver.Start(t)
	m, _, clk := clockedMapper(t, base)
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	if _, err := m.RESTMapping(deploy); err != nil {
		t.Fatal(err)
	}
	srv.InjectFault("*", docserver.Fault{Status: http.StatusServiceUnavailable})
	srv.ResetRequests()
	for range 1000 {
		clk.Step(10 * time.Millisecond)
		if mp, err := m.RESTMapping(deploy); err != nil || mp.Resource.Resource != "deployments" {
			t.Fatalf("with the server down: %v %v", mp, err)
		}
	}
	if st := m.Stats(); st.StaleRefreshes < 5 || st.StaleRefreshes > 8+10 {
		t.Errorf("10 s with the server down: %d stale refreshes, want about one a second", st.StaleRefreshes)
	}
}

// TestVersionlessConcurrent runs under -race: versionless lookups from
// several goroutines while the server adds and removes versions; every
// answer names a version the server served, and once the server settles,
// an interval later every lookup names the final preferred version.
func TestVersionlessConcurrent(t *testing.T) {
	srv, base := docserver.Start(t)
	m, _ := newMapper(t, base, restmapper.WithMissRefreshInterval(time.Millisecond))
	crd := docserver.CRD{Group: "churn.example.com", Versions: []string{"v1alpha1"}, Kind: "Churn"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
	gvr := schema.GroupVersionResource{Group: crd.Group, Resource: "churns"}
	served := map[string]bool{"v1alpha1": true, "v1beta1": true, "v1": true}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				if mp, err := m.RESTMapping(gk); err == nil && !served[mp.GroupVersionKind.Version] {
					t.Errorf("RESTMapping: %v", mp.GroupVersionKind)
				} else if err != nil && !meta.IsNoMatchError(err) {
					t.Error(err)
				}
				if kinds, err := m.KindsFor(gvr); err == nil {
					for _, k := range kinds {
						if !served[k.Version] {
							t.Errorf("KindsFor: %v", k)
						}
					}
				}
				m.RESTMappings(gk)
				m.ResourcesFor(gvr)
			}
		})
	}
	for i := range 20 {
		crd.Versions = [][]string{{"v1beta1", "v1alpha1"}, {"v1", "v1beta1"}, {"v1alpha1"}}[i%3]
		if err := srv.RemoveCRD(crd.Group, "churns"); err != nil {
			t.Error(err)
		}
		if err := srv.AddCRD(crd); err != nil {
			t.Error(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	crd.Versions = []string{"v1", "v1beta1"}
	if err := srv.RemoveCRD(crd.Group, "churns"); err != nil {
		t.Error(err)
	}
	if err := srv.AddCRD(crd); err != nil {
		t.Error(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mp, err := m.RESTMapping(gk)
		if err == nil && mp.GroupVersionKind.Version == "v1" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("10 s after the server settled at v1: %v %v", mp, err)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
}

// TestVersionlessFollowed: while the client is followed (Client.Follow,
// as discovery/watch does), versionless lookups over several intervals
// send nothing, and answer what the follower's refresh brought; once the
// follower stops, the interval counts from the last validation again:
// not before an interval after it, and at once when it is older.
func TestVersionlessFollowed(t *testing.T) {
	srv, base := docserver.Start(t)
	m, c, clk := clockedMapper(t, base)
	crd := docserver.CRD{Group: "infra.example.com", Versions: []string{"v1alpha1"}, Kind: "Cluster", Namespaced: true}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
	version := func() string {
		t.Helper()
		mp, err := m.RESTMapping(gk)
		if err != nil {
			t.Fatal(err)
		}
		return mp.GroupVersionKind.Version
	}
	if v := version(); v != "v1alpha1" {
		t.Fatalf("before: %s", v)
	}
	stop := c.Follow()
	srv.ResetRequests()
	for range 5 {
		clk.Step(time.Second)
		for range 100 {
			versionlessAnswers(m, gk, "clusters")
		}
	}
	if n := srv.Stats().Requests; n != 0 {
		t.Errorf("5 intervals of versionless lookups while followed sent %d requests, want none", n)
	}
	// The follower sees v1 added and refreshes: the next lookup has it.
	crd.Versions = []string{"v1", "v1alpha1"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != "v1" {
		t.Errorf("after the follower's refresh: %s, want v1", v)
	}
	srv.ResetRequests()
	clk.Step(600 * time.Millisecond)
	stop()
	stop() // a second call does nothing: no other follower's count is taken
	if c.Following() {
		t.Fatal("Following after stop")
	}
	version()
	if n := srv.Stats().Requests; n != 0 {
		t.Errorf("a lookup within the interval of the last validation, after the follower stopped, sent %d requests", n)
	}
	clk.Step(500 * time.Millisecond)
	version()
	if n := srv.Stats().Requests; n != 2 {
		t.Errorf("the first lookup an interval after the last validation sent %d requests, want 2 (a revalidation)", n)
	}
	// Followed long after the last validation, then not: the first lookup
	// revalidates at once.
	stop = c.Follow()
	clk.Step(time.Minute)
	version()
	stop()
	srv.ResetRequests()
	version()
	version()
	if n := srv.Stats().Requests; n != 2 {
		t.Errorf("lookups just after following stopped, the last validation a minute old: %d requests, want 2", n)
	}
	if st := m.Stats(); st.StaleRefreshes != 2 {
		t.Errorf("stale refreshes %d, want 2 (one an interval after the follower's refresh, one after following stopped)", st.StaleRefreshes)
	}
}

// TestVersionlessFollowConcurrent runs under -race: followers come and go
// while versionless lookups go on and the clock moves; while one follower
// stays, nothing is sent whatever the others do, and when all have
// stopped the interval rule is back.
func TestVersionlessFollowConcurrent(t *testing.T) {
	srv, base := docserver.Start(t)
	m, c, clk := clockedMapper(t, base)
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	if _, err := m.RESTMapping(deploy); err != nil {
		t.Fatal(err)
	}
	anchor := c.Follow()
	srv.ResetRequests()
	var done atomic.Bool
	var churn, lookups sync.WaitGroup
	for range 8 {
		churn.Go(func() {
			for !done.Load() {
				stop := c.Follow()
				if !c.Following() {
					t.Error("not Following right after Follow")
				}
				stop()
				stop()
			}
		})
	}
	for range 4 {
		lookups.Go(func() {
			for !done.Load() {
				if mp, err := m.RESTMapping(deploy); err != nil || mp.Resource.Resource != "deployments" {
					t.Errorf("RESTMapping: %v %v", mp, err)
				}
				m.KindFor(schema.GroupVersionResource{Group: "apps", Resource: "deployments"})
			}
		})
	}
	for range 20 {
		clk.Step(500 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	done.Store(true)
	churn.Wait()
	lookups.Wait()
	if n := srv.Stats().Requests; n != 0 {
		t.Errorf("10 s of versionless lookups while one follower stayed sent %d requests", n)
	}
	if !c.Following() {
		t.Fatal("the churn of other followers took the anchor's count")
	}
	anchor()
	if c.Following() {
		t.Fatal("Following after every follower stopped")
	}
	if _, err := m.RESTMapping(deploy); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.StaleRefreshes != 1 || srv.Stats().Requests != 2 {
		t.Errorf("the first lookup after the last follower stopped: %d stale refreshes, %d requests; want 1 and 2", st.StaleRefreshes, srv.Stats().Requests)
	}
}

// BenchmarkVersionlessHit: RESTMapping(gk) answered from memory, with the
// client followed (one atomic load decides) or not (a flag the interval's
// timer sets; a revalidation, two 304s, once a second of the run).
func BenchmarkVersionlessHit(b *testing.B) {
	_, base := docserver.Start(b)
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	for _, followed := range []bool{false, true} {
		b.Run(fmt.Sprintf("followed=%v", followed), func(b *testing.B) {
			c, err := discovery.NewForHTTPClient(nil, base)
			if err != nil {
				b.Fatal(err)
			}
			m, err := restmapper.New(c)
			if err != nil {
				b.Fatal(err)
			}
			if followed {
				defer c.Follow()()
			}
			if _, err := m.RESTMapping(deploy); err != nil {
				b.Fatal(err)
			}
			before := c.Stats().Requests
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.RESTMapping(deploy); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.Stats().Requests-before)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}
