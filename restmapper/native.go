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
}

type groupKind struct{ group, kind string }

type nativeIndex struct {
	usable  bool
	entries []nativeEntry
	// singulars holds each entry's singular name (guessed if need be).
	singulars []string
	// preferred is each group's preferred version as client-go sees it.
	preferred map[string]string
	// dupKind marks kinds registered twice in one group-version: client-go
	// keeps only the last, so those go to its mapper.
	dupKind map[schema.GroupVersionKind]bool

	// The name and kind indexes are built on first use: a process that only
	// asks for REST mappings never needs the names. byName maps a plural or
	// singular name to its first slot, byKind a group's kind to its first
	// entry; nextName and nextKind chain the rest in discovery order.
	// (Chains, not slices: a slice per key was most of a warm start's
	// allocations.)
	namesOnce, kindsOnce sync.Once
	byName               map[string]int32
	nextName, nameEntry  []int32 // per name slot; -1 ends a chain
	byKind               map[groupKind]int32
	nextKind             []int32 // per entry; -1 ends a chain
}

func newNativeIndex(snap *discovery.Snapshot) *nativeIndex {
	n := 0
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			n += len(v.Resources)
		}
	}
	x := &nativeIndex{
		usable:    true,
		entries:   make([]nativeEntry, 0, n),
		singulars: make([]string, 0, n),
		preferred: make(map[string]string, len(snap.Groups())),
	}
	kindsInVersion := map[string]bool{}
	for _, g := range snap.Groups() {
		// client-go prefers the first version that is not Stale.
		for _, v := range g.Versions {
			if v.Freshness != discovery.FreshnessStale {
				x.preferred[g.Name] = v.Version
				break
			}
		}
		if _, ok := x.preferred[g.Name]; !ok && len(g.Versions) > 0 {
			x.preferred[g.Name] = g.Versions[0].Version
		}
		for _, v := range g.Versions {
			if v.Freshness == discovery.FreshnessFailed && len(v.Resources) == 0 {
				continue
			}
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			clear(kindsInVersion)
			for _, r := range v.Resources {
				singular := r.SingularName
				if singular == "" {
					singular = strings.ToLower(r.Kind.Kind)
				}
				if r.Name != strings.ToLower(r.Name) || singular != strings.ToLower(singular) || strings.Contains(r.Name, "/") {
					x.usable = false // names client-go would treat in ways not modelled here
				}
				if kindsInVersion[r.Kind.Kind] {
					if x.dupKind == nil {
						x.dupKind = map[schema.GroupVersionKind]bool{}
					}
					x.dupKind[gv.WithKind(r.Kind.Kind)] = true
				}
				kindsInVersion[r.Kind.Kind] = true
				scope := meta.RESTScopeRoot
				if r.Namespaced {
					scope = meta.RESTScopeNamespace
				}
				x.entries = append(x.entries, nativeEntry{gv: gv, plural: r.Name, kind: r.Kind.Kind, scope: scope, guessedSingular: r.SingularName == ""})
				x.singulars = append(x.singulars, singular)
			}
		}
	}
	return x
}

// buildNames and buildKinds link entries backwards, each new head pointing
// at the previous one, which leaves every chain in discovery order.
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
		if x.singulars[i] != x.entries[i].plural {
			push(x.singulars[i], int32(i))
		}
		push(x.entries[i].plural, int32(i))
	}
}

func (x *nativeIndex) buildKinds() {
	n := len(x.entries)
	x.byKind = make(map[groupKind]int32, n)
	x.nextKind = make([]int32, n)
	for i := n - 1; i >= 0; i-- {
		key := groupKind{x.entries[i].gv.Group, x.entries[i].kind}
		next, ok := x.byKind[key]
		if !ok {
			next = -1
		}
		x.nextKind[i] = next
		x.byKind[key] = int32(i)
	}
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

// kinds calls fn for each entry of a group's kind, in discovery order.
func (x *nativeIndex) kinds(gk groupKind, fn func(*nativeEntry)) {
	x.kindsOnce.Do(x.buildKinds)
	id, ok := x.byKind[gk]
	for ok && id >= 0 {
		fn(&x.entries[id])
		id = x.nextKind[id]
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

// resource finds the single entry an expanded resource input names, as
// client-go's DefaultRESTMapper matching would, or reports that it cannot.
func (x *nativeIndex) resource(in schema.GroupVersionResource) (*nativeEntry, bool) {
	if !x.usable || risky(in.Resource) || in.Resource != strings.ToLower(in.Resource) {
		return nil, false
	}
	var found *nativeEntry
	groupMatched, unsure := false, false
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
		if found != nil {
			unsure = true // several candidates: client-go's priorities decide
			return false
		}
		found = e
		return true
	})
	if unsure || found == nil || (in.Group != "" && !groupMatched) {
		return nil, false // a miss or a group prefix: client-go's errors and rules
	}
	return found, true
}

// mapping finds the REST mapping of a kind asked for with at most one
// version.
func (x *nativeIndex) mapping(gk schema.GroupKind, versions []string) (*meta.RESTMapping, bool) {
	if !x.usable || len(versions) > 1 || strings.HasSuffix(gk.Kind, "List") || gk.Kind == "" {
		return nil, false
	}
	var first, pick *nativeEntry
	want := x.preferred[gk.Group] // the preferred version if it serves the kind,
	if len(versions) == 1 && versions[0] != "" {
		want = versions[0] // or the version asked for
	}
	x.kinds(groupKind{gk.Group, gk.Kind}, func(e *nativeEntry) {
		if first == nil {
			first = e
		}
		if e.gv.Version == want {
			pick = e
		}
	})
	if first == nil {
		return nil, false
	}
	if pick == nil && !(len(versions) == 1 && versions[0] != "") {
		pick = first // else the first version in discovery order that does
	}
	if pick == nil || x.dupKind[pick.gv.WithKind(gk.Kind)] {
		return nil, false
	}
	return &meta.RESTMapping{
		Resource:         pick.gv.WithResource(pick.plural),
		GroupVersionKind: pick.gv.WithKind(gk.Kind),
		Scope:            pick.scope,
	}, true
}
