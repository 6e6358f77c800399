package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	cgopenapi "k8s.io/client-go/openapi"
	cgopenapi3 "k8s.io/client-go/openapi3"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kubeatlas/kubeatlas/openapi3"
	atlastyped "github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// oracleGroup is the group of the oracle's CRDs.
const oracleGroup = "oracle.kubeatlas.test"

// gizmoSchema has every kind of field structured-merge-diff treats on its
// own: int-or-string, a granular and an atomic map, a free-form object
// (x-kubernetes-preserve-unknown-fields), a field with no type that keeps
// anything, an embedded resource, a list-map keyed by two fields (one
// defaulted), a list-map keyed by an integer, a set, an atomic list, a list
// with no list type, nullable fields, and a status (a subresource) with
// conditions keyed by type.
const gizmoSchema = `{
  "type": "object",
  "properties": {
    "spec": {
      "type": "object",
      "properties": {
        "replicas": {"type": "integer", "format": "int32"},
        "ratio": {"type": "number"},
        "enabled": {"type": "boolean", "nullable": true},
        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "selector": {"type": "object", "additionalProperties": {"type": "string"}},
        "frozen": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
        "parts": {"type": "object", "additionalProperties": {"type": "object", "properties": {"count": {"type": "integer"}, "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "anything": {"x-kubernetes-preserve-unknown-fields": true},
        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
        "typedTemplate": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "protocol"], "items": {
          "type": "object", "required": ["name"],
          "properties": {"name": {"type": "string"}, "protocol": {"type": "string", "default": "TCP"}, "port": {"type": "integer"}, "target": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}},
        "shards": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"], "items": {
          "type": "object", "required": ["id"],
          "properties": {"id": {"type": "integer"}, "zone": {"type": "string"}, "weights": {"type": "object", "additionalProperties": {"type": "integer"}}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "hosts": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
        "steps": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}}}},
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "nested": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"a": {"type": "string"}, "b": {"type": "object", "properties": {"c": {"type": "string"}}}}},
        "note": {"type": "string", "nullable": true}
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "phase": {"type": "string"},
        "observedGeneration": {"type": "integer", "format": "int64"},
        "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"], "items": {
          "type": "object", "required": ["type", "status"],
          "properties": {"type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"}, "lastTransitionTime": {"type": "string", "format": "date-time"}}}}
      }
    }
  }
}`

// freeformSchema is a cluster-scoped kind whose spec keeps unknown fields
// next to known ones, and whose root has no status.
const freeformSchema = `{
  "type": "object",
  "properties": {
    "spec": {
      "type": "object",
      "x-kubernetes-preserve-unknown-fields": true,
      "properties": {
        "known": {"type": "string"},
        "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"], "items": {"type": "object", "required": ["key"], "properties": {"key": {"type": "string"}, "value": {"type": "string"}}}}
      }
    }
  }
}`

// oracleCRDs are the tier's CRDs for the typed oracle: Gizmo (namespaced,
// v1 and v1beta1, status subresource) and Freeform (cluster-scoped).
func oracleCRDs(t testing.TB) []*unstructured.Unstructured {
	var gizmo, freeform map[string]any
	if err := json.Unmarshal([]byte(gizmoSchema), &gizmo); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(freeformSchema), &freeform); err != nil {
		t.Fatal(err)
	}
	var versions []any
	for i, v := range []string{"v1", "v1beta1"} {
		versions = append(versions, map[string]any{"name": v, "served": true, "storage": i == 0,
			"schema":       map[string]any{"openAPIV3Schema": gizmo},
			"subresources": map[string]any{"status": map[string]any{}}})
	}
	crd := func(plural, kind, scope string, versions []any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": plural + "." + oracleGroup},
			"spec": map[string]any{
				"group": oracleGroup, "scope": scope, "versions": versions,
				"names": map[string]any{"plural": plural, "singular": strings.TrimSuffix(plural, "s"), "kind": kind},
			},
		}}
	}
	return []*unstructured.Unstructured{
		crd("gizmos", "Gizmo", "Namespaced", versions),
		crd("freeforms", "Freeform", "Cluster", []any{map[string]any{"name": "v1", "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": freeform}}}),
	}
}

// oracleApply is one server-side apply of the oracle's objects.
type oracleApply struct {
	gvr         schema.GroupVersionResource
	namespace   string
	manager     string
	subresource string
	object      string
}

var (
	gizmosV1      = schema.GroupVersionResource{Group: oracleGroup, Version: "v1", Resource: "gizmos"}
	gizmosV1beta1 = schema.GroupVersionResource{Group: oracleGroup, Version: "v1beta1", Resource: "gizmos"}
	freeformsV1   = schema.GroupVersionResource{Group: oracleGroup, Version: "v1", Resource: "freeforms"}
)

