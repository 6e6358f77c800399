package metaview

import (
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// View is a snapshot in meta/v1's types.
type View struct {
	// Groups lists the groups in server order, each with the versions
	// client-go would list and its preferred version.
	Groups *metav1.APIGroupList
	// Resources holds each group-version's resources, subresources as
	// "resource/subresource" entries.
	Resources map[schema.GroupVersion]*metav1.APIResourceList
	// Failed holds, for each group-version that is not current, why
	// (a *discovery.GroupVersionError).
	Failed map[schema.GroupVersion]error
}

// Of writes s in meta/v1's types. Each call converts anew; the View is the
// caller's.
func Of(s *discovery.Snapshot) *View {
	groups := s.Groups()
	v := &View{
		Groups:    &metav1.APIGroupList{Groups: make([]metav1.APIGroup, 0, len(groups))},
		Resources: map[schema.GroupVersion]*metav1.APIResourceList{},
		Failed:    map[schema.GroupVersion]error{},
	}
	var partial *discovery.PartialError
	if errors.As(s.Err(), &partial) {
		for _, gve := range partial.Errors {
			v.Failed[gve.GroupVersion] = gve
		}
	}
	core, named := s.Sources()
	for gi := range groups {
		g := &groups[gi]
		aggregated := named.Format != surface.FormatLegacy
		if g.Name == "" {
			aggregated = core.Format != surface.FormatLegacy
		}
		group := metav1.APIGroup{Name: g.Name}
		// The version the server names preferred (legacy discovery), or
		// else client-go's rule for aggregated discovery: the first
		// that is not Stale.
		named := g.PreferredVersion()
		if named != nil && named.Freshness == surface.FreshnessStale {
			named = nil
		}
		for vi := range g.Versions {
			ver := &g.Versions[vi]
			gv := schema.GroupVersion{Group: g.Name, Version: ver.Version}
			if ver.Freshness == surface.FreshnessStale && len(ver.Resources) == 0 {
				// Nothing known of it (an aggregated API server never
				// reached): client-go leaves it out of its group, and
				// so out of kubectl api-versions and Helm's
				// .Capabilities.APIVersions.
				continue
			}
			d := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: ver.Version}
			group.Versions = append(group.Versions, d)
			if named == ver || named == nil && group.PreferredVersion.Version == "" && ver.Freshness != surface.FreshnessStale {
				group.PreferredVersion = d
			}
			if ver.Freshness == surface.FreshnessFailed && len(ver.Resources) == 0 {
				continue
			}
			list := toAPIResourceList(gv, ver.Resources, aggregated)
			if !aggregated {
				// client-go keeps the type of the legacy document it
				// decoded.
				list.APIVersion, list.Kind = ver.LegacyType()
			}
			v.Resources[gv] = list
		}
		if g.Name == "" && len(group.Versions) == 0 {
			// client-go lists the core group only when /api names a
			// version (an extension API server serves none).
			continue
		}
		if !aggregated && g.Name != "" && g.LegacyPreferred() == "" {
			// A legacy group the server named no preferred version of:
			// client-go answers it so (its mapper and
			// ServerPreferredResources then take the first).
			group.PreferredVersion = metav1.GroupVersionForDiscovery{}
		} else if group.PreferredVersion.Version == "" && len(group.Versions) > 0 {
			group.PreferredVersion = group.Versions[0]
		}
		v.Groups.Groups = append(v.Groups.Groups, group)
	}
	return v
}

// toAPIResourceList writes resources as client-go would have produced them
// from the same server response: from aggregated discovery, subresources
// take their parent's singular name; from legacy, what the server sent.
func toAPIResourceList(gv schema.GroupVersion, rs []surface.Resource, aggregated bool) *metav1.APIResourceList {
	list := &metav1.APIResourceList{GroupVersion: gv.String()}
	for i := range rs {
		r := &rs[i]
		res := metav1.APIResource{
			Name:               r.Name,
			SingularName:       r.SingularName,
			Namespaced:         r.Namespaced,
			Kind:               r.Kind.Kind,
			Verbs:              r.Verbs,
			ShortNames:         r.ShortNames,
			Categories:         r.Categories,
			StorageVersionHash: r.StorageVersionHash,
		}
		if r.ExplicitKind() {
			res.Group, res.Version = r.Kind.Group, r.Kind.Version
		}
		if !r.SubresourcesOnly() {
			// One listed only for its subresources is not listed
			// itself, as client-go converts it.
			list.APIResources = append(list.APIResources, res)
		}
		for j := range r.Subresources {
			s := &r.Subresources[j]
			sub := metav1.APIResource{
				Name:         r.Name + "/" + s.Name,
				SingularName: s.LegacySingularName(),
				Namespaced:   r.Namespaced,
				Kind:         s.Kind.Kind,
				Verbs:        s.Verbs,
			}
			if aggregated {
				sub.SingularName = r.SingularName
			}
			if s.ExplicitKind() {
				sub.Group, sub.Version = s.Kind.Group, s.Kind.Version
			}
			list.APIResources = append(list.APIResources, sub)
		}
	}
	return list
}
