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
	"github.com/kubeatlas/kubeatlas/discovery/clientgo"
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
	snap       *discovery.Snapshot
	native     *nativeIndex
	generation uint64
	warn       func(string)
	// lookups counts lookups, so that only every revalidateEvery-th one
	// reads the clock to see whether discovery should be revalidated.
	lookups atomic.Uint32

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
	st := &state{snap: snap, generation: snap.Generation(), native: newNativeIndex(snap), warn: warn}
	st.memo.init()
	return st
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

// groupResources is what client-go's GetAPIGroupResources builds from the
// same discovery.
func groupResources(snap *discovery.Snapshot) []*cgrestmapper.APIGroupResources {
	groupList, resources, _ := clientgo.View(snap)
	out := make([]*cgrestmapper.APIGroupResources, 0, len(groupList.Groups))
	for i := range groupList.Groups {
		g := &groupList.Groups[i]
		gr := &cgrestmapper.APIGroupResources{Group: *g, VersionedResources: map[string][]metav1.APIResource{}}
		for _, v := range g.Versions {
			if l, ok := resources[schema.GroupVersion{Group: g.Name, Version: v.Version}]; ok {
				gr.VersionedResources[v.Version] = l.APIResources
			}
		}
		out = append(out, gr)
	}
	return out
}

// mapper is client-go's discovery REST mapper over this generation, built on
// the first question that is not yet answered.
func (st *state) mapper() meta.RESTMapper {
	st.delegateOnce.Do(func() { st.delegate = cgrestmapper.NewDiscoveryRESTMapper(groupResources(st.snap)) })
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
			a.gvk = e.gv.WithKind(e.kind)
		case opKindsFor:
			a.gvks = []schema.GroupVersionKind{e.gv.WithKind(e.kind)}
		case opResourceFor:
			a.gvr = e.gv.WithResource(e.plural)
		case opResourcesFor:
			a.gvrs = []schema.GroupVersionResource{e.gv.WithResource(e.plural)}
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

// memo is a concurrent map of answers in shards, so that readers on many
// cores rarely share a lock word.
type memo struct {
	shards [32]memoShard
	limit  int // answers kept per shard
}

type memoShard struct {
	mu sync.RWMutex
	m  map[memoKey]*answer
	_  [40]byte // keep shards on separate cache lines
}

// maxMemoPerShard bounds the memo (32 shards, about 130,000 answers): a
// caller asking for ever new names cannot grow it without end. Past the
// bound, new questions are answered without being kept.
const maxMemoPerShard = 4096

func (m *memo) init() {
	m.limit = maxMemoPerShard
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
	if len(s.m) < m.limit {
		s.m[k] = a
	}
	s.mu.Unlock()
}

// shortcutIndex expands short names exactly as client-go's ShortcutExpander
// does, from an index instead of a scan of all of discovery per call.
type shortcutIndex struct {
	// native knows every resource name and singular name: a name there is
	// never expanded. Subresource names ("deployments/status") are only in
	// the snapshot, scanned in the rare case a question has a "/".
	native *nativeIndex
	snap   *discovery.Snapshot
	// short maps a short name to its long forms in discovery order.
	short map[string][]shortcut
	warn  func(string)
	// warned holds the warnings given, each given once.
	warned *sync.Map
}

type shortcut struct {
	shortGroup string
	long       schema.GroupResource
}

func newShortcutIndex(snap *discovery.Snapshot, warn func(string)) shortcutIndex {
	idx := shortcutIndex{snap: snap, short: map[string][]shortcut{}, warn: warn, warned: &sync.Map{}}
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			if v.Freshness == discovery.FreshnessFailed && len(v.Resources) == 0 {
				continue
			}
			for _, r := range v.Resources {
				for _, s := range r.ShortNames {
					idx.short[s] = append(idx.short[s], shortcut{shortGroup: g.Name, long: schema.GroupResource{Group: g.Name, Resource: r.Name}})
				}
			}
		}
	}
	return idx
}

// isName reports whether client-go's expander would leave name alone.
func (x *shortcutIndex) isName(group, name string) bool {
	if found, known := x.native.isName(group, name); known {
		return found
	}
	for _, g := range x.snap.Groups() {
		if group != "" && g.Name != group {
			continue
		}
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				for _, sub := range r.Subresources {
					if r.Name+"/"+sub.Name == name {
						return true
					}
				}
			}
		}
	}
	return false
}

// expand mirrors restmapper.shortcutExpander.expandResourceShortcut,
// including its quirks: an expanded short name loses the version asked
// for, and with a group that matches no short name exactly, a group that
// merely starts with it is accepted.
func (x *shortcutIndex) expand(r schema.GroupVersionResource) schema.GroupVersionResource {
	if x.isName(r.Group, r.Resource) {
		return r
	}
	var found *shortcut
	for i, s := range x.short[r.Resource] {
		if r.Group != "" && r.Group != s.shortGroup {
			continue
		}
		if found == nil {
			found = &x.short[r.Resource][i]
			continue
		}
		if s.long == found.long || x.warn == nil {
			continue
		}
		// Once per generation, not per lookup: answers are not all kept.
		msg := fmt.Sprintf("short name %q could also match lower priority resource %s", r.Resource, s.long.String())
		if _, dup := x.warned.LoadOrStore(msg, true); !dup {
			x.warn(msg)
		}
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