// oracleApplies are the oracle's server-side applies, in order: each object
// by two field managers whose fields overlap (list-map entries of both, a
// set both add to, an int-or-string one sets as a number and the other as a
// name) and, where there is a status subresource, a third manager's status
// apply.
func oracleApplies() []oracleApply {
	core := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: r}
	}
	apps := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	return []oracleApply{
		// Pods need the namespace's default service account, which no
		// controller creates here.
		{core("serviceaccounts"), "oracle", "alpha", "", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`},
		{core("configmaps"), "oracle", "alpha", "", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"a":"1"}},"data":{"a":"1","b":"2"}}`},
		{core("configmaps"), "oracle", "beta", "", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","annotations":{"b":"2"}},"data":{"c":"3"},"binaryData":{"d":"AAE="}}`},
		{apps, "oracle", "alpha", "", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},
			"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":"25%"}},
			"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx","ports":[{"containerPort":80,"protocol":"TCP"}],"env":[{"name":"A","value":"a"}],
			"resources":{"limits":{"cpu":"500m","memory":"1Gi"}}}],"tolerations":[{"key":"k","operator":"Exists"}]}}}}`},
		{apps, "oracle", "beta", "", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
			"spec":{"containers":[{"name":"web","env":[{"name":"B","value":"b"}],"ports":[{"containerPort":443,"protocol":"TCP"}]},{"name":"sidecar","image":"busybox","args":["sleep","1d"]}],
			"volumes":[{"name":"v","configMap":{"name":"cm","items":[{"key":"a","path":"a"}]}}]}}}}`},
		{apps, "oracle", "gamma", "status", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"status":{"observedGeneration":1,"replicas":1,
			"conditions":[{"type":"Available","status":"False","reason":"Oracle","lastUpdateTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}`},
		{core("services"), "oracle", "alpha", "", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"},"spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}]}}`},
		{core("services"), "oracle", "beta", "", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc","labels":{"tier":"front"}},"spec":{"ports":[{"name":"https","port":443,"protocol":"TCP","targetPort":"https"}]}}`},
		{core("services"), "oracle", "gamma", "status", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"},"status":{"conditions":[{"type":"Ready","status":"True","reason":"Oracle","message":"m","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}`},
		{core("pods"), "oracle", "alpha", "", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod"},"spec":{"containers":[{"name":"c","image":"busybox","ports":[{"containerPort":53,"protocol":"UDP"},{"containerPort":53,"protocol":"TCP"}]}]}}`},
		{core("pods"), "oracle", "beta", "", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod","labels":{"x":"y"},"finalizers":["oracle.kubeatlas.test/f"]},"spec":{"containers":[{"name":"c","image":"busybox"}],"tolerations":[{"key":"t","operator":"Exists","effect":"NoSchedule"}]}}`},
		{core("pods"), "oracle", "gamma", "status", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod"},"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Oracle"}]}}`},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, "oracle", "alpha", "", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"role"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}`},
		{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, "oracle", "alpha", "", `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"np"},"spec":{"podSelector":{"matchLabels":{"a":"b"}},"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["10.1.0.0/16"]}}],"ports":[{"port":"http","protocol":"TCP"}]}]}}`},
		{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}, "oracle", "alpha", "", `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"cron"},"spec":{"schedule":"@daily","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}}}`},
		{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}, "oracle", "beta", "", `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"cron"},"spec":{"suspend":true,"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox","command":["true"]}]}}}}}}`},
		{schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, "oracle", "alpha", "", `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"hpa"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":3,
			"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":50}}}]}}`},
		{gizmosV1, "oracle", "alpha", "", `{"apiVersion":"oracle.kubeatlas.test/v1","kind":"Gizmo","metadata":{"name":"gizmo"},"spec":{"replicas":2,"ratio":0.5,"enabled":null,"port":8080,
			"selector":{"a":"b"},"frozen":{"x":"1","y":"2"},"parts":{"bolt":{"count":3,"tags":["m3"]}},
			"config":{"free":{"form":[1,"two",{"three":3}]}},"anything":[{"a":1}],
			"template":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"inner","labels":{"l":"v"}},"data":{"k":"v"}},
			"typedTemplate":{"apiVersion":"example.com/v1","kind":"Inner","metadata":{"name":"typed"},"spec":{"size":1}},
			"ports":[{"name":"http","port":80,"target":"web"},{"name":"dns","protocol":"UDP","port":53}],
			"shards":[{"id":1,"zone":"a","weights":{"x":1}},{"id":2,"zone":"b"}],
			"tags":["a","b"],"hosts":["h1","h2"],"steps":[{"name":"s1","args":["x"]}],"grid":[[1,2],[3]],"nested":{"a":"x","b":{"c":"y"}},"note":"n"}}`},
		{gizmosV1, "oracle", "beta", "", `{"apiVersion":"oracle.kubeatlas.test/v1","kind":"Gizmo","metadata":{"name":"gizmo"},"spec":{"port":"http","selector":{"c":"d"},"parts":{"nut":{"count":1}},
			"config":{"other":true},"ports":[{"name":"https","protocol":"TCP","port":443,"target":8443}],"shards":[{"id":2,"weights":{"y":2}},{"id":3}],"tags":["c"],"note":null}}`},
		{gizmosV1, "oracle", "gamma", "status", `{"apiVersion":"oracle.kubeatlas.test/v1","kind":"Gizmo","metadata":{"name":"gizmo"},"status":{"phase":"Ready","observedGeneration":1,
			"conditions":[{"type":"Ready","status":"True","reason":"Oracle","lastTransitionTime":"2024-01-01T00:00:00Z"},{"type":"Degraded","status":"False"}]}}`},
		{gizmosV1, "oracle", "delta", "status", `{"apiVersion":"oracle.kubeatlas.test/v1","kind":"Gizmo","metadata":{"name":"gizmo"},"status":{"conditions":[{"type":"Progressing","status":"Unknown"}]}}`},
		{gizmosV1beta1, "oracle", "alpha", "", `{"apiVersion":"oracle.kubeatlas.test/v1beta1","kind":"Gizmo","metadata":{"name":"gizmo-beta"},"spec":{"port":"p","ports":[{"name":"a","port":1}],"tags":["x"],"template":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}}}`},
		{gizmosV1beta1, "oracle", "beta", "", `{"apiVersion":"oracle.kubeatlas.test/v1beta1","kind":"Gizmo","metadata":{"name":"gizmo-beta"},"spec":{"port":7,"ports":[{"name":"a","protocol":"UDP","port":2}],"tags":["y"]}}`},
		{gizmosV1beta1, "oracle", "gamma", "status", `{"apiVersion":"oracle.kubeatlas.test/v1beta1","kind":"Gizmo","metadata":{"name":"gizmo-beta"},"status":{"phase":"Pending"}}`},
		{freeformsV1, "", "alpha", "", `{"apiVersion":"oracle.kubeatlas.test/v1","kind":"Freeform","metadata":{"name":"free"},"spec":{"known":"k","items":[{"key":"a","value":"1"}],"unknown":{"deep":[1,2,3]}}}`},
		{freeformsV1, "", "beta", "", `{"apiVersion":"oracle.kubeatlas.test/v1","kind":"Freeform","metadata":{"name":"free"},"spec":{"items":[{"key":"b","value":"2"}],"more":"m"}}`},
	}
}

