package clientgo_test

import (
	"slices"
	"testing"

	"github.com/kubeatlas/kubeatlas/internal/clientgooracle"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestClientGoDifferentialStale names where the adapter is better than
// client-go: a Stale group-version keeps its resources and stays listed,
// while both report it failed. Removing it from the adapter's answers leaves
// client-go's.
func TestClientGoDifferentialStale(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	gv := schema.GroupVersion{Group: "g001.stress.example.com", Version: "v1beta1"}
	if err := srv.SetStale(gv, true); err != nil {
		t.Fatal(err)
	}
	want := clientgooracle.Ask(t, clientGo(t, base))
	got := clientgooracle.Ask(t, adapter(t, base))
	if !slices.Equal(got.Failed, []schema.GroupVersion{gv}) || !slices.Equal(want.Failed, got.Failed) {
		t.Fatalf("failed group-versions: adapter %v, client-go %v, want [%s]", got.Failed, want.Failed, gv)
	}
	// The difference: the adapter lists the stale version and its resources.
	i := slices.IndexFunc(got.Resources, func(l *metav1.APIResourceList) bool { return l.GroupVersion == gv.String() })
	if i < 0 || len(got.Resources[i].APIResources) == 0 {
		t.Fatalf("the adapter dropped the stale group-version's resources")
	}
	got.Resources = slices.Delete(got.Resources, i, i+1)
	// The preferred-resources helpers list every group-version they were
	// given resources for, so the stale one appears there, empty.
	isStale := func(l *metav1.APIResourceList) bool { return l.GroupVersion == gv.String() && len(l.APIResources) == 0 }
	got.Preferred = slices.DeleteFunc(got.Preferred, isStale)
	got.PreferredNS = slices.DeleteFunc(got.PreferredNS, isStale)
	for _, g := range got.Groups {
		g.Versions = slices.DeleteFunc(slices.Clone(g.Versions), func(v metav1.GroupVersionForDiscovery) bool { return v.GroupVersion == gv.String() })
	}
	for _, g := range got.GroupResources {
		if g.Group.Name == gv.Group {
			delete(g.VersionedResources, gv.Version)
			g.Group.Versions = slices.DeleteFunc(slices.Clone(g.Group.Versions), func(v metav1.GroupVersionForDiscovery) bool { return v.Version == gv.Version })
		}
	}
	clientgooracle.Compare(t, got, want)
}

// TestClientGoStaleNeverReached: a Stale group-version with nothing known
// of it (an aggregated API server that was never reached, as a real
// kube-apiserver serves it: no resources) is left out as client-go leaves
// it, both as a group of its own and beside a served version of a group;
// both report it failed.
func TestClientGoStaleNeverReached(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	dead := []schema.GroupVersion{{Group: "metrics.example.com", Version: "v1beta1"}, {Group: "g001.stress.example.com", Version: "v9"}}
	for _, gv := range dead {
		if err := srv.SetGroupVersion(gv.Group, apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}); err != nil {
			t.Fatal(err)
		}
	}
	want := clientgooracle.Ask(t, clientGo(t, base))
	got := clientgooracle.Ask(t, adapter(t, base))
	if len(got.Failed) != 2 {
		t.Errorf("failed group-versions: %v, want %v", got.Failed, dead)
	}
	clientgooracle.Compare(t, got, want)
}

// TestClientGoInvalidate: Invalidate then a read costs two 304s on an
// unchanged cluster, where client-go's memory cache downloads everything.
func TestClientGoInvalidate(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	a := adapter(t, base)
	if a.Fresh() {
		t.Errorf("fresh before the first read")
	}
	if _, err := a.ServerGroups(); err != nil {
		t.Fatal(err)
	}
	if !a.Fresh() {
		t.Errorf("not fresh after a read")
	}
	srv.ResetRequests()
	a.Invalidate()
	if a.Fresh() {
		t.Errorf("fresh after Invalidate")
	}
	if _, _, err := a.ServerGroupsAndResources(); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Requests != 2 || st.NotModified != 2 {
		t.Errorf("read after Invalidate: %+v, want two 304s", st)
	}
	if _, err := a.ServerResourcesForGroupVersion("nope.example.com/v1"); err == nil {
		t.Errorf("no error for an unknown group-version")
	}
	if l, err := a.ServerResourcesForGroupVersion("apps/v1"); err != nil || len(l.APIResources) == 0 {
		t.Errorf("apps/v1: %v", err)
	}
	if v, err := a.ServerVersion(); err != nil || v.GitVersion != "v1.36.3" {
		t.Errorf("ServerVersion: %v %v", v, err)
	}
}

// TestDeferredRESTMapperPicksUpNewCRD: client-go's deferred mapper over the
// adapter finds a CRD installed after start, at the cost of a conditional
// refresh.
func TestDeferredRESTMapperPicksUpNewCRD(t *testing.T) {
	srv, base := docserver.Start(t)
	a := adapter(t, base)
	m := restmapper.NewDeferredDiscoveryRESTMapper(a)
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	if _, err := m.RESTMapping(gk); err == nil {
		t.Fatal("mapped a kind that does not exist yet")
	}
	if err := srv.AddCRD(docserver.CRD{Group: gk.Group, Versions: []string{"v1"}, Kind: gk.Kind}); err != nil {
		t.Fatal(err)
	}
	m.Reset()
	mapping, err := m.RESTMapping(gk)
	if err != nil || mapping.Resource.Resource != "lates" {
		t.Fatalf("after install: %v %v", mapping, err)
	}
}

// answers, ask, compareAnswers and firstDifference compare the adapter's
// answers with client-go's. internal/withfake/discovery/clientgo (the
// differential test over every server generation) keeps a copy.
