package restmapper

import (
	"strings"
	"sync"

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
	gv     schema.GroupVersion
	plural string
	// singular is the listed singular name, or client-go's guess.
	singular string
	kind     string
	scope    meta.RESTScope
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

	// Built on first use. entries lists every resource in discovery order,
	// mappings holds each one's REST mapping (one allocation for all, so a
	// RESTMapping answer allocates nothing), and groups finds a group's
	// position and its first entry.
	entriesOnce sync.Once
	usable      bool
	entries     []nativeEntry
	mappings    []meta.RESTMapping
	// byKind maps a group and kind to its first entry; nextKind chains the
	// others (other versions) in discovery order, -1 ending a chain.
	byKind   map[schema.GroupKind]int32
	nextKind []int32

	// The name index is built on first use too: a process that only maps
	// kinds never needs it. byName maps a plural or singular name to its
	// first slot; nextName chains the rest in discovery order. (Chains, not
	// slices: a slice per key was most of a warm start's allocations.)
	namesOnce           sync.Once
	byName              map[string]int32
	nextName, nameEntry []int32 // per name slot; -1 ends a chain
}

func newNativeIndex(snap *discovery.Snapshot) *nativeIndex { return &nativeIndex{snap: snap} }

// buildEntries lists every resource with its REST mapping.
func (x *nativeIndex) buildEntries() {
	n := 0
	for _, g := range x.snap.Groups() {
		for _, v := range g.Versions {
			n += len(v.Resources)
		}
	}
	x.usable = true
	x.entries = make([]nativeEntry, 0, n)
	x.mappings = make([]meta.RESTMapping, 0, n)
	seen := make(map[string]bool, len(x.snap.Groups()))
	for gi, g := range x.snap.Groups() {
		if seen[g.Name] {
			x.usable = false // a group listed twice: not modelled here
		}
		seen[g.Name] = true
		// The server's preferred version (metaview's rule): the one it
		// names, or else the first that is not Stale.
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
		for vi, v := range g.Versions {
			vrank := int64(vi) + 1
			if vi == preferred {
				vrank = 0
			}
			rank := int64(gi)<<32 | vrank
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			for _, r := range v.Resources {
				if r.SubresourcesOnly() {
					continue // client-go never sees it
				}
				if r.Kind.Kind == "" {
					x.usable = false // client-go's guesses for an empty kind are not modelled here
				}
				singular := r.SingularName
				if singular == "" {
					singular = strings.ToLower(r.Kind.Kind)
				}
				if r.Name != strings.ToLower(r.Name) || singular != strings.ToLower(singular) || strings.Contains(r.Name, "/") {
					x.usable = false // names client-go would treat in ways not modelled here
				}
				e := nativeEntry{gv: gv, plural: r.Name, singular: singular, kind: r.Kind.Kind, scope: scopeOf(&r), guessedSingular: r.SingularName == "", rank: rank}
				x.entries = append(x.entries, e)
				x.mappings = append(x.mappings, meta.RESTMapping{Resource: gv.WithResource(r.Name), GroupVersionKind: gv.WithKind(r.Kind.Kind), Scope: e.scope})
			}
		}
	}
	n = len(x.entries) // SubresourcesOnly resources have none
	// Linked backwards, as the names are, to leave chains in order.
	x.byKind = make(map[schema.GroupKind]int32, n)
	x.nextKind = make([]int32, n)
	for i := n - 1; i >= 0; i-- {
		gk := x.entries[i].gv.WithKind(x.entries[i].kind).GroupKind()
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
	x.entriesOnce.Do(x.buildEntries)
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
		if e := &x.entries[i]; e.singular != e.plural {
			push(e.singular, int32(i))
		}
		push(x.entries[i].plural, int32(i))
	}
}

func scopeOf(r *surface.Resource) meta.RESTScope {
	if r.Namespaced {
		return meta.RESTScopeNamespace
	}
	return meta.RESTScopeRoot
}

// firstName is the first slot of a name's chain, or -1; nextName[slot]
// is the next. Each slot's entry is x.entries[x.nameEntry[slot]]. (Loops
// over slots, not callbacks: the indirect call per entry was a third of a
// lookup.)
func (x *nativeIndex) firstName(name string) int32 {
	x.namesOnce.Do(x.buildNames)
	if slot, ok := x.byName[name]; ok {
		return slot
	}
	return -1
}

// isName says whether name is a resource's plural or (listed) singular
// name, in group or, for "", in any group: such a name is never expanded as
// a short name. Names with a "/" are subresources, which only a scan
// finds.
func (x *nativeIndex) isName(group, name string) (found, known bool) {
	if strings.Contains(name, "/") {
		return false, false
	}
	for slot := x.firstName(name); slot >= 0; slot = x.nextName[slot] {
		e := &x.entries[x.nameEntry[slot]]
		if (group == "" || e.gv.Group == group) && (e.plural == name || !e.guessedSingular) {
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
	x.namesOnce.Do(x.buildNames)
	if !x.usable || risky(in.Resource) || in.Resource != strings.ToLower(in.Resource) {
		return nil, false, false
	}
	groupMatched := false
	candidates, ties := 0, 0
	for slot := x.firstName(in.Resource); slot >= 0; slot = x.nextName[slot] {
		e := &x.entries[x.nameEntry[slot]]
		if in.Group != "" && e.gv.Group != in.Group {
			// Without a version, client-go also matches groups that merely
			// start with the one asked for.
			if in.Version == "" && strings.HasPrefix(e.gv.Group, in.Group) {
				return nil, false, false
			}
			continue
		}
		groupMatched = true
		if in.Version != "" && e.gv.Version != in.Version {
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
	x.entriesOnce.Do(x.buildEntries)
	if !x.usable {
		return nil, false
	}
	slot, ok := x.byKind[gk]
	if !ok {
		return nil, false
	}
	exact := version != ""
	first, pick := int32(-1), int32(-1)
	for ; slot >= 0; slot = x.nextKind[slot] {
		e := &x.entries[slot]
		if first >= 0 && x.entries[first].gv == e.gv || pick >= 0 && x.entries[pick].gv == e.gv {
			return nil, false // two resources of the kind in one version: client-go keeps the last registered
		}
		if first < 0 {
			first = slot
		}
		// Without a version asked for, the preferred version's (rank 0 in
		// its group: the first that is not Stale).
		if exact && e.gv.Version == version || !exact && e.rank&(1<<32-1) == 0 {
			pick = slot
		}
	}
	if pick < 0 && !exact {
		pick = first
	}
	if pick < 0 {
		return nil, false
	}
	return &x.mappings[pick], true
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