// setUpOracle creates the oracle's CRDs, namespace and objects on c and
// waits until OpenAPI v3 describes the CRDs.
func setUpOracle(t *testing.T, c *cluster) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range oracleCRDs(t) {
		if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "oracle"}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "OpenAPI v3 describes the oracle's CRDs", time.Minute, func() (bool, string) {
		oc, err := openapi3.New(c.config)
		if err != nil {
			return false, err.Error()
		}
		paths, err := oc.Paths(ctx)
		if err != nil {
			return false, err.Error()
		}
		_, v1 := paths["apis/"+oracleGroup+"/v1"]
		_, v1beta1 := paths["apis/"+oracleGroup+"/v1beta1"]
		return v1 && v1beta1, "not yet"
	})
	for _, a := range oracleApplies() {
		var obj unstructured.Unstructured
		if err := json.Unmarshal([]byte(a.object), &obj.Object); err != nil {
			t.Fatalf("%s: %v", a.object, err)
		}
		var subresources []string
		if a.subresource != "" {
			subresources = []string{a.subresource}
		}
		// A CRD is served a moment after it is established: retry until
		// the apply is accepted.
		var applyErr error
		eventually(t, fmt.Sprintf("apply %s/%s by %s", a.gvr.Resource, obj.GetName(), a.manager), 30*time.Second, func() (bool, string) {
			_, applyErr = dyn.Resource(a.gvr).Namespace(a.namespace).Apply(ctx, obj.GetName(), &obj, metav1.ApplyOptions{FieldManager: a.manager, Force: true}, subresources...)
			return applyErr == nil || !strings.Contains(applyErr.Error(), "the server could not find the requested resource"), fmt.Sprint(applyErr)
		})
		if applyErr != nil {
			t.Fatalf("apply %s/%s by %s: %v", a.gvr.Resource, obj.GetName(), a.manager, applyErr)
		}
	}
}

// typedImpl is one implementation of the adapters under comparison.
type typedImpl struct {
	name          string
	objectToTyped func(runtime.Object, ...typed.ValidationOptions) (*typed.TypedValue, error)
	typedToObject func(*typed.TypedValue) (runtime.Object, error)
	extract       func(*unstructured.Unstructured, string) (*unstructured.Unstructured, error)
	extractStatus func(*unstructured.Unstructured, string) (*unstructured.Unstructured, error)
	// patchMeta is nil, nil for a kind whose group-version describes no
	// schema for it (kubectl then falls back to a JSON merge patch).
	patchMeta func(schema.GroupVersionKind) (strategicpatch.LookupPatchMeta, error)
}

// clientGoTyped is client-go's: openapi.NewTypeConverter on every v3
// document, NewUnstructuredExtractor on the v2 document, and the patch
// metadata kubectl's apply builds from its openapi3.Root (patcher.go's
// buildStrategicMergePatchFromOpenAPIV3: the first component schema whose
// x-kubernetes-group-version-kind names the kind).
func clientGoTyped(t testing.TB, dc *cgdiscovery.DiscoveryClient) typedImpl {
	t.Helper()
	tc, err := cgopenapi.NewTypeConverter(dc.OpenAPIV3(), false)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := metav1ac.NewUnstructuredExtractor(dc)
	if err != nil {
		t.Fatal(err)
	}
	root := cgopenapi3.NewRoot(dc.OpenAPIV3())
	return typedImpl{
		name:          "client-go",
		objectToTyped: tc.ObjectToTyped,
		typedToObject: tc.TypedToObject,
		extract:       ex.Extract,
		extractStatus: ex.ExtractStatus,
		patchMeta: func(gvk schema.GroupVersionKind) (strategicpatch.LookupPatchMeta, error) {
			doc, err := root.GVSpec(gvk.GroupVersion())
			if err != nil {
				return nil, err
			}
			s := kindSchema(doc, gvk)
			if s == nil {
				return nil, nil
			}
			return strategicpatch.PatchMetaFromOpenAPIV3{Schema: s, SchemaList: doc.Components.Schemas}, nil
		},
	}
}

