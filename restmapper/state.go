package restmapper

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/metaview"
)

// state is everything derived from one snapshot generation.
type state struct {
	snap       *discovery.Snapshot
	native     *nativeIndex
	generation uint64
	warn       func(string)

	// Built on first use: a process that only maps kinds needs neither.
	shortcutsOnce  sync.Once
	shortcuts      shortcutIndex
	categoriesOnce sync.Once
	categories     map[string][]schema.GroupResource

	// client-go's mapper, and the APIGroupResources it is built from, only
	// when a question needs it.
	delegateOnce sync.Once
	delegate     meta.RESTMapper

	memo memo
}

func newState(snap *discovery.Snapshot, warn func(string)) *state {
	return &state{snap: snap, generation: snap.Generation(), native: newNativeIndex(snap), warn: warn}
}

func (st *state) shortcutIndex() *shortcutIndex {
	st.shortcutsOnce.Do(func() {
		st.shortcuts = newShortcutIndex(st.snap, st.warn)
		st.shortcuts.native = st.native
	})
	return &st.shortcuts
}

// categoryIndex lists each category's resources, once per resource, in
// discovery order. (client-go lists a resource once per version that has
// the category, in map order.)
func (st *state) categoryIndex() map[string][]schema.GroupResource {
	st.categoriesOnce.Do(func() {
		st.categories = map[string][]schema.GroupResource{}
		seen := map[string]map[schema.GroupResource]bool{}
		for _, g := range st.snap.Groups() {
			for _, v := range g.Versions {
				for _, r := range v.Resources {
					for _, c := range r.Categories {
						gr := schema.GroupResource{Group: g.Name, Resource: r.Name}
						if seen[c] == nil {
							seen[c] = map[schema.GroupResource]bool{}
						}
						if !seen[c][gr] {
							seen[c][gr] = true
							st.categories[c] = append(st.categories[c], gr)
						}
					}
				}
			}
		}
	})
	return st.categories
}

// groupResourcesOf is what client-go's GetAPIGroupResources builds from
// the same discovery.
func groupResourcesOf(snap *discovery.Snapshot) []*groupResources {
	v := metaview.Of(snap)
	groupList, resources := v.Groups, v.Resources
	out := make([]*groupResources, 0, len(groupList.Groups))
	for i := range groupList.Groups {
		g := &groupList.Groups[i]
		gr := &groupResources{Group: *g, VersionedResources: map[string][]metav1.APIResource{}}
		for _, v := range g.Versions {
			if l, ok := resources[schema.GroupVersion{Group: g.Name, Version: v.Version}]; ok {
				gr.VersionedResources[v.Version] = l.APIResources
			}
		}
		out = append(out, gr)
	}
	return out
}

// mapper is client-go's discovery REST mapper (a copy: discoverymapper.go)
// over this generation, built on
// the first question that is not yet answered.
func (st *state) mapper() meta.RESTMapper {
	st.delegateOnce.Do(func() { st.delegate = newDiscoveryRESTMapper(groupResourcesOf(st.snap)) })
	return st.delegate
}

// answer answers one question. What the native index answers is computed
// afresh each time, without allocating for KindFor and ResourceFor: that
// costs less than keeping it (the memo's map inserts were the larger part
// of a first sight). Only client-go's answers, which cost microseconds to
// milliseconds, are memoized.
//
// versions is nil unless a mapping question names more than one version;
// one version is in the key.
func (st *state) answer(k memoKey, versions []string) answer {
	// Resource questions go through short-name expansion first, once.
	in := schema.GroupVersionResource{Group: k.group, Version: k.version, Resource: k.name}
	if k.op != opRESTMapping && k.op != opRESTMappings {
		in = st.shortcutIndex().expand(in)
	}
	var a answer
	if st.computeNative(k, in, versions, &a) {
		return a
	}
	// A mapping asked for several versions is rare and not memoized.
	cacheable := versions == nil
	if cacheable {
		if p, ok := st.memo.get(k); ok {
			return *p
		}
	}
	p := &answer{}
	st.compute(k, in, versions, p)
	if cacheable {
		st.memo.put(k, p)
	}
	return *p
}

// compute asks client-go's mapper; in is already expanded.
func (st *state) compute(k memoKey, in schema.GroupVersionResource, versions []string, a *answer) {
	if versions == nil && k.version != "" && (k.op == opRESTMapping || k.op == opRESTMappings) {
		versions = []string{k.version}
	}
	d := st.mapper()
	switch k.op {
	case opKindFor:
		a.gvk, a.err = d.KindFor(in)
	case opKindsFor:
		a.gvks, a.err = d.KindsFor(in)
	case opResourceFor:
		a.gvr, a.err = d.ResourceFor(in)
	case opResourcesFor:
		a.gvrs, a.err = d.ResourcesFor(in)
	case opSingularizer:
		a.singular, a.err = d.ResourceSingularizer(in.Resource)
	case opRESTMapping:
		a.mapping, a.err = d.RESTMapping(schema.GroupKind{Group: k.group, Kind: k.name}, versions...)
	case opRESTMappings:
		a.mappings, a.err = d.RESTMappings(schema.GroupKind{Group: k.group, Kind: k.name}, versions...)
	default:
		a.err = fmt.Errorf("restmapper: unknown question %d", k.op)
	}
}

// computeNative answers from the native index when it can; in is already
// expanded.
func (st *state) computeNative(k memoKey, in schema.GroupVersionResource, versions []string, a *answer) bool {
	switch k.op {
	case opKindFor, opKindsFor, opResourceFor, opResourcesFor:
		e, ok, multi := st.native.resource(in)
		if !ok || multi && (k.op == opKindsFor || k.op == opResourcesFor) {
			return false
		}
		switch k.op {
		case opKindFor:
			a.gvk = e.mapping.GroupVersionKind
		case opKindsFor:
			a.gvks = []schema.GroupVersionKind{e.mapping.GroupVersionKind}
		case opResourceFor:
			a.gvr = e.mapping.Resource
		case opResourcesFor:
			a.gvrs = []schema.GroupVersionResource{e.mapping.Resource}
		}
		return true
	case opRESTMapping:
		if versions != nil {
			return false
		}
		m, ok := st.native.mapping(schema.GroupKind{Group: k.group, Kind: k.name}, k.version)
		a.mapping = m
		return ok
	}
	return false
}
