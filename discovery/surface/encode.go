package surface

import (
	"encoding/json"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EncodeLastKnown writes the group-versions whose resources are last known
// (Version.LastKnown: not in the documents as received, kept from an
// earlier read) as an aggregated discovery list in JSON, the form
// DecodeAggregated reads back field for field; nil when there are none. A
// client persists them so, beside the documents.
func EncodeLastKnown(groups []Group) ([]byte, error) {
	var items []apidiscoveryv2.APIGroupDiscovery
	for _, g := range groups {
		var versions []apidiscoveryv2.APIVersionDiscovery
		for _, v := range g.Versions {
			if v.LastKnown {
				versions = append(versions, apidiscoveryv2.APIVersionDiscovery{Version: v.Version, Resources: toAggregated(v.Resources)})
			}
		}
		if versions != nil {
			item := apidiscoveryv2.APIGroupDiscovery{Versions: versions}
			item.Name = g.Name
			items = append(items, item)
		}
	}
	if items == nil {
		return nil, nil
	}
	list := apidiscoveryv2.APIGroupDiscoveryList{Items: items}
	list.APIVersion, list.Kind = "apidiscovery.k8s.io/v2", "APIGroupDiscoveryList"
	return json.Marshal(&list)
}

// toAggregated is fromAggregatedResources's inverse.
func toAggregated(in []Resource) []apidiscoveryv2.APIResourceDiscovery {
	kind := func(k schema.GroupVersionKind, explicit bool) *metav1.GroupVersionKind {
		if explicit {
			return &metav1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
		}
		return &metav1.GroupVersionKind{Kind: k.Kind}
	}
	out := make([]apidiscoveryv2.APIResourceDiscovery, 0, len(in))
	for _, r := range in {
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		d := apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, SingularResource: r.SingularName, Scope: scope,
			ResponseKind: kind(r.Kind, r.ExplicitKind()),
			Verbs:        r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
		}
		for _, sub := range r.Subresources {
			d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource: sub.Name, ResponseKind: kind(sub.Kind, sub.ExplicitKind()), Verbs: sub.Verbs,
			})
		}
		out = append(out, d)
	}
	return out
}