// clientGoV3Typed is client-go's extractor's algorithm
// (managedfields.ExtractInto, then the name, namespace, kind and apiVersion
// set) on client-go's OpenAPI v3 types (openapi.NewTypeConverter's:
// schemaconv over every document's schemas), what upstream's lazy
// extractor (kubernetes/kubernetes#126849) moves to: the reference where
// the v2 document client-go's extractor reads has lost a CRD's schema.
func clientGoV3Typed(t testing.TB, dc *cgdiscovery.DiscoveryClient) typedImpl {
	t.Helper()
	impl := clientGoTyped(t, dc)
	impl.name = "client-go-v3"
	root := cgopenapi3.NewRoot(dc.OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]*spec.Schema{}
	for _, gv := range gvs {
		doc, err := root.GVSpec(gv)
		if err != nil {
			t.Fatal(err)
		}
		if doc.Components != nil {
			maps.Copy(all, doc.Components.Schemas)
		}
	}
	sch, err := schemaconv.ToSchemaFromOpenAPI(all, false)
	if err != nil {
		t.Fatal(err)
	}
	parser := typed.Parser{Schema: smdschema.Schema{Types: sch.Types}}
	types := map[schema.GroupVersionKind]*typed.ParseableType{}
	for name, s := range all {
		var gvks []map[string]string
		if err := s.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil {
			continue
		}
		for _, g := range gvks {
			pt := parser.Type(name)
			types[schema.GroupVersionKind{Group: g["group"], Version: g["version"], Kind: g["kind"]}] = &pt
		}
	}
	extract := func(subresource string) func(*unstructured.Unstructured, string) (*unstructured.Unstructured, error) {
		return func(u *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
			pt := types[u.GroupVersionKind()]
			if pt == nil {
				return nil, fmt.Errorf("no type for %s", u.GroupVersionKind())
			}
			out := &unstructured.Unstructured{}
			if err := managedfields.ExtractInto(u, *pt, manager, out, subresource); err != nil {
				return nil, err
			}
			out.SetName(u.GetName())
			out.SetNamespace(u.GetNamespace())
			out.SetKind(u.GetKind())
			out.SetAPIVersion(u.GetAPIVersion())
			return out, nil
		}
	}
	impl.extract, impl.extractStatus = extract(""), extract("status")
	return impl
}

// kubeatlasTyped is ours: openapi3/typed's Converter on a new openapi3
// client.
func kubeatlasTyped(t testing.TB, c *cluster) typedImpl {
	t.Helper()
	oc, err := openapi3.New(c.config)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := atlastyped.New(oc)
	if err != nil {
		t.Fatal(err)
	}
	ex := conv.Extractor()
	return typedImpl{
		name:          "kubeatlas",
		objectToTyped: conv.ObjectToTyped,
		typedToObject: conv.TypedToObject,
		extract:       ex.Extract,
		extractStatus: ex.ExtractStatus,
		patchMeta: func(gvk schema.GroupVersionKind) (strategicpatch.LookupPatchMeta, error) {
			m, err := conv.PatchMeta(context.Background(), gvk)
			if errors.Is(err, openapi3.ErrNotFound) {
				return nil, nil
			}
			return m, err
		},
	}
}

// kindSchema is the component schema of doc whose
// x-kubernetes-group-version-kind lists gvk, as kubectl finds it, or nil.
// Names are tried in order, so that the answer does not depend on Go's map
// order when two schemas claim a kind (kubectl ranges over the map).
func kindSchema(doc *spec3.OpenAPI, gvk schema.GroupVersionKind) *spec.Schema {
	if doc == nil || doc.Components == nil {
		return nil
	}
	names := make([]string, 0, len(doc.Components.Schemas))
	for name := range doc.Components.Schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := doc.Components.Schemas[name]
		var gvks []map[string]string
		if err := s.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil {
			continue
		}
		for _, g := range gvks {
			if g["group"] == gvk.Group && g["version"] == gvk.Version && g["kind"] == gvk.Kind {
				return s
			}
		}
	}
	return nil
}

// servedKinds is every kind the server serves in every version (not only
// the preferred), with a resource that accepts patches (server-side
// apply), and that resource's name.
func servedKinds(t testing.TB, dc *cgdiscovery.DiscoveryClient) map[schema.GroupVersionKind]metav1.APIResource {
	t.Helper()
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[schema.GroupVersionKind]metav1.APIResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "patch") {
				continue
			}
			kinds[gv.WithKind(r.Kind)] = r
		}
	}
	return kinds
}

// oracleObject is an object the oracle compares the implementations on,
// and where it came from.
type oracleObject struct {
	from string
	obj  *unstructured.Unstructured
}

// liveObjects lists every object of every served kind, in every version
// it is served in.
func liveObjects(t testing.TB, dyn dynamic.Interface, kinds map[schema.GroupVersionKind]metav1.APIResource) []oracleObject {
	t.Helper()
	var out []oracleObject
	for gvk, r := range kinds {
		if !slices.Contains(r.Verbs, "list") {
			continue
		}
		l, err := dyn.Resource(gvk.GroupVersion().WithResource(r.Name)).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", gvk, err)
		}
		for i := range l.Items {
			o := &l.Items[i]
			o.SetGroupVersionKind(gvk)
			out = append(out, oracleObject{from: "live", obj: o})
		}
	}
	return out
}

