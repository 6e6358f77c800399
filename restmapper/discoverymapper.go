package restmapper

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file is client-go's restmapper.NewDiscoveryRESTMapper (k8s.io/client-go
// v0.37, restmapper/discovery.go, Apache License 2.0), copied with its types
// renamed. Why a copy: importing k8s.io/client-go/restmapper links
// client-go's discovery package and, through it, client-go's scheme of every
// built-in API type, whose package initialisation alone costs a process
// about 10 MB; every program that maps kinds paid that, though only the
// questions the native index leaves over reach this mapper. Its oracle is
// the original: TestDiscoveryMapperIsClientGos asks both the same
// questions over the same discovery and fails on any difference.

// groupResources is client-go's restmapper.APIGroupResources: an API group
// with its versions' resources.
type groupResources struct {
	Group              metav1.APIGroup
	VersionedResources map[string][]metav1.APIResource
}

// newDiscoveryRESTMapper is client-go's NewDiscoveryRESTMapper: a
// PriorityRESTMapper over one DefaultRESTMapper per group-version, the
// core group first, then each group's preferred version, its other
// versions, and the groups in discovery order.
func newDiscoveryRESTMapper(groups []*groupResources) meta.RESTMapper {
	var unionMapper meta.MultiRESTMapper
	var groupPriority []string
	// /v1 is special. It should always come first.
	resourcePriority := []schema.GroupVersionResource{{Group: "", Version: "v1", Resource: meta.AnyResource}}
	kindPriority := []schema.GroupVersionKind{{Group: "", Version: "v1", Kind: meta.AnyKind}}

	for _, group := range groups {
		groupPriority = append(groupPriority, group.Group.Name)
		// The preferred version comes first.
		if preferred := group.Group.PreferredVersion.Version; preferred != "" {
			if _, ok := group.VersionedResources[preferred]; ok {
				resourcePriority = append(resourcePriority, schema.GroupVersionResource{Group: group.Group.Name, Version: preferred, Resource: meta.AnyResource})
				kindPriority = append(kindPriority, schema.GroupVersionKind{Group: group.Group.Name, Version: preferred, Kind: meta.AnyKind})
			}
		}
		for _, discoveryVersion := range group.Group.Versions {
			resources, ok := group.VersionedResources[discoveryVersion.Version]
			if !ok {
				continue
			}
			// Other versions after the preferred one, for resources that
			// only exist in those.
			if discoveryVersion.Version != group.Group.PreferredVersion.Version {
				resourcePriority = append(resourcePriority, schema.GroupVersionResource{Group: group.Group.Name, Version: discoveryVersion.Version, Resource: meta.AnyResource})
				kindPriority = append(kindPriority, schema.GroupVersionKind{Group: group.Group.Name, Version: discoveryVersion.Version, Kind: meta.AnyKind})
			}
			gv := schema.GroupVersion{Group: group.Group.Name, Version: discoveryVersion.Version}
			versionMapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
			for _, resource := range resources {
				scope := meta.RESTScopeNamespace
				if !resource.Namespaced {
					scope = meta.RESTScopeRoot
				}
				// Subresources get no mappings.
				if strings.Contains(resource.Name, "/") {
					continue
				}
				plural := gv.WithResource(resource.Name)
				singular := gv.WithResource(resource.SingularName)
				// Servers that list no singular form: guessed, as client-go does.
				if len(resource.SingularName) == 0 {
					_, singular = meta.UnsafeGuessKindToResource(gv.WithKind(resource.Kind))
				}
				versionMapper.AddSpecific(gv.WithKind(strings.ToLower(resource.Kind)), plural, singular, scope)
				versionMapper.AddSpecific(gv.WithKind(resource.Kind), plural, singular, scope)
				// client-go's unsafe guess, kept for the same answers.
				versionMapper.Add(gv.WithKind(resource.Kind+"List"), scope)
			}
			versionMapper.Add(gv.WithKind("List"), meta.RESTScopeRoot)
			unionMapper = append(unionMapper, versionMapper)
		}
	}
	for _, group := range groupPriority {
		resourcePriority = append(resourcePriority, schema.GroupVersionResource{Group: group, Version: meta.AnyVersion, Resource: meta.AnyResource})
		kindPriority = append(kindPriority, schema.GroupVersionKind{Group: group, Version: meta.AnyVersion, Kind: meta.AnyKind})
	}
	return &meta.PriorityRESTMapper{Delegate: unionMapper, ResourcePriority: resourcePriority, KindPriority: kindPriority}
}
