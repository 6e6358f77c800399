package restmapper

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
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
	kind   string
	scope  meta.RESTScope
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

	// The name index is built on first use: a process that only maps kinds
	// never needs it. byName maps a plural or singular name to its first
	// slot; nextName chains the rest in discovery order. (Chains, not
	// slices: a slice per key was most of a warm start's allocations.)
	namesOnce           sync.Once
	usable              bool
	entries             []nativeEntry
	byName              map[string]int32
	nextName, nameEntry []int32 // per name slot; -1 ends a chain
}

func newNativeIndex(snap *discovery.Snapshot) *nativeIndex { return &nativeIndex{snap: snap} }

// buildNames lists every resource and links its names, backwards, each new
// head pointing at the previous one, which leaves every chain in discovery
// order.
func (x *nativeIndex) buildNames() {
	n := 0
	for _, g := range x.snap.Groups() {
		for _, v := range g.Versions {
			n += len(v.Resources)
		}
	}
	x.usable = true
	x.entries = make([]nativeEntry, 0, n)
	singulars := make([]string, 0, n)
	for gi, g := range x.snap.Groups() {
		preferred := 0
		for vi, v := range g.Versions {
			if v.Freshness != discovery.FreshnessStale {
				preferred = vi
				break
			}
		}
		for vi, v := range g.Versions {
			if v.Freshness == discovery.FreshnessFailed && len(v.Resources) == 0 {
				continue
			}
			vrank := int64(vi) + 1
			if vi == preferred {
				vrank = 0
			}
			rank := int64(gi)<<32 | vrank
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			for _, r := range v.Resources {
				singular := r.SingularName
				if singular == "" {
					singular = strings.ToLower(r.Kind.Kind)
				}
				if r.Name != strings.ToLower(r.Name) || singular != strings.ToLower(singular) || strings.Contains(r.Name, "/") {
					x.usable = false // names client-go would treat in ways not modelled here
				}
				x.entries = append(x.entries, nativeEntry{gv: gv, plural: r.Name, kind: r.Kind.Kind, scope: scopeOf(&r), guessedSingular: r.SingularName == "", rank: rank})
				singulars = append(singulars, singular)
			}
		}
	}
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
		if singulars[i] != x.entries[i].plural {
			push(singulars[i], int32(i))
		}
		push(x.entries[i].plural, int32(i))
	}
}

func scopeOf(r *discovery.Resource) meta.RESTScope {
	if r.Namespaced {
		return meta.RESTScopeNamespace
	}
	return meta.RESTScopeRoot
}

// names calls fn for each entry a name names, in discovery order, until fn
// returns false.
func (x *nativeIndex) names(name string, fn func(*nativeEntry) bool) {
	x.namesOnce.Do(x.buildNames)
	slot, ok := x.byName[name]
	for ok && slot >= 0 {
		if !fn(&x.entries[x.nameEntry[slot]]) {
			return
		}
		slot = x.nextName[slot]
	}
}

// isName says whether name is a resource's plural or (listed) singular
// name, in group or, for "", in any group: such a name is never expanded as
// a short name. Names with a "/" are subresources, which only a scan
// finds.
func (x *nativeIndex) isName(group, name string) (found, known bool) {
	if strings.Contains(name, "/") {
		return false, false
	}
	x.names(name, func(e *nativeEntry) bool {
		if (group == "" || e.gv.Group == group) && (e.plural == name || !e.guessedSingular) {
			found = true
			return false
		}
		return true
	})
	return found, true
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
	groupMatched, unsure := false, false
	candidates, ties := 0, 0
	x.names(in.Resource, func(e *nativeEntry) bool {
		if in.Group != "" && e.gv.Group != in.Group {
			// Without a version, client-go also matches groups that merely
			// start with the one asked for.
			if in.Version == "" && strings.HasPrefix(e.gv.Group, in.Group) {
				unsure = true
				return false
			}
			return true
		}
		groupMatched = true
		if in.Version != "" && e.gv.Version != in.Version {
			return true
		}
		candidates++
		switch {
		case best == nil || e.rank < best.rank:
			best, ties = e, 1
		case e.rank == best.rank:
			ties++
		}
		return true
	})
	if unsure || best == nil || ties > 1 || (in.Group != "" && !groupMatched) {
		return nil, false, false // a miss, a group prefix or an ambiguity: client-go's errors and rules
	}
	return best, true, candidates > 1
}

// mapping finds the REST mapping of a kind asked for with at most one
// version, from the kind's group alone: the mapping in the preferred version
// (the first that is not Stale) if it serves the kind, else in the first
// version that does; or in the version asked for.
func (x *nativeIndex) mapping(gk schema.GroupKind, versions []string) (*meta.RESTMapping, bool) {
	if len(versions) > 1 || strings.HasSuffix(gk.Kind, "List") || gk.Kind == "" {
		return nil, false
	}
	g, ok := x.snap.Group(gk.Group)
	if !ok {
		return nil, false
	}
	want := ""
	for _, v := range g.Versions {
		if v.Freshness != discovery.FreshnessStale {
			want = v.Version
			break
		}
	}
	if want == "" && len(g.Versions) > 0 {
		want = g.Versions[0].Version
	}
	exact := len(versions) == 1 && versions[0] != ""
	if exact {
		want = versions[0]
	}
	type candidate struct {
		version string
		r       *discovery.Resource
	}
	var first, pick *candidate
	for vi := range g.Versions {
		v := &g.Versions[vi]
		if v.Freshness == discovery.FreshnessFailed && len(v.Resources) == 0 {
			continue
		}
		var found *discovery.Resource
		for i := range v.Resources {
			r := &v.Resources[i]
			if strings.Contains(r.Name, "/") || (r.Kind.Kind != gk.Kind && strings.ToLower(r.Kind.Kind) != gk.Kind) {
				continue
			}
			if found != nil {
				return nil, false // client-go keeps the last registration of a kind: its mapper decides
			}
			found = r
		}
		if found == nil {
			continue
		}
		if found.Kind.Kind != gk.Kind {
			return nil, false // matched only in lower case: client-go's rules
		}
		c := &candidate{v.Version, found}
		if first == nil {
			first = c
		}
		if v.Version == want {
			pick = c
		}
	}
	if pick == nil && !exact {
		pick = first
	}
	if pick == nil {
		return nil, false
	}
	gv := schema.GroupVersion{Group: gk.Group, Version: pick.version}
	return &meta.RESTMapping{
		Resource:         gv.WithResource(pick.r.Name),
		GroupVersionKind: gv.WithKind(gk.Kind),
		Scope:            scopeOf(pick.r),
	}, true
}
