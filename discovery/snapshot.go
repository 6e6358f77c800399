package discovery

import (
	"sync"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Snapshot is one observation of a cluster's API surface. It is immutable:
// share it freely, and do not modify the slices it returns.
type Snapshot struct {
	*content
	validated time.Time
	fetched   time.Time // when this client last downloaded the content
	// odd is what few snapshots have, nil for most: 64 bytes, not 80
	// (each client holds one, and a process may hold thousands, package
	// shared's identities).
	odd *snapshotOdd
}

// snapshotOdd is what a snapshot read from the disk cache, or served
// after a failed refresh, has more.
type snapshotOdd struct {
	// fromDisk: read from a WithDiskCache entry and not revalidated since.
	fromDisk bool
	// refreshErr: why the refresh after this snapshot failed, when the
	// client serves it in place of a newer one.
	refreshErr error
}

// content is what two snapshots share when a revalidation found nothing
// changed (two 304s), and what the clients of one Surfaces table share when their
// clusters serve the same documents: nothing in it belongs to one cluster.
type content struct {
	generation  uint64
	core, named part
	groups      []surface.Group // core first, then named groups, in server order
	err         error           // *PartialError when some group-versions failed

	indexOnce sync.Once
	byGroup   map[string]int

	// Set for the union of disagreeing servers' views (mixed.go): the
	// view whose parts it carries, the views it joins, and what only some
	// views serve.
	partsOf          *content
	of               []*content
	partialVersions  map[schema.GroupVersion]bool
	partialResources map[schema.GroupVersionResource]bool
}

// part is what one endpoint (/api or /apis) contributed.
type part struct {
	groups []surface.Group
	etag   string
	source surface.Source
	failed []*GroupVersionError
	raw    *raw // the body as received, only when it is to be persisted
	// verified: the body is the one the ETag names (checked only for
	// WithSurfaces, which shares nothing else).
	verified bool
}

// renumbered is c under a new generation: the same documents and
// resources (shared, not copied), indexed anew.
func (c *content) renumbered() *content {
	return &content{
		generation: generations.Add(1),
		core:       c.core, named: c.named, groups: c.groups, err: c.err,
		partsOf: c.partsOf, of: c.of, partialVersions: c.partialVersions, partialResources: c.partialResources,
	}
}

// Groups lists every group, the core group ("") first, in server order.
func (s *Snapshot) Groups() []surface.Group { return s.groups }

// Group finds a group by name.
func (s *Snapshot) Group(name string) (*surface.Group, bool) {
	s.indexOnce.Do(s.index)
	i, ok := s.byGroup[name]
	if !ok {
		return nil, false
	}
	return &s.groups[i], true
}

// Version finds a group-version.
func (s *Snapshot) Version(gv schema.GroupVersion) (*surface.Version, bool) {
	g, ok := s.Group(gv.Group)
	if !ok {
		return nil, false
	}
	for i := range g.Versions {
		if g.Versions[i].Version == gv.Version {
			return &g.Versions[i], true
		}
	}
	return nil, false
}

func (c *content) index() {
	c.byGroup = make(map[string]int, len(c.groups))
	for i, g := range c.groups {
		if _, dup := c.byGroup[g.Name]; !dup {
			c.byGroup[g.Name] = i
		}
	}
}

// Generation numbers the snapshot's content: two snapshots have the same
// generation exactly when they hold the same content, which happens when a
// revalidation found nothing changed, or when the clients of one Surfaces table
// read the same documents from two clusters. Structures derived from a
// snapshot (a REST mapper's indexes) are rebuilt when it changes, and can
// be shared between snapshots of one generation.
func (s *Snapshot) Generation() uint64 { return s.generation }

// Sources says how /api (core) and /apis (named) were each read.
func (s *Snapshot) Sources() (core, named surface.Source) { return s.core.source, s.named.source }

// ETags are the entity tags of /api and /apis the snapshot came with; legacy
// discovery has none.
func (s *Snapshot) ETags() (api, apis string) { return s.core.etag, s.named.etag }

// Fetched is when the snapshot's content was last downloaded.
func (s *Snapshot) Fetched() time.Time { return s.fetched }

// Validated is when the server last confirmed the content (by sending it, or
// by answering 304 Not Modified).
func (s *Snapshot) Validated() time.Time { return s.validated }

// FromDisk reports whether the snapshot was read from the disk cache
// (WithDiskCache) and has not been revalidated with the server since:
// Validated says how old it is.
func (s *Snapshot) FromDisk() bool { return s.odd != nil && s.odd.fromDisk }

// RefreshError is why the latest refresh failed, when the client serves
// this snapshot because no newer one could be read (the server could not
// be reached, timed out, or answered with an error): the snapshot may be out
// of date, by Validated. It is nil when the snapshot is the latest
// refresh's own.
func (s *Snapshot) RefreshError() error {
	if s.odd == nil {
		return nil
	}
	return s.odd.refreshErr
}

// Err is nil for a complete snapshot, otherwise a *PartialError with one
// *GroupVersionError per group-version that is not current.
func (s *Snapshot) Err() error { return s.err }
