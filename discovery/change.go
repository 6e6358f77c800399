package discovery

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"

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
	versions := func(s *Snapshot) map[schema.GroupVersion]*Version {
		out := map[schema.GroupVersion]*Version{}
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

func diffResources(c *Change, gv schema.GroupVersion, old, new []Resource) {
	byName := make(map[string]*Resource, len(old))
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

// subscriber is one Subscribe call's state. Its changes are delivered by
// a goroutine of its own, started when a snapshot is offered and ending
// when it has caught up, so that an idle client runs none: the refresh
// that published never waits for a subscriber, and subscribers never wait
// for each other.
type subscriber struct {
	fn func(Change)

	mu      sync.Mutex
	seen    *Snapshot // the New of the last change delivered (or skipped as empty)
	latest  *Snapshot // the newest snapshot offered, not yet delivered
	running bool      // a delivery goroutine is under way
	stopped bool      // unsubscribed: no call begins after this is set
}

// offer hands the subscriber a newly published snapshot. It is called
// under the refresher's lock, in publication order, and never blocks.
func (s *subscriber) offer(snap *Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.latest = snap
	if !s.running {
		s.running = true
		go s.deliver()
	}
}

// deliver calls fn with the change from what the subscriber saw last to
// the newest snapshot offered, until it has caught up. Snapshots offered
// while fn runs are coalesced into the next call: each change's Old is
// the New of the change before it.
func (s *subscriber) deliver() {
	for {
		s.mu.Lock()
		next := s.latest
		if next == nil || s.stopped {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.latest = nil
		old := s.seen
		s.mu.Unlock()
		change := Diff(old, next)
		if change.Empty() && old != nil {
			// The same API as what the subscriber saw (content that
			// came back): nothing to tell, and Old stays what it saw.
			continue
		}
		s.mu.Lock()
		if s.stopped {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.seen = next
		s.mu.Unlock()
		s.fn(change)
	}
}

// Subscribe calls fn with a Change each time the client publishes a
// snapshot of different content (from any caller's refresh, a background
// revalidation, Poll, Watch, or the disk cache at a warm start). A
// subscriber made before the first snapshot gets it as a Change whose Old
// is nil; one made later gets changes from the snapshot current when it
// subscribed.
//
// fn runs after the snapshot is published (Current and Snapshot already
// return it), on a goroutine that is neither the refresh's nor another
// subscriber's, one call at a time and in publication order. A slow fn
// delays nobody: changes published while it runs are joined into one,
// whose Old is the New of the change before it, so fn never sees a gap or
// a change out of order, only fewer of them. fn may call anything on the
// client: Snapshot, Refresh, a restmapper.Mapper over it (hit or miss),
// and unsubscribe.
//
// The returned function unsubscribes: no call of fn begins after it
// returns (one under way finishes).
func (c *Client) Subscribe(fn func(Change)) (unsubscribe func()) {
	r := &c.machine
	s := &subscriber{fn: fn}
	r.mu.Lock()
	s.seen = c.current.Load()
	r.subs = append(r.subs, s)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.subs = slices.DeleteFunc(r.subs, func(x *subscriber) bool { return x == s })
		r.mu.Unlock()
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
	}
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