// synthesize builds an object of gvk from its v3 schema s with every field
// set (to a depth), so that kinds the server holds no object of are
// compared on every field; lists hold one item with every key set, maps one
// entry, int-or-string fields a number and a string by turns, free-form
// fields an unknown field.
func synthesize(s *spec.Schema, schemas map[string]*spec.Schema, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	turn := 0
	var gen func(s *spec.Schema, depth int) (any, bool)
	resolve := func(s *spec.Schema) *spec.Schema {
		for range 4 {
			if len(s.AllOf) == 1 {
				s = &s.AllOf[0]
				continue
			}
			if ref := s.Ref.String(); ref != "" {
				r, ok := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
				if !ok {
					return s
				}
				s = r
				continue
			}
			break
		}
		return s
	}
	gen = func(s *spec.Schema, depth int) (any, bool) {
		if depth > 9 {
			return nil, false
		}
		s = resolve(s)
		if v, _ := s.Extensions.GetBool("x-kubernetes-int-or-string"); v || s.Format == "int-or-string" {
			turn++
			if turn%2 == 0 {
				return int64(8080), true
			}
			return "http", true
		}
		preserve, _ := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields")
		typ := ""
		if len(s.Type) > 0 {
			typ = s.Type[0]
		}
		switch {
		case typ == "object" || len(s.Properties) > 0 || (typ == "" && s.AdditionalProperties != nil):
			if depth > 8 {
				// Not an object without its fields (a list-map's item
				// would lack its keys): scalars only at the last level.
				return nil, false
			}
			m := map[string]any{}
			names := make([]string, 0, len(s.Properties))
			for name := range s.Properties {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				p := s.Properties[name]
				if v, ok := gen(&p, depth+1); ok {
					m[name] = v
				}
			}
			if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				if v, ok := gen(s.AdditionalProperties.Schema, depth+1); ok {
					m["key"] = v
				}
			}
			if embedded, _ := s.Extensions.GetBool("x-kubernetes-embedded-resource"); embedded {
				m["apiVersion"], m["kind"] = "v1", "ConfigMap"
				m["metadata"] = map[string]any{"name": "embedded"}
			}
			if preserve {
				m["unknownField"] = map[string]any{"free": []any{"form", int64(1)}}
			}
			return m, true
		case typ == "array":
			if depth > 8 {
				return nil, false
			}
			if s.Items == nil || s.Items.Schema == nil {
				return []any{}, true
			}
			v, ok := gen(s.Items.Schema, depth+1)
			if !ok {
				return []any{}, true
			}
			return []any{v}, true
		case typ == "string":
			switch s.Format {
			case "byte":
				return "AAE=", true
			case "date-time":
				return "2024-01-01T00:00:00Z", true
			}
			return "s", true
		case typ == "integer":
			return int64(1), true
		case typ == "number":
			return 1.5, true
		case typ == "boolean":
			return true, true
		case preserve:
			return map[string]any{"free": "form"}, true
		}
		return "untyped", true
	}
	v, _ := gen(s, 0)
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	u.Object["metadata"] = map[string]any{"name": "synthesized", "namespace": "oracle", "labels": map[string]any{"a": "b"}, "annotations": map[string]any{"c": "d"}}
	return u
}

// withApplyManager records in u's managedFields that manager applied
// fields (an Apply entry), as the server would have.
func withApplyManager(t testing.TB, u *unstructured.Unstructured, fields []byte, manager, subresource string) {
	t.Helper()
	entry := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: u.GetAPIVersion(),
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields}, Subresource: subresource}
	u.SetManagedFields(append(u.GetManagedFields(), entry))
}

// compareTyped compares the implementations on one object: ObjectToTyped
// (succeeds alike; the same value and field set), TypedToObject (the same
// object), and Extract and ExtractStatus for every manager of its
// managedFields and one that manages nothing (the same applied
// configuration). impls[0] is client-go's, impls[1] client-go's extractor
// on v3 types (clientGoV3Typed). It reports what differs; an extract of a
// CRD kind that agrees with impls[1] but not with impls[0] is returned
// apart (see v2Difference), to be checked on the server.
func compareTyped(impls []typedImpl, o oracleObject, crdKind func(schema.GroupVersionKind) bool) (diffs []string, v2 []v2Difference) {
	where := fmt.Sprintf("%s %s %s/%s", o.from, o.obj.GroupVersionKind(), o.obj.GetNamespace(), o.obj.GetName())
	type result struct {
		tv     *typed.TypedValue
		err    error
		fields string
		back   string
	}
	results := make([]result, len(impls))
	for i, impl := range impls {
		r := &results[i]
		r.tv, r.err = impl.objectToTyped(o.obj.DeepCopy())
		if r.err != nil {
			continue
		}
		fs, err := r.tv.ToFieldSet()
		if err != nil {
			r.fields = "error: " + err.Error()
		} else {
			b, _ := fs.ToJSON()
			r.fields = string(b)
		}
		back, err := impl.typedToObject(r.tv)
		if err != nil {
			r.back = "error: " + err.Error()
		} else {
			b, _ := json.Marshal(back)
			r.back = string(b)
		}
	}
	ref := results[0]
	for i, r := range results[1:] {
		name := impls[i+1].name
		if (r.err == nil) != (ref.err == nil) {
			diffs = append(diffs, fmt.Sprintf("%s: ObjectToTyped: %s: %v, %s: %v", where, name, r.err, impls[0].name, ref.err))
			continue
		}
		if r.err != nil {
			continue
		}
		if !value.Equals(r.tv.AsValue(), ref.tv.AsValue()) {
			diffs = append(diffs, fmt.Sprintf("%s: ObjectToTyped: values differ:\n%s: %s\n%s: %s", where, name, value.ToString(r.tv.AsValue()), impls[0].name, value.ToString(ref.tv.AsValue())))
		}
		if r.fields != ref.fields {
			diffs = append(diffs, fmt.Sprintf("%s: field sets differ:\n%s: %s\n%s: %s", where, name, r.fields, impls[0].name, ref.fields))
		}
		if r.back != ref.back {
			diffs = append(diffs, fmt.Sprintf("%s: TypedToObject differs:\n%s: %s\n%s: %s", where, name, r.back, impls[0].name, ref.back))
		}
	}
	managers := []string{"nobody"}
	for _, m := range o.obj.GetManagedFields() {
		if !slices.Contains(managers, m.Manager) {
			managers = append(managers, m.Manager)
		}
	}
	for _, m := range managers {
		for _, status := range []bool{false, true} {
			var got []string
			var objs []*unstructured.Unstructured
			for _, impl := range impls {
				f := impl.extract
				if status {
					f = impl.extractStatus
				}
				u, err := f(o.obj.DeepCopy(), m)
				objs = append(objs, u)
				if err != nil {
					got = append(got, "error: "+err.Error())
					continue
				}
				b, _ := json.Marshal(u.Object)
				got = append(got, string(b))
			}
			for i := 2; i < len(impls); i++ {
				if got[i] != got[1] {
					diffs = append(diffs, fmt.Sprintf("%s: Extract(%s, status %v):\n%s: %s\n%s: %s", where, m, status, impls[i].name, got[i], impls[1].name, got[1]))
				} else if got[i] != got[0] {
					if !crdKind(o.obj.GroupVersionKind()) {
						diffs = append(diffs, fmt.Sprintf("%s: Extract(%s, status %v) of a built-in kind:\n%s: %s\n%s: %s", where, m, status, impls[i].name, got[i], impls[0].name, got[0]))
						continue
					}
					v2 = append(v2, v2Difference{o: o, manager: m, status: status, under: impls[i].name, got: objs[i], clientGo: objs[0], gotJSON: got[i], clientGoJSON: got[0]})
				}
			}
		}
	}
	return diffs, v2
}

