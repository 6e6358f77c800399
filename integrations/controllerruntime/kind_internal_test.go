package controllerruntime

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestServesKindIsTheMappers: a waiting Kind decides from the snapshot
// (servesKind) what kubeatlas's mapper would answer over it: served
// unless the mapper's answer is a NoKindMatch, for kinds as written, in
// lower case, as guessed List kinds, with and without a version, and for
// versions and groups not served.
func TestServesKindIsTheMappers(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(3, 2))
	dc, err := discovery.NewForHTTPClient(http.DefaultClient, base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(dc)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := dc.Snapshot(context.Background())
	if snap == nil {
		t.Fatal(err)
	}
	var kinds []schema.GroupVersionKind
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				k := schema.GroupVersionKind{Group: g.Name, Version: v.Version, Kind: r.Kind.Kind}
				kinds = append(kinds, k)
			}
		}
	}
	if len(kinds) < 20 {
		t.Fatalf("the fake serves %d kinds", len(kinds))
	}
	var asked []schema.GroupVersionKind
	for _, k := range kinds {
		for _, kind := range []string{k.Kind, strings.ToLower(k.Kind), k.Kind + "List", k.Kind + "x"} {
			for _, version := range []string{k.Version, "", "v9"} {
				asked = append(asked, schema.GroupVersionKind{Group: k.Group, Version: version, Kind: kind})
			}
			asked = append(asked, schema.GroupVersionKind{Group: k.Group + ".missing", Version: k.Version, Kind: kind})
		}
	}
	served := 0
	for _, gvk := range asked {
		_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		want := err == nil || !meta.IsNoMatchError(err)
		if got := servesKind(snap, gvk); got != want {
			t.Errorf("servesKind(%v) = %v; the mapper answers %v", gvk, got, err)
		}
		if want {
			served++
		}
	}
	if served == 0 || served == len(asked) {
		t.Errorf("%d of %d kinds asked for are served: the test asks nothing", served, len(asked))
	}
	if s := dc.Current(); s.Generation() != snap.Generation() {
		t.Fatalf("discovery changed while asking (generation %d, then %d)", snap.Generation(), s.Generation())
	}
}
