package discovery

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Format is the discovery format a server answered with.
type Format int

const (
	// FormatAggregatedV2 is aggregated discovery apidiscovery.k8s.io/v2 (1.30+).
	FormatAggregatedV2 Format = iota
	// FormatAggregatedV2Beta1 is aggregated discovery v2beta1 (1.26–1.32).
	FormatAggregatedV2Beta1
	// FormatLegacy is one document per group-version (every server).
	FormatLegacy
)

func (f Format) String() string {
	switch f {
	case FormatAggregatedV2:
		return "aggregated/v2"
	case FormatAggregatedV2Beta1:
		return "aggregated/v2beta1"
	case FormatLegacy:
		return "legacy"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Source says how a snapshot was read. When /api and /apis were answered
// differently (a server mid-upgrade), it describes /apis.
type Source struct {
	Format   Format
	Protobuf bool
}

func (s Source) String() string {
	if s.Protobuf {
		return s.Format.String() + "+protobuf"
	}
	return s.Format.String() + "+json"
}

// Freshness says whether a group-version's resources are current.
type Freshness int

const (
	// FreshnessCurrent: the server listed the resources just now.
	FreshnessCurrent Freshness = iota
	// FreshnessStale: the server marked the group-version Stale (its
	// aggregated API server could not be reached).
	FreshnessStale
	// FreshnessFailed: the group-version is listed but its resources could
	// not be read (legacy discovery answered with an error).
	FreshnessFailed
)

func (f Freshness) String() string {
	switch f {
	case FreshnessCurrent:
		return "Current"
	case FreshnessStale:
		return "Stale"
	case FreshnessFailed:
		return "Failed"
	}
	return fmt.Sprintf("Freshness(%d)", int(f))
}

// Resource is one API resource of a group-version.
type Resource struct {
	Name         string // plural, as in the URL: "deployments"
	SingularName string
	Namespaced   bool
	// Kind is what the resource's endpoints return, usually in the
	// resource's own group-version.
	Kind         schema.GroupVersionKind
	Verbs        []string
	ShortNames   []string
	Categories   []string
	Subresources []Subresource
	// StorageVersionHash is only in legacy discovery.
	StorageVersionHash string

	// explicitKind records whether the server named the kind's group and
	// version or left them empty, which the client-go adapter reproduces.
	explicitKind bool
	// subresourcesOnly: listed without a kind, for its subresources.
	subresourcesOnly bool
}

// SubresourcesOnly reports whether the server listed the resource only for
// its subresources, without a kind, as kube-aggregator lists custom and
// external metrics ("pods/http_requests" under a kindless "pods"). Its Kind
// is empty; client-go lists its subresources and not it, and nothing maps
// it.
func (r *Resource) SubresourcesOnly() bool { return r.subresourcesOnly }

// ExplicitKind reports whether the server named the kind's group and
// version (client-go's APIResource.Group and Version are then set) rather
// than leaving them to be the resource's own.
func (r *Resource) ExplicitKind() bool { return r.explicitKind }

// Subresource is a resource's subresource, such as "status" or "scale".
type Subresource struct {
	Name  string
	Kind  schema.GroupVersionKind
	Verbs []string

	explicitKind bool
	singularName string // as legacy discovery listed it
}

// ExplicitKind reports whether the server named the subresource kind's
// group and version.
func (s *Subresource) ExplicitKind() bool { return s.explicitKind }

// LegacySingularName is the singular name legacy discovery listed for the
// subresource ("" from aggregated discovery, which has none).
func (s *Subresource) LegacySingularName() string { return s.singularName }

// Version is one version of a group.
type Version struct {
	Version   string
	Freshness Freshness
	// LastKnown is set when the server could not give this group-version's
	// resources and the client kept those of an earlier snapshot.
	LastKnown bool
	Resources []Resource

	legacyType metav1.TypeMeta // of its legacy document
}

// LegacyType is the apiVersion and kind the group-version's legacy
// discovery document carried (kube-apiserver writes the core group's
// without apiVersion; hand-written servers may write neither), which
// client-go's APIResourceList keeps. Empty from aggregated discovery.
func (v *Version) LegacyType() (apiVersion, kind string) {
	return v.legacyType.APIVersion, v.legacyType.Kind
}

// Group is an API group; its Versions are in the server's preference order.
// The core group has the name "".
type Group struct {
	Name     string
	Versions []Version

	// preferred is the version legacy discovery named preferred, "" if
	// none; client-go keeps the server's order of versions.
	preferred string
}

// PreferredVersion is the version the server prefers, or nil for a group
// with no versions: the first, unless legacy discovery named another.
func (g *Group) PreferredVersion() *Version {
	if len(g.Versions) == 0 {
		return nil
	}
	for i := range g.Versions {
		if g.Versions[i].Version == g.preferred {
			return &g.Versions[i]
		}
	}
	return &g.Versions[0]
}

// LegacyPreferred is the version legacy discovery named the group's
// preferred one, "" if the server named none or the group came from
// aggregated discovery (whose first version is the preferred one).
// client-go's ServerGroups answers the server's empty preferred version
// as it is; PreferredVersion then falls back to the first.
func (g *Group) LegacyPreferred() string { return g.preferred }

// Snapshot is one observation of a cluster's API surface. It is immutable:
// share it freely, and do not modify the slices it returns.
type Snapshot struct {
	*content
	validated time.Time
	fetched   time.Time // when this client last downloaded the content
	// fromDisk: read from a WithDiskCache entry and not revalidated since.
	fromDisk bool
	// refreshErr: why the refresh after this snapshot failed, when the
	// client serves it in place of a newer one.
	refreshErr error
}

// content is what two snapshots share when a revalidation found nothing
// changed (two 304s), and what the clients of one Shared hook share when their
// clusters serve the same documents: nothing in it belongs to one cluster.
type content struct {
	generation  uint64
	core, named part
	groups      []Group // core first, then named groups, in server order
	err         error   // *PartialError when some group-versions failed

	indexOnce sync.Once
	byGroup   map[string]int

	// Set for the union of disagreeing servers' views (mixed.go): the
	// view whose parts it carries, and what only some views serve.
	partsOf          *content
	partialVersions  map[schema.GroupVersion]bool
	partialResources map[schema.GroupVersionResource]bool

	self atomic.Pointer[Snapshot] // the one Shared is handed (shared.go)
}

// part is what one endpoint (/api or /apis) contributed.
type part struct {
	groups []Group
	etag   string
	source Source
	failed []*GroupVersionError
	raw    *raw // the body as received, only when it is to be persisted
	// verified: the body is the one the ETag names (checked only for
	// WithShared, which shares nothing else).
	verified bool
}

// renumbered is c under a new generation: the same documents and
// resources (shared, not copied), indexed anew.
func (c *content) renumbered() *content {
	return &content{
		generation: generations.Add(1),
		core:       c.core, named: c.named, groups: c.groups, err: c.err,
		partsOf: c.partsOf, partialVersions: c.partialVersions, partialResources: c.partialResources,
	}
}

// Groups lists every group, the core group ("") first, in server order.
func (s *Snapshot) Groups() []Group { return s.groups }

// Group finds a group by name.
func (s *Snapshot) Group(name string) (*Group, bool) {
	s.indexOnce.Do(s.index)
	i, ok := s.byGroup[name]
	if !ok {
		return nil, false
	}
	return &s.groups[i], true
}

// Version finds a group-version.
func (s *Snapshot) Version(gv schema.GroupVersion) (*Version, bool) {
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
// revalidation found nothing changed, or when the clients of one Shared hook
// read the same documents from two clusters. Structures derived from a
// snapshot (a REST mapper's indexes) are rebuilt when it changes, and can
// be shared between snapshots of one generation.
func (s *Snapshot) Generation() uint64 { return s.generation }

// Sources says how /api (core) and /apis (named) were each read.
func (s *Snapshot) Sources() (core, named Source) { return s.core.source, s.named.source }

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
func (s *Snapshot) FromDisk() bool { return s.fromDisk }

// RefreshError is why the latest refresh failed, when the client serves
// this snapshot because no newer one could be read (the server could not
// be reached, timed out, or answered with an error): the snapshot may be out
// of date, by Validated. It is nil when the snapshot is the latest
// refresh's own.
func (s *Snapshot) RefreshError() error { return s.refreshErr }

// Err is nil for a complete snapshot, otherwise a *PartialError with one
// *GroupVersionError per group-version that is not current.
func (s *Snapshot) Err() error { return s.err }
