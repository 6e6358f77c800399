package restmapper

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

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
			if v.Freshness == surface.FreshnessFailed && len(v.Resources) == 0 {
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
