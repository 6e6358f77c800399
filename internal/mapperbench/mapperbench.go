// Package mapperbench is the first-sight benchmark of REST mappers, shared
// by restmapper's benchmarks (on discovery captured from a real server) and
// the integration tier (on a live kube-apiserver), so that both measure the
// same inputs the same way, kubeatlas and client-go alike. It imports
// nothing of kubeatlas (internal packages import only internal packages):
// callers build the kubeatlas mapper, and hand the resources in meta/v1's
// types (discovery/metaview).
package mapperbench

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"
)

// Inputs lists every form a user types for each resource of resources
// (each group-version's list, as discovery/metaview writes a snapshot):
// its plural, singular, lower-case kind and short names, each bare, with
// the group, and with group and version; sorted, without duplicates.
// Subresources are not typed on their own and are left out.
func Inputs(resources map[schema.GroupVersion]*metav1.APIResourceList) []schema.GroupVersionResource {
	var inputs []schema.GroupVersionResource
	for gv, list := range resources {
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			for _, name := range append([]string{r.Name, r.SingularName, strings.ToLower(r.Kind)}, r.ShortNames...) {
				inputs = append(inputs, schema.GroupVersionResource{Resource: name},
					schema.GroupVersionResource{Group: gv.Group, Resource: name},
					schema.GroupVersionResource{Group: gv.Group, Version: gv.Version, Resource: name})
			}
		}
	}
	slices.SortFunc(inputs, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(inputs)
}

// FirstSight builds a new mapper each iteration (outside the timer) and
// asks it, for each input, KindFor and then RESTMapping of the kind found;
// it reports the time per input (ns/input).
func FirstSight(b *testing.B, inputs []schema.GroupVersionResource, newMapper func() meta.RESTMapper) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		m := newMapper()
		b.StartTimer()
		for _, in := range inputs {
			gvk, err := m.KindFor(in)
			if err != nil {
				continue // ambiguous inputs fail alike in both
			}
			if _, err := m.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(inputs)), "ns/input")
}

// ClientGo is client-go's deferred mapper in its shortcut expander over a
// memory-cached discovery client for cfg, its discovery read.
func ClientGo(b *testing.B, cfg *rest.Config) meta.RESTMapper {
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	mc := memory.NewMemCacheClient(dc)
	if _, _, err := mc.ServerGroupsAndResources(); err != nil {
		b.Fatal(err)
	}
	return cgrestmapper.NewShortcutExpander(cgrestmapper.NewDeferredDiscoveryRESTMapper(mc), mc, nil)
}
