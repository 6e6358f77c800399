package surface

import (
	"fmt"

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

// Source says how a discovery document was read: its format, and whether
// in protobuf.
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
