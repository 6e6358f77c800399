// Package mapperbench is the first-sight benchmark of REST mappers, shared
// by restmapper's benchmarks (on discovery captured from a real server) and
// the integration tier (on a live kube-apiserver), so that both measure the
// same inputs the same way, kubeatlas and client-go alike.
package mapperbench

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Inputs lists every form a user types for each resource of snap: its
// plural, singular, lower-case kind and short names, each bare, with the
// group, and with group and version; sorted, without duplicates.
func Inputs(snap *discovery.Snapshot) []schema.GroupVersionResource {
	var inputs []schema.GroupVersionResource
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				for _, name := range append([]string{r.Name, r.SingularName, strings.ToLower(r.Kind.Kind)}, r.ShortNames...) {
					inputs = append(inputs, schema.GroupVersionResource{Resource: name},
						schema.GroupVersionResource{Group: g.Name, Resource: name},
						schema.GroupVersionResource{Group: g.Name, Version: v.Version, Resource: name})
				}
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

// Kubeatlas is a kubeatlas mapper over a new client from newClient, its
// discovery read.
func Kubeatlas(b *testing.B, newClient func() (*discovery.Client, error)) meta.RESTMapper {
	c, err := newClient()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Snapshot(context.Background()); err != nil {
		b.Fatal(err)
	}
	m, err := restmapper.New(c)
	if err != nil {
		b.Fatal(err)
	}
	return m
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
