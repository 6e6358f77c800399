package restmapper

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgrestmapper "k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/discovery"
)

type op uint8

const (
	opKindFor op = iota
	opKindsFor
	opResourceFor
	opResourcesFor
	opRESTMapping
	opRESTMappings
	opSingularizer
)

// memoKey is one question. For resource questions group, version and name
// are the input GroupVersionResource; for mapping questions, the GroupKind
// and the one version asked for (more than one version is not memoized).
type memoKey struct {
	op                   op
	group, version, name string
}

func resourceKey(o op, r schema.GroupVersionResource) memoKey {
	return memoKey{op: o, group: r.Group, version: r.Version, name: r.Resource}
}

func kindKey(o op, gk schema.GroupKind, versions []string) memoKey {
	k := memoKey{op: o, group: gk.Group, name: gk.Kind}
	if len(versions) == 1 {
		k.version = versions[0]
	}
	return k
}

// answer is what one question got: the fields of its method, and its error.
type answer struct {
	gvk      schema.GroupVersionKind
	gvks     []schema.GroupVersionKind
	gvr      schema.GroupVersionResource
	gvrs     []schema.GroupVersionResource
	mapping  *meta.RESTMapping
	mappings []*meta.RESTMapping
	singular string
	err      error
}

// state is everything derived from one snapshot generation.
type state struct {
	generation uint64
	// lookups counts lookups, so that only every revalidateEvery-th one
	// reads the clock to see whether discovery should be revalidated.
	lookups    atomic.Uint32
	groups     []*cgrestmapper.APIGroupResources
	shortcuts  shortcutIndex
	categories map[string][]schema.GroupResource

	delegateOnce sync.Once
	delegate     meta.RESTMapper

	memo memo
}

func newState(snap *discovery.Snapshot, warn func(string)) *state {
	groupList, resources, _ := snap.ClientGoView()
	st := &state{generation: snap.Generation(), categories: map[string][]schema.GroupResource{}}
	// The same APIGroupResources client-go's GetAPIGroupResources builds
	// from the same discovery.
	var lists []*metav1.APIResourceList
	for i := range groupList.Groups {
		g := &groupList.Groups[i]
		gr := &cgrestmapper.APIGroupResources{Group: *g, VersionedResources: map[string][]metav1.APIResource{}}
		for _, v := range g.Versions {
			if l, ok := resources[schema.GroupVersion{Group: g.Name, Version: v.Version}]; ok {
				gr.VersionedResources[v.Version] = l.APIResources
				lists = append(lists, l)
			}
		}
		st.groups = append(st.groups, gr)
	}
	st.shortcuts = newShortcutIndex(lists, warn)
	seen := map[string]map[schema.GroupResource]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			for _, c := range r.Categories {
				gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
				if seen[c] == nil {
					seen[c] = map[schema.GroupResource]bool{}
				}
				// client-go lists a resource once per version that has the
				// category; one entry per resource is what callers use.
				if !seen[c][gr] {
					seen[c][gr] = true
					st.categories[c] = append(st.categories[c], gr)
				}
			}
		}
	}
	st.memo.init()
	return st
}

// mapper is client-go's discovery REST mapper over this generation, built on
// the first question that is not yet answered.
func (st *state) mapper() meta.RESTMapper {
	st.delegateOnce.Do(func() { st.delegate = cgrestmapper.NewDiscoveryRESTMapper(st.groups) })
	return st.delegate
}

func (st *state) answer(k memoKey, versions []string) *answer {
	// A mapping asked for several versions is rare and not memoized.
	cacheable := len(versions) <= 1
	if cacheable {
		if a, ok := st.memo.get(k); ok {
			return a
		}
	}
	a := st.compute(k, versions)
	if cacheable {
		st.memo.put(k, a)
	}
	return a
}

func (st *state) compute(k memoKey, versions []string) *answer {
	d := st.mapper()
	a := &answer{}
	in := schema.GroupVersionResource{Group: k.group, Version: k.version, Resource: k.name}
	switch k.op {
	case opKindFor:
		a.gvk, a.err = d.KindFor(st.shortcuts.expand(in))
	case opKindsFor:
		a.gvks, a.err = d.KindsFor(st.shortcuts.expand(in))
	case opResourceFor:
		a.gvr, a.err = d.ResourceFor(st.shortcuts.expand(in))
	case opResourcesFor:
		a.gvrs, a.err = d.ResourcesFor(st.shortcuts.expand(in))
	case opSingularizer:
		a.singular, a.err = d.ResourceSingularizer(st.shortcuts.expand(schema.GroupVersionResource{Resource: k.name}).Resource)
	case opRESTMapping:
		a.mapping, a.err = d.RESTMapping(schema.GroupKind{Group: k.group, Kind: k.name}, versions...)
	case opRESTMappings:
		a.mappings, a.err = d.RESTMappings(schema.GroupKind{Group: k.group, Kind: k.name}, versions...)
	default:
		a.err = fmt.Errorf("restmapper: unknown question %d", k.op)
	}
	return a
}