// v2Difference is an Extract of a CRD's object where an implementation
// agrees with client-go's algorithm on the v3 types and differs from
// client-go's extractor, which reads the OpenAPI v2 document: there the
// server drops the properties of every x-kubernetes-preserve-unknown-fields
// or nullable schema (apiextensions-apiserver's
// controller/openapi/v2/conversion.go), so the fields under them are
// untyped: lists atomic, keys lost.
type v2Difference struct {
	o                     oracleObject
	manager               string
	status                bool
	under                 string
	got, clientGo         *unstructured.Unstructured
	gotJSON, clientGoJSON string
}

// appliesAsIs applies u (an extracted configuration) as manager with a
// dry run, not forced, and reports whether the manager's managed fields
// stay what they are: applying what Extract returns must change nothing.
func appliesAsIs(t testing.TB, dyn dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured, manager string, status bool) (bool, string) {
	t.Helper()
	var sub []string
	if status {
		sub = []string{"status"}
	}
	fields := func(o *unstructured.Unstructured) string {
		for _, e := range o.GetManagedFields() {
			if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && (e.Subresource == "status") == status && e.FieldsV1 != nil {
				return string(e.FieldsV1.Raw)
			}
		}
		return ""
	}
	live, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Get(context.Background(), u.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Apply(context.Background(), u.GetName(), u, metav1.ApplyOptions{FieldManager: manager, DryRun: []string{metav1.DryRunAll}}, sub...)
	if err != nil {
		return false, err.Error()
	}
	return fields(after) == fields(live), fmt.Sprintf("managed fields %s, after the apply %s", fields(live), fields(after))
}

// comparePatchMeta walks the kind's schema (through client-go's
// PatchMetaFromOpenAPIV3, the reference, which impls[0] must give) as a
// strategic merge patch does, asking every implementation for each field's
// metadata, for structs and slices and for a field that does not exist,
// and reports what differs: errors, merge keys, patch strategies, names.
func comparePatchMeta(impls []typedImpl, gvk schema.GroupVersionKind) []string {
	var diffs []string
	metas := make([]strategicpatch.LookupPatchMeta, len(impls))
	for i, impl := range impls {
		m, err := impl.patchMeta(gvk)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: PatchMeta: %s: %v", gvk, impl.name, err))
			return diffs
		}
		metas[i] = m
	}
	for i, m := range metas[1:] {
		if (m == nil) != (metas[0] == nil) {
			diffs = append(diffs, fmt.Sprintf("%s: PatchMeta: %s: %v, %s: %v", gvk, impls[i+1].name, m, impls[0].name, metas[0]))
			return diffs
		}
	}
	if metas[0] == nil {
		return nil
	}
	calls := 0
	var walk func(path string, metas []strategicpatch.LookupPatchMeta, depth int)
	walk = func(path string, metas []strategicpatch.LookupPatchMeta, depth int) {
		ref, ok := metas[0].(strategicpatch.PatchMetaFromOpenAPIV3)
		if !ok || ref.Schema == nil || depth > 7 || calls > 20000 {
			return
		}
		names := []string{"no-such-field"}
		for name := range ref.Schema.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		for i, name := range names {
			p := ref.Schema.Properties[name]
			lookups := []bool{false}
			if p.Type.Contains("array") || i == 0 {
				lookups = append(lookups, true)
			}
			for _, slice := range lookups {
				calls++
				next := make([]strategicpatch.LookupPatchMeta, len(metas))
				var desc []string
				for j, m := range metas {
					var (
						l   strategicpatch.LookupPatchMeta
						pm  strategicpatch.PatchMeta
						err error
					)
					if slice {
						l, pm, err = m.LookupPatchMetadataForSlice(name)
					} else {
						l, pm, err = m.LookupPatchMetadataForStruct(name)
					}
					next[j] = l
					d := fmt.Sprintf("key=%q strategies=%q err=%v", pm.GetPatchMergeKey(), pm.GetPatchStrategies(), err != nil)
					if err == nil && l != nil && !reflect.ValueOf(l).IsZero() {
						d += " name=" + l.Name()
					}
					desc = append(desc, d)
				}
				for j, d := range desc[1:] {
					if d != desc[0] {
						diffs = append(diffs, fmt.Sprintf("%s %s.%s (slice %v): %s: %s, %s: %s", gvk, path, name, slice, impls[j+1].name, d, impls[0].name, desc[0]))
					}
				}
				if name != "no-such-field" {
					walk(path+"."+name, next, depth+1)
				}
			}
		}
	}
	walk("", metas, 0)
	return diffs
}

