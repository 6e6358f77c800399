package restmapper

import (
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// The native index answers the common questions straight from the
// snapshot, so that a new process need not build client-go's mapper (the
// larger part of a warm start) for its first lookups. It answers only where
// the answer is certain to be client-go's: a kind or name with exactly one
// candidate, or a kind whose preferred version is plain to see. Everything
// else (ambiguity, group prefixes, guessed List kinds, odd server data)
// goes to client-go's own mapper. The differential test holds the two to
// the same answers.

// nativeEntry is one resource of one group-version, as client-go's
// discovery mapper registers it.
type nativeEntry struct {
	// mapping holds the group, version, plural, kind and scope, and is what
	// a RESTMapping answer points to, so that it allocates nothing. (One
	// slice of entries holding them: a cold start's first mapping builds
	// it, and a second slice of mappings was a third of its cost.)
	mapping meta.RESTMapping
	// singular is the listed singular name, or client-go's guess.
	singular string
	// guessedSingular: the server gave no singular name; client-go's mapper
	// guesses one, but its short-name expander does not know it.
	guessedSingular bool
	// rank orders entries as client-go's PriorityRESTMapper prefers them:
	// by group in discovery order, then the group's preferred version (the
	// first that is not Stale) before its others, in order.
	rank int64
}

type nativeIndex struct {
	snap *discovery.Snapshot

	// Built on first use: entries lists every resource in discovery order.
	entriesOnce sync.Once
	entries     []nativeEntry
	built       atomic.Bool // entries

	// usable says whether the index models the snapshot (usableSnapshot).
	usableOnce sync.Once
	usable     bool

	// The first kind lookups before the entries are built read the
	// snapshot (scanMapping), each answer in its own slot, indexed by
	// kindScans, so that it allocates nothing.
	scanned [scansBeforeIndex]meta.RESTMapping

	// The first lookups scan the entries (tens of microseconds at 5,000
	// resources); the maps, which cost a cold start more than a
	// millisecond, are built by the lookup after scansBeforeIndex of a
	// kind, or of a name: a process that maps a few kinds never builds them.
	//
	// byKind maps a group and kind to its first entry; nextKind chains the
	// others (other versions) in discovery order, -1 ending a chain.
	kindScans atomic.Int32
	kindsOnce sync.Once
	byKind    map[schema.GroupKind]int32
	nextKind  []int32
	// byName maps a plural or singular name to its first slot; nextName
	// chains the rest in discovery order. (Chains, not slices: a slice per
	// key was most of a warm start's allocations.)
	nameScans           atomic.Int32
	namesOnce           sync.Once
	byName              map[string]int32
	nextName, nameEntry []int32 // per name slot; -1 ends a chain
}

// scansBeforeIndex is how many lookups scan before the maps are built: a
// scan costs about a fortieth of building a map.
const scansBeforeIndex = 8

// scanning says whether this lookup scans: one of the first
// scansBeforeIndex counted by n. Once they are spent, n is only read, so
// that parallel lookups do not contend on it.
func scanning(n *atomic.Int32) bool {
	_, ok := scanSlot(n)
	return ok
}

// scanSlot is scanning that also says which of the scans this is, from 0.
func scanSlot(n *atomic.Int32) (int, bool) {
	if n.Load() >= scansBeforeIndex {
		return 0, false
	}
	i := int(n.Add(1))
	return i - 1, i <= scansBeforeIndex
}

func (e *nativeEntry) gv() schema.GroupVersion { return e.mapping.Resource.GroupVersion() }
func (e *nativeEntry) plural() string          { return e.mapping.Resource.Resource }
func (e *nativeEntry) kind() string            { return e.mapping.GroupVersionKind.Kind }

func newNativeIndex(snap *discovery.Snapshot) *nativeIndex { return &nativeIndex{snap: snap} }

// buildEntries lists every resource with its REST mapping.
func (x *nativeIndex) buildEntries() {
	defer x.built.Store(true)
	n := 0
	for _, g := range x.snap.Groups() {
		for _, v := range g.Versions {
			n += len(v.Resources)
		}
	}
	x.entries = make([]nativeEntry, 0, n)
	for gi, g := range x.snap.Groups() {
		preferred := preferredVersion(&g)
		for vi := range g.Versions {
			v := &g.Versions[vi]
			vrank := int64(vi) + 1
			if vi == preferred {
				vrank = 0
			}
			rank := int64(gi)<<32 | vrank
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			for ri := range v.Resources {
				r := &v.Resources[ri]
				if r.SubresourcesOnly() {
					continue // client-go never sees it
				}
				singular, _ := modelled(r)
				x.entries = append(x.entries, nativeEntry{
					mapping:  meta.RESTMapping{Resource: gv.WithResource(r.Name), GroupVersionKind: gv.WithKind(r.Kind.Kind), Scope: scopeOf(r)},
					singular: singular, guessedSingular: r.SingularName == "", rank: rank,
				})
			}
		}
	}
}

// preferredVersion is the index of g's preferred version (metaview's
// rule): the one the server names, or else the first that is not Stale.
func preferredVersion(g *surface.Group) int {
	preferred := 0
	for vi, v := range g.Versions {
		if v.Freshness != surface.FreshnessStale {
			preferred = vi
			break
		}
	}
	if p := g.PreferredVersion(); p != nil && p.Freshness != surface.FreshnessStale {
		for vi := range g.Versions {
			if &g.Versions[vi] == p {
				preferred = vi
			}
		}
	}
	return preferred
}

// modelled is r's singular name, listed or client-go's guess, and whether
// the index models r (a resource that is not SubresourcesOnly): client-go's
// guesses for an empty kind, and names it would treat in other ways (upper
// case, a "/"), are not modelled here.
func modelled(r *surface.Resource) (singular string, ok bool) {
	singular = r.SingularName
	if singular == "" {
		singular = strings.ToLower(r.Kind.Kind)
	}
	return singular, r.Kind.Kind != "" && isLower(r.Name) && isLower(singular) && !strings.Contains(r.Name, "/")
}

// usableSnapshot says whether the index models the whole snapshot: no
// group listed twice, and every resource client-go sees modelled. The
// entries and the snapshot's scans (scanMapping) answer only then, and
// this one answer for both keeps them from disagreeing on it.
func (x *nativeIndex) usableSnapshot() bool {
	x.usableOnce.Do(func() {
		x.usable = true
		seen := make(map[string]bool, len(x.snap.Groups()))
		for _, g := range x.snap.Groups() {
			if seen[g.Name] {
				x.usable = false
				return
			}
			seen[g.Name] = true
			for _, v := range g.Versions {
				for ri := range v.Resources {
					r := &v.Resources[ri]
					if _, ok := modelled(r); !ok && !r.SubresourcesOnly() {
						x.usable = false
						return
					}
				}
			}
		}
	})
	return x.usable
}

// scanMapping is mapping for the first kind lookups made before anything
// built the entries: it reads the snapshot itself, the kind's group alone,
// and gives the answer mapping would, in the scan's own slot of
// x.scanned. A cold start's first mapping thus never builds the entries
// (0.7 MB at 3,000 CRDs, most of what the first mapping cost beyond
// discovery); a process that goes on to look up names builds them then.
func (x *nativeIndex) scanMapping(gk schema.GroupKind, version string, slot *meta.RESTMapping) (*meta.RESTMapping, bool) {
	exact := version != ""
	var g *surface.Group
	for i := range x.snap.Groups() {
		if x.snap.Groups()[i].Name == gk.Group {
			g = &x.snap.Groups()[i] // the only one: a group listed twice is not usable
			break
		}
	}
	if g == nil {
		return nil, false
	}
	preferred := preferredVersion(g)
	// The same walk as mapping's over the kind's entries, in discovery
	// order: its first resource, and the one picked.
	var first, pick *surface.Resource
	var firstV, pickV *surface.Version
	for vi := range g.Versions {
		v := &g.Versions[vi]
		for ri := range v.Resources {
			r := &v.Resources[ri]
			if r.SubresourcesOnly() || r.Kind.Kind != gk.Kind {
				continue
			}
			if first != nil && firstV.Version == v.Version || pick != nil && pickV.Version == v.Version {
				return nil, false // two resources of the kind in one version: client-go keeps the last registered
			}
			if first == nil {
				first, firstV = r, v
			}
			if exact && v.Version == version || !exact && vi == preferred {
				pick, pickV = r, v
			}
		}
	}
	if pick == nil && !exact {
		pick, pickV = first, firstV
	}
	if pick == nil {
		return nil, false
	}
	gv := schema.GroupVersion{Group: g.Name, Version: pickV.Version}
	*slot = meta.RESTMapping{Resource: gv.WithResource(pick.Name), GroupVersionKind: gv.WithKind(pick.Kind.Kind), Scope: scopeOf(pick)}
	return slot, true
}

// buildKinds links every resource's kind, backwards, as the names are, to
// leave chains in order.
func (x *nativeIndex) buildKinds() {
	n := len(x.entries) // SubresourcesOnly resources have none
	x.byKind = make(map[schema.GroupKind]int32, n)
	x.nextKind = make([]int32, n)
	for i := n - 1; i >= 0; i-- {
		gk := x.entries[i].mapping.GroupVersionKind.GroupKind()
		next, ok := x.byKind[gk]
		if !ok {
			next = -1
		}
		x.nextKind[i] = next
		x.byKind[gk] = int32(i)
	}
}

// buildNames links every resource's names, backwards, each new head
// pointing at the previous one, which leaves every chain in discovery
// order.
func (x *nativeIndex) buildNames() {
	n := len(x.entries)
	x.byName = make(map[string]int32, 2*n)
	x.nextName = make([]int32, 0, 2*n)
	x.nameEntry = make([]int32, 0, 2*n)
	push := func(name string, id int32) {
		next, ok := x.byName[name]
		if !ok {
			next = -1
		}
		x.byName[name] = int32(len(x.nextName))
		x.nextName = append(x.nextName, next)
		x.nameEntry = append(x.nameEntry, id)
	}
	for i := n - 1; i >= 0; i-- {
		if e := &x.entries[i]; e.singular != e.plural() {
			push(e.singular, int32(i))
		}
		push(x.entries[i].plural(), int32(i))
	}
}

func scopeOf(r *surface.Resource) meta.RESTScope {
	if r.Namespaced {
		return meta.RESTScopeNamespace
	}
	return meta.RESTScopeRoot
}

// nameEntries appends to buf the entries a plural or (listed or guessed)
// singular name names, in discovery order, from a scan or from the chain.
// (Loops over entries, not callbacks: the indirect call per entry was a
// third of a lookup.)
func (x *nativeIndex) nameEntries(name string, buf []int32) []int32 {
	x.entriesOnce.Do(x.buildEntries)
	if scanning(&x.nameScans) {
		for i := range x.entries {
			if e := &x.entries[i]; e.plural() == name || e.singular == name {
				buf = append(buf, int32(i))
			}
		}
		return buf
	}
	x.namesOnce.Do(x.buildNames)
	slot, ok := x.byName[name]
	for ; ok && slot >= 0; slot = x.nextName[slot] {
		buf = append(buf, x.nameEntry[slot])
	}
	return buf
}

// kindEntries is nameEntries for a group and kind.
func (x *nativeIndex) kindEntries(gk schema.GroupKind, buf []int32) []int32 {
	if scanning(&x.kindScans) {
		for i := range x.entries {
			if e := &x.entries[i]; e.kind() == gk.Kind && e.mapping.Resource.Group == gk.Group {
				buf = append(buf, int32(i))
			}
		}
		return buf
	}
	x.kindsOnce.Do(x.buildKinds)
	slot, ok := x.byKind[gk]
	for ; ok && slot >= 0; slot = x.nextKind[slot] {
		buf = append(buf, slot)
	}
	return buf
}

// isName says whether name is a resource's plural or (listed) singular
// name, in group or, for "", in any group: such a name is never expanded as
// a short name. Names with a "/" are subresources, which only a scan
// finds.
func (x *nativeIndex) isName(group, name string) (found, known bool) {
	if strings.Contains(name, "/") {
		return false, false
	}
	var buf [8]int32
	for _, i := range x.nameEntries(name, buf[:0]) {
		e := &x.entries[i]
		if (group == "" || e.mapping.Resource.Group == group) && (e.plural() == name || !e.guessedSingular) {
			return true, true
		}
	}
	return false, true
}

// risky names collide with the List kinds client-go guesses ("widgetlists").
func risky(name string) bool {
	return strings.HasSuffix(name, "list") || strings.HasSuffix(name, "lists") || name == ""
}

// resource finds the entry an expanded resource input names, as client-go's
// discovery mapper would pick it, or reports that it cannot. Of several
// candidates it picks as PriorityRESTMapper does for KindFor and
// ResourceFor: the one in the highest ranked group-version (see
// nativeEntry.rank); several there are client-go's ambiguity, answered by
// client-go. multi says there were several candidates: KindsFor and
// ResourcesFor, which list them all, are then left to client-go.
func (x *nativeIndex) resource(in schema.GroupVersionResource) (best *nativeEntry, ok, multi bool) {
	x.entriesOnce.Do(x.buildEntries)
	if !x.usableSnapshot() || risky(in.Resource) || in.Resource != strings.ToLower(in.Resource) {
		return nil, false, false
	}
	groupMatched := false
	candidates, ties := 0, 0
	var buf [8]int32
	for _, i := range x.nameEntries(in.Resource, buf[:0]) {
		e := &x.entries[i]
		if in.Group != "" && e.mapping.Resource.Group != in.Group {
			// Without a version, client-go also matches groups that merely
			// start with the one asked for.
			if in.Version == "" && strings.HasPrefix(e.mapping.Resource.Group, in.Group) {
				return nil, false, false
			}
			continue
		}
		groupMatched = true
		if in.Version != "" && e.mapping.Resource.Version != in.Version {
			continue
		}
		candidates++
		switch {
		case best == nil || e.rank < best.rank:
			best, ties = e, 1
		case e.rank == best.rank:
			ties++
		}
	}
	if best == nil || ties > 1 || (in.Group != "" && !groupMatched) {
		return nil, false, false // a miss, a group prefix or an ambiguity: client-go's errors and rules
	}
	return best, true, candidates > 1
}

// mapping finds the REST mapping of a kind asked for with at most one
// version ("" for none), from the kind's entries alone: the mapping in the preferred version
// (the first that is not Stale) if it serves the kind, else in the first
// version that does; or in the version asked for.
func (x *nativeIndex) mapping(gk schema.GroupKind, version string) (*meta.RESTMapping, bool) {
	if strings.HasSuffix(gk.Kind, "List") || !hasUpper(gk.Kind) {
		// Guessed List kinds, and kinds in lower case
		// (which client-go also matches case-insensitively): client-go's.
		return nil, false
	}
	if !x.usableSnapshot() {
		return nil, false
	}
	if !x.built.Load() {
		if i, ok := scanSlot(&x.kindScans); ok {
			return x.scanMapping(gk, version, &x.scanned[i])
		}
	}
	x.entriesOnce.Do(x.buildEntries)
	var buf [8]int32
	exact := version != ""
	first, pick := int32(-1), int32(-1)
	for _, slot := range x.kindEntries(gk, buf[:0]) {
		e := &x.entries[slot]
		if first >= 0 && x.entries[first].gv() == e.gv() || pick >= 0 && x.entries[pick].gv() == e.gv() {
			return nil, false // two resources of the kind in one version: client-go keeps the last registered
		}
		if first < 0 {
			first = slot
		}
		// Without a version asked for, the preferred version's (rank 0 in
		// its group: the first that is not Stale).
		if exact && e.mapping.Resource.Version == version || !exact && e.rank&(1<<32-1) == 0 {
			pick = slot
		}
	}
	if pick < 0 && !exact {
		pick = first
	}
	if pick < 0 {
		return nil, false
	}
	return &x.entries[pick].mapping, true
}

// isLower reports whether strings.ToLower(s) == s, without its work for
// the names servers send: ASCII, in lower case.
func isLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 {
			return strings.ToLower(s) == s
		} else if 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// hasUpper reports whether s has an upper-case ASCII letter: a kind asked
// for in lower case also matches kinds case-insensitively in client-go.
func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