// memo is a concurrent map of answers in shards, so that readers on many
// cores rarely share a lock word.
type memo struct {
	shards [32]memoShard
}

type memoShard struct {
	mu sync.RWMutex
	m  map[memoKey]*answer
	_  [40]byte // keep shards on separate cache lines
}

func (m *memo) init() {
	for i := range m.shards {
		m.shards[i].m = map[memoKey]*answer{}
	}
}

// shard spreads keys by cheap features of the name; the map inside hashes
// properly. (A real hash here cost as much as the lookup itself.)
func (m *memo) shard(k memoKey) *memoShard {
	h := uint(len(k.name)) + uint(k.op)*7
	if n := len(k.name); n > 0 {
		h += uint(k.name[0]) + uint(k.name[n-1])*3 + uint(k.name[n/2])*5
	}
	return &m.shards[h%uint(len(m.shards))]
}

func (m *memo) get(k memoKey) (*answer, bool) {
	s := m.shard(k)
	s.mu.RLock()
	a, ok := s.m[k]
	s.mu.RUnlock()
	return a, ok
}

func (m *memo) put(k memoKey, a *answer) {
	s := m.shard(k)
	s.mu.Lock()
	s.m[k] = a
	s.mu.Unlock()
}

// shortcutIndex expands short names exactly as client-go's ShortcutExpander
// does, from an index instead of a scan of all of discovery per call.
type shortcutIndex struct {
	// names holds every resource name and singular name, per group and
	// under "" for any group: a name in it is never expanded.
	names map[string]map[string]bool
	// short maps a short name to its long forms in discovery order.
	short map[string][]shortcut
	warn  func(string)
}

type shortcut struct {
	shortGroup string
	long       schema.GroupResource
}

func newShortcutIndex(lists []*metav1.APIResourceList, warn func(string)) shortcutIndex {
	idx := shortcutIndex{names: map[string]map[string]bool{"": {}}, short: map[string][]shortcut{}, warn: warn}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		if idx.names[gv.Group] == nil {
			idx.names[gv.Group] = map[string]bool{}
		}
		for _, r := range l.APIResources {
			for _, n := range []string{r.Name, r.SingularName} {
				idx.names[gv.Group][n] = true
				idx.names[""][n] = true
			}
			for _, s := range r.ShortNames {
				idx.short[s] = append(idx.short[s], shortcut{shortGroup: gv.Group, long: schema.GroupResource{Group: gv.Group, Resource: r.Name}})
			}
		}
	}
	return idx
}

// expand mirrors restmapper.shortcutExpander.expandResourceShortcut,
// including its quirks: an expanded short name loses the version asked
// for, and with a group that matches no short name exactly, a group that
// merely starts with it is accepted.
func (x *shortcutIndex) expand(r schema.GroupVersionResource) schema.GroupVersionResource {
	if x.names[r.Group][r.Resource] {
		return r
	}
	var found *shortcut
	var warned map[schema.GroupResource]bool
	for i, s := range x.short[r.Resource] {
		if r.Group != "" && r.Group != s.shortGroup {
			continue
		}
		if found == nil {
			found = &x.short[r.Resource][i]
			continue
		}
		if s.long == found.long || x.warn == nil || warned[s.long] {
			continue
		}
		if warned == nil {
			warned = map[schema.GroupResource]bool{}
		}
		x.warn(fmt.Sprintf("short name %q could also match lower priority resource %s", r.Resource, s.long.String()))
		warned[s.long] = true
	}
	if found != nil {
		return schema.GroupVersionResource{Group: found.long.Group, Resource: found.long.Resource}
	}
	if r.Group == "" {
		return r
	}
	for _, s := range x.short[r.Resource] {
		if strings.HasPrefix(s.shortGroup, r.Group) {
			r.Resource, r.Group = s.long.Resource, s.long.Group
			return r
		}
	}
	return r
}
