package discovery

import (
	"context"
	"reflect"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Change is what differs between two snapshots, by group-version and
// resource. A change of a group-version's freshness is listed under
// ChangedVersions.
type Change struct {
	Old, New *Snapshot

	AddedVersions, RemovedVersions, ChangedVersions    []schema.GroupVersion
	AddedResources, RemovedResources, ChangedResources []schema.GroupVersionResource
}

// Empty is true when the snapshots serve the same API.
func (c Change) Empty() bool {
	return len(c.AddedVersions)+len(c.RemovedVersions)+len(c.ChangedVersions)+
		len(c.AddedResources)+len(c.RemovedResources)+len(c.ChangedResources) == 0
}

// Diff compares two snapshots; a nil old snapshot means everything in new
// was added.
func Diff(old, new *Snapshot) Change {
	c := Change{Old: old, New: new}
	versions := func(s *Snapshot) map[schema.GroupVersion]*surface.Version {
		out := map[schema.GroupVersion]*surface.Version{}
		if s == nil {
			return out
		}
		for gi := range s.groups {
			for vi := range s.groups[gi].Versions {
				v := &s.groups[gi].Versions[vi]
				out[schema.GroupVersion{Group: s.groups[gi].Name, Version: v.Version}] = v
			}
		}
		return out
	}
	if old != nil && new != nil && old.content == new.content {
		return c
	}
	before, after := versions(old), versions(new)
	if new != nil {
		for _, gv := range new.groupVersionsInOrder() {
			nv, ov := after[gv], before[gv]
			if ov == nil {
				c.AddedVersions = append(c.AddedVersions, gv)
				for _, r := range nv.Resources {
					c.AddedResources = append(c.AddedResources, gv.WithResource(r.Name))
				}
				continue
			}
			if ov.Freshness != nv.Freshness {
				c.ChangedVersions = append(c.ChangedVersions, gv)
			}
			diffResources(&c, gv, ov.Resources, nv.Resources)
		}
	}
	if old != nil {
		for _, gv := range old.groupVersionsInOrder() {
			if after[gv] == nil {
				c.RemovedVersions = append(c.RemovedVersions, gv)
				for _, r := range before[gv].Resources {
					c.RemovedResources = append(c.RemovedResources, gv.WithResource(r.Name))
				}
			}
		}
	}
	return c
}

func diffResources(c *Change, gv schema.GroupVersion, old, new []surface.Resource) {
	byName := make(map[string]*surface.Resource, len(old))
	for i := range old {
		byName[old[i].Name] = &old[i]
	}
	seen := make(map[string]bool, len(new))
	for i := range new {
		r := &new[i]
		seen[r.Name] = true
		o, ok := byName[r.Name]
		switch {
		case !ok:
			c.AddedResources = append(c.AddedResources, gv.WithResource(r.Name))
		case !reflect.DeepEqual(*o, *r):
			c.ChangedResources = append(c.ChangedResources, gv.WithResource(r.Name))
		}
	}
	for i := range old {
		if !seen[old[i].Name] {
			c.RemovedResources = append(c.RemovedResources, gv.WithResource(old[i].Name))
		}
	}
}

func (c *content) groupVersionsInOrder() []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, g := range c.groups {
		for _, v := range g.Versions {
			out = append(out, schema.GroupVersion{Group: g.Name, Version: v.Version})
		}
	}
	return out
}

// Poll revalidates discovery every interval until ctx ends, so that
// subscribers hear of changes within about one interval. On an unchanged
// cluster each round is two 304s; the first round is immediate. Run it in
// a goroutine of its own; it returns when ctx ends.
func (c *Client) Poll(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_, _ = c.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