// threeWayPatches compares the strategic merge patch kubectl's client-side
// apply would send for each object of a kind that has patch metadata:
// original is the object without one of its fields' values, modified adds
// a label, current is the live object.
func threeWayPatches(impls []typedImpl, o oracleObject) []string {
	var patches []string
	for _, impl := range impls {
		m, err := impl.patchMeta(o.obj.GroupVersionKind())
		if err != nil || m == nil {
			patches = append(patches, fmt.Sprintf("no meta: %v", err))
			continue
		}
		current, _ := json.Marshal(o.obj.Object)
		original := o.obj.DeepCopy()
		unstructured.RemoveNestedField(original.Object, "metadata", "managedFields")
		modified := original.DeepCopy()
		modified.SetLabels(map[string]string{"patched": "yes"})
		unstructured.RemoveNestedField(modified.Object, "spec")
		ob, _ := json.Marshal(original.Object)
		mb, _ := json.Marshal(modified.Object)
		p, err := strategicpatch.CreateThreeWayMergePatch(ob, mb, current, m, true)
		if err != nil {
			patches = append(patches, "error: "+err.Error())
			continue
		}
		patches = append(patches, string(p))
	}
	var diffs []string
	for i, p := range patches[1:] {
		if p != patches[0] {
			diffs = append(diffs, fmt.Sprintf("%s %s/%s: three-way patch:\n%s: %s\n%s: %s", o.obj.GroupVersionKind(), o.obj.GetNamespace(), o.obj.GetName(), impls[i+1].name, p, impls[0].name, patches[0]))
		}
	}
	return diffs
}

