package apiserver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestGroupObjects: the core group's object is "core", and a group named
// core (an APIService may name one) is "group:core", so neither hides the
// other; a kind in another group-version than its resource's (a scale
// subresource's autoscaling/v1 Scale) says which, one in its own says
// nothing.
func TestGroupObjects(t *testing.T) {
	doc := func(v any) discovery.Document {
		b, err := json.Marshal(map[string]any{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": v})
		if err != nil {
			t.Fatal(err)
		}
		return discovery.Document{Body: b, ContentType: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
	}
	version := func(v string, resources ...any) map[string]any {
		return map[string]any{"version": v, "freshness": "Current", "resources": resources}
	}
	core := []any{map[string]any{"metadata": map[string]any{"name": ""}, "versions": []any{version("v1", map[string]any{
		"resource": "pods", "responseKind": map[string]any{"group": "", "version": "v1", "kind": "Pod"}, "scope": "Namespaced", "verbs": []string{"get"},
	})}}}
	named := []any{
		map[string]any{"metadata": map[string]any{"name": "apps"}, "versions": []any{version("v1", map[string]any{
			"resource": "deployments", "responseKind": map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}, "scope": "Namespaced", "verbs": []string{"get"},
			"subresources": []any{map[string]any{"subresource": "scale", "responseKind": map[string]any{"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": []string{"get"}}},
		})}},
		map[string]any{"metadata": map[string]any{"name": "core"}, "versions": []any{version("v1", map[string]any{
			"resource": "things", "responseKind": map[string]any{"group": "core", "version": "v1", "kind": "Thing"}, "scope": "Cluster", "verbs": []string{"get"},
		})}},
	}
	s, err := discovery.NewSnapshot(doc(core), doc(named), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, g := range apiGroups(s, nil, notChecked, nil) {
		byName[g.Name] = g.Status.Group
		if g.Status.Group != "apps" {
			continue
		}
		r := g.Status.Versions[0].Resources[0]
		if r.Group != "" || r.Version != "" {
			t.Errorf("deployments in apps/v1: kind's group-version %q/%q, want none (its own)", r.Group, r.Version)
		}
		if sub := r.Subresources[0]; sub.Kind != "Scale" || sub.Group != "autoscaling" || sub.Version != "v1" {
			t.Errorf("deployments/scale: %+v, want autoscaling/v1 Scale", sub)
		}
	}
	if byName["core"] != "" || byName["group:core"] != "core" || byName["apps"] != "apps" {
		t.Errorf("objects by name (name → group): %q, want core → \"\", group:core → core, apps → apps", byName)
	}
}
