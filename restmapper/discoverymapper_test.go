package restmapper

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgrestmapper "k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// The Mapper is a client-go CategoryExpander too (mapper.go cannot say so
// without importing client-go's restmapper).
var _ cgrestmapper.CategoryExpander = (*Mapper)(nil)

// TestDiscoveryMapperIsClientGos pins discoverymapper.go, a copy of
// client-go's NewDiscoveryRESTMapper, to the original: over the same
// discovery (the real v1.36.3 documents and CRDs served in several
// versions), both answer every question the same, errors included.
func TestDiscoveryMapperIsClientGos(t *testing.T) {
	snap := docSnapshot(t, docserver.WithCRDs(40, 6))
	ours := groupResourcesOf(snap)
	theirs := make([]*cgrestmapper.APIGroupResources, len(ours))
	for i, g := range ours {
		theirs[i] = &cgrestmapper.APIGroupResources{Group: g.Group, VersionedResources: g.VersionedResources}
	}
	a, b := newDiscoveryRESTMapper(ours), cgrestmapper.NewDiscoveryRESTMapper(theirs)

	var resources []schema.GroupVersionResource
	var kinds []schema.GroupVersionKind
	for _, g := range ours {
		for v, rs := range g.VersionedResources {
			for _, r := range rs {
				for _, name := range []string{r.Name, r.SingularName, strings.ToUpper(r.Name), "no" + r.Name} {
					resources = append(resources,
						schema.GroupVersionResource{Resource: name},
						schema.GroupVersionResource{Group: g.Group.Name, Resource: name},
						schema.GroupVersionResource{Version: v, Resource: name},
						schema.GroupVersionResource{Group: g.Group.Name, Version: v, Resource: name})
				}
				for _, kind := range []string{r.Kind, strings.ToLower(r.Kind), r.Kind + "List", "No" + r.Kind} {
					kinds = append(kinds,
						schema.GroupVersionKind{Group: g.Group.Name, Kind: kind},
						schema.GroupVersionKind{Group: g.Group.Name, Version: v, Kind: kind},
						schema.GroupVersionKind{Kind: kind})
				}
			}
		}
	}
	if len(resources) < 1000 {
		t.Fatalf("only %d questions", len(resources))
	}
	same := func(what string, x, y any, errX, errY error) {
		t.Helper()
		if !reflect.DeepEqual(x, y) || fmt.Sprint(errX) != fmt.Sprint(errY) {
			t.Errorf("%s: copy %v (%v), client-go %v (%v)", what, x, errX, y, errY)
		}
	}
	for _, r := range resources {
		k1, e1 := a.KindFor(r)
		k2, e2 := b.KindFor(r)
		same(fmt.Sprintf("KindFor(%v)", r), k1, k2, e1, e2)
		ks1, e1 := a.KindsFor(r)
		ks2, e2 := b.KindsFor(r)
		same(fmt.Sprintf("KindsFor(%v)", r), ks1, ks2, e1, e2)
		r1, e1 := a.ResourceFor(r)
		r2, e2 := b.ResourceFor(r)
		same(fmt.Sprintf("ResourceFor(%v)", r), r1, r2, e1, e2)
		rs1, e1 := a.ResourcesFor(r)
		rs2, e2 := b.ResourcesFor(r)
		same(fmt.Sprintf("ResourcesFor(%v)", r), rs1, rs2, e1, e2)
	}
	for _, k := range kinds {
		var versions []string
		if k.Version != "" {
			versions = []string{k.Version, "v9"}
		}
		m1, e1 := a.RESTMapping(k.GroupKind(), versions...)
		m2, e2 := b.RESTMapping(k.GroupKind(), versions...)
		same(fmt.Sprintf("RESTMapping(%v, %v)", k.GroupKind(), versions), m1, m2, e1, e2)
		ms1, e1 := a.RESTMappings(k.GroupKind(), versions...)
		ms2, e2 := b.RESTMappings(k.GroupKind(), versions...)
		same(fmt.Sprintf("RESTMappings(%v, %v)", k.GroupKind(), versions), ms1, ms2, e1, e2)
	}
	s1, e1 := a.ResourceSingularizer("deployments")
	s2, e2 := b.ResourceSingularizer("deployments")
	same("ResourceSingularizer", s1, s2, e1, e2)
	var _ meta.RESTMapper = a
}