// runTypedOracle compares impls (impls[0] is client-go's) on every object
// of the cluster, on a synthesized object of every served kind, and on
// every served kind's patch metadata.
func runTypedOracle(t *testing.T, c *cluster, impls []typedImpl) {
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	kinds := servedKinds(t, dc)
	objects := liveObjects(t, dyn, kinds)
	crds, err := dyn.Resource(crdGVR).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crdGroups := map[string]bool{}
	for _, crd := range crds.Items {
		g, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		crdGroups[g] = true
	}
	crdKind := func(gvk schema.GroupVersionKind) bool { return crdGroups[gvk.Group] }
	root := cgopenapi3.NewRoot(dc.OpenAPIV3())
	var gvks []schema.GroupVersionKind
	for gvk := range kinds {
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	synthesized, withSchema := 0, 0
	for _, gvk := range gvks {
		doc, err := root.GVSpec(gvk.GroupVersion())
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		s := kindSchema(doc, gvk)
		if s == nil {
			continue
		}
		withSchema++
		u := synthesize(s, doc.Components.Schemas, gvk)
		tv, err := impls[0].objectToTyped(u)
		if err == nil {
			if fs, err := tv.ToFieldSet(); err == nil {
				if b, err := fs.ToJSON(); err == nil {
					withApplyManager(t, u, b, "synthesizer", "")
					synthesized++
				}
			}
		}
		objects = append(objects, oracleObject{from: "synthesized", obj: u})
	}
	t.Logf("%d served kinds (%d with a schema), %d objects (%d synthesized with managed fields)", len(kinds), withSchema, len(objects), synthesized)
	if withSchema < 50 || synthesized < withSchema*9/10 {
		t.Fatalf("%d kinds with a schema, %d synthesized objects typed by %s: the oracle covers too little", withSchema, synthesized, impls[0].name)
	}

	var (
		diffs   []string
		v2diffs []v2Difference
	)
	applied := 0
	for _, o := range objects {
		if o.obj.GetNamespace() == "oracle" && o.from == "live" {
			applied++
		}
		d, v2 := compareTyped(impls, o, crdKind)
		diffs = append(diffs, d...)
		v2diffs = append(v2diffs, v2...)
		if o.from == "live" && o.obj.GetNamespace() == "oracle" {
			diffs = append(diffs, threeWayPatches(impls, o)...)
		}
	}
	if applied < 10 {
		t.Errorf("%d of the oracle's applied objects listed", applied)
	}
	for _, gvk := range gvks {
		diffs = append(diffs, comparePatchMeta(impls, gvk)...)
	}
	// Where an extract differs from client-go's v2 one, the server says
	// which is right: applying it back as its manager must change nothing.
	for _, d := range v2diffs {
		where := fmt.Sprintf("%s %s %s/%s Extract(%s, status %v)", d.o.from, d.o.obj.GroupVersionKind(), d.o.obj.GetNamespace(), d.o.obj.GetName(), d.manager, d.status)
		if d.o.from != "live" || d.manager == "nobody" {
			t.Logf("%s: %s differs from client-go's v2 extractor, agrees with client-go on v3:\n%s: %s\nclient-go: %s", where, d.under, d.under, d.gotJSON, d.clientGoJSON)
			continue
		}
		gvr := d.o.obj.GroupVersionKind().GroupVersion().WithResource(kinds[d.o.obj.GroupVersionKind()].Name)
		if ok, detail := appliesAsIs(t, dyn, gvr, d.got, d.manager, d.status); !ok {
			t.Errorf("%s: %s's extract, applied back, changes what the manager owns: %s\n%s", where, d.under, detail, d.gotJSON)
			continue
		}
		okCG, detailCG := appliesAsIs(t, dyn, gvr, d.clientGo, d.manager, d.status)
		t.Logf("%s: %s differs from client-go's v2 extractor (whose document lost the schema); applied back by the manager, %s's changes nothing, client-go's changes nothing: %v (%s):\n%s: %s\nclient-go: %s", where, d.under, d.under, okCG, detailCG, d.under, d.gotJSON, d.clientGoJSON)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// TestTypedOracle: on the real v1.36.3 server, for every kind it serves
// (every version) and the oracle's CRDs, openapi3/typed's adapters give
// what client-go's give: ObjectToTyped's typed values and field sets,
// TypedToObject's objects, Extract and ExtractStatus for every field
// manager (objects with managed fields written by real server-side applies
// of several managers and status applies; every live object; a synthesized
// object of every kind with every field set), and the strategic merge
// patch metadata kubectl reads from OpenAPI v3 at every field, and the
// three-way patches it makes with it.
func TestTypedOracle(t *testing.T) {
	c := startCluster(t)
	setUpOracle(t, c)
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	runTypedOracle(t, c, []typedImpl{clientGoTyped(t, dc), clientGoV3Typed(t, dc), kubeatlasTyped(t, c)})
}

// TestTypedOracleHarness checks the oracle itself with client-go's
// adapters on both sides: the applies are accepted, every kind's objects
// are read, synthesized objects are typed, and an implementation that
// differs is caught: one whose typed values lose a field, one whose
// extract drops a manager's field, one whose patch metadata forgets merge
// keys.
func TestTypedOracleHarness(t *testing.T) {
	c := startCluster(t)
	setUpOracle(t, c)
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	ref, v3 := clientGoTyped(t, dc), clientGoV3Typed(t, dc)
	runTypedOracle(t, c, []typedImpl{ref, v3, v3})

	// The oracle fails on an implementation that differs.
	broken := ref
	broken.name = "broken"
	broken.extract = func(u *unstructured.Unstructured, m string) (*unstructured.Unstructured, error) {
		out, err := v3.extract(u, m)
		if err == nil && out.GetKind() == "Gizmo" {
			unstructured.RemoveNestedField(out.Object, "spec", "port")
		}
		return out, err
	}
	broken.patchMeta = func(gvk schema.GroupVersionKind) (strategicpatch.LookupPatchMeta, error) {
		m, err := ref.patchMeta(gvk)
		if m == nil || err != nil || gvk.Kind != "Deployment" {
			return m, err
		}
		return noMergeKeys{m}, nil
	}
	obj := oracleObject{from: "live", obj: gizmoObject(t, c)}
	builtIn := func(schema.GroupVersionKind) bool { return false }
	if d, _ := compareTyped([]typedImpl{ref, v3, broken}, obj, builtIn); len(d) == 0 {
		t.Error("an extract that drops spec.port is not caught")
	}
	if d := comparePatchMeta([]typedImpl{ref, v3, broken}, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}); len(d) == 0 {
		t.Error("patch metadata without merge keys is not caught")
	}
	broken = ref
	broken.name = "lossy"
	broken.objectToTyped = func(o runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
		u := o.(*unstructured.Unstructured).DeepCopy()
		unstructured.RemoveNestedField(u.Object, "spec", "shards")
		return ref.objectToTyped(u, opts...)
	}
	if d, _ := compareTyped([]typedImpl{ref, v3, broken}, obj, builtIn); len(d) == 0 {
		t.Error("typed values that lose spec.shards are not caught")
	}
}

// gizmoObject reads the oracle's gizmo back from the server.
func gizmoObject(t testing.TB, c *cluster) *unstructured.Unstructured {
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	u, err := dyn.Resource(gizmosV1).Namespace("oracle").Get(context.Background(), "gizmo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.GetManagedFields()) < 4 {
		t.Fatalf("gizmo has %d managed fields entries, want alpha, beta, gamma and delta's", len(u.GetManagedFields()))
	}
	return u
}

// noMergeKeys is patch metadata that forgets every merge key.
type noMergeKeys struct{ strategicpatch.LookupPatchMeta }

func (n noMergeKeys) LookupPatchMetadataForSlice(key string) (strategicpatch.LookupPatchMeta, strategicpatch.PatchMeta, error) {
	l, pm, err := n.LookupPatchMeta.LookupPatchMetadataForSlice(key)
	pm.SetPatchMergeKey("")
	if l != nil {
		l = noMergeKeys{l}
	}
	return l, pm, err
}

func (n noMergeKeys) LookupPatchMetadataForStruct(key string) (strategicpatch.LookupPatchMeta, strategicpatch.PatchMeta, error) {
	l, pm, err := n.LookupPatchMeta.LookupPatchMetadataForStruct(key)
	pm.SetPatchMergeKey("")
	if l != nil {
		l = noMergeKeys{l}
	}
	return l, pm, err
}
