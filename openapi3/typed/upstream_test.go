package typed_test

// Upstream's own tests of these adapters, ported and run on both
// implementations: client-go's field-managed ObjectTracker tests
// (k8s.io/client-go/testing/fixture_test.go: TestApplyCreate,
// TestApplyNoMeta, TestApplyUpdateMultipleFieldManagers), which upstream
// runs on a scheme's converter, here on client-go's
// openapi.NewTypeConverter and on ours, over the same server; and the
// strategic merge patches kubectl's client-side apply computes from v3
// (k8s.io/kubectl/pkg/cmd/apply/patcher.go,
// buildStrategicMergePatchFromOpenAPIV3), from client-go's parsed
// group-version document and from PatchMeta.

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi3"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// bothConverters are client-go's and ours over one server.
func bothConverters(t *testing.T) map[string]managedfields.TypeConverter {
	srv := newServer(t)
	cg, err := openapi.NewTypeConverter(srv.clientGo(t), false)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]managedfields.TypeConverter{"client-go": cg, "kubeatlas": newConverter(t, srv.client(t))}
}

var cmResource = schema.GroupVersionResource{Group: "", Version: "v1", Resource: "configMaps"}

func tracker(tc managedfields.TypeConverter) clienttesting.ObjectTracker {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(cmResource.GroupVersion(), &corev1.ConfigMap{})
	codecs := serializer.NewCodecFactory(scheme)
	return clienttesting.NewFieldManagedObjectTracker(scheme, codecs.UniversalDecoder(), tc)
}

func TestUpstreamApplyCreate(t *testing.T) {
	for name, tc := range bothConverters(t) {
		t.Run(name, func(t *testing.T) {
			reaction := clienttesting.ObjectReaction(tracker(tc))
			patch := []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-1"}, "data": {"k": "v"}}`)
			action := clienttesting.NewPatchActionWithOptions(cmResource, "default", "cm-1", types.ApplyPatchType, patch,
				metav1.PatchOptions{FieldManager: "test-manager"})
			handled, configMap, err := reaction(action)
			assert.True(t, handled)
			if err != nil {
				t.Fatalf("Failed to create a resource with apply: %v", err)
			}
			cm := configMap.(*corev1.ConfigMap)
			assert.Equal(t, map[string]string{"k": "v"}, cm.Data)
		})
	}
}

func TestUpstreamApplyNoMeta(t *testing.T) {
	for name, tc := range bothConverters(t) {
		t.Run(name, func(t *testing.T) {
			reaction := clienttesting.ObjectReaction(tracker(tc))
			patch := []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}`)
			action := clienttesting.NewPatchActionWithOptions(cmResource, "default", "cm-1", types.ApplyPatchType, patch,
				metav1.PatchOptions{FieldManager: "test-manager"})
			handled, configMap, err := reaction(action)
			assert.True(t, handled)
			if err != nil {
				t.Fatalf("Failed to create a resource with apply: %v", err)
			}
			cm := configMap.(*corev1.ConfigMap)
			assert.Equal(t, "cm-1", cm.Name)
			assert.Equal(t, map[string]string{"k": "v"}, cm.Data)
		})
	}
}

func TestUpstreamApplyUpdateMultipleFieldManagers(t *testing.T) {
	for name, tc := range bothConverters(t) {
		t.Run(name, func(t *testing.T) {
			o := tracker(tc)
			reaction := clienttesting.ObjectReaction(o)
			action := clienttesting.NewCreateAction(cmResource, "default", &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: "cm-1"},
				Data:       map[string]string{"k0": "v0"},
			})
			handled, _, err := reaction(action)
			assert.True(t, handled)
			if err != nil {
				t.Errorf("Failed to create resource: %v", err)
			}

			// Apply with test-manager-1
			// Expect data to be shared with initial create
			patch := []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-1"}, "data": {"k1": "v1"}}`)
			applyAction := clienttesting.NewPatchActionWithOptions(cmResource, "default", "cm-1", types.ApplyPatchType, patch,
				metav1.PatchOptions{FieldManager: "test-manager-1"})
			handled, configMap, err := reaction(applyAction)
			assert.True(t, handled)
			if err != nil {
				t.Errorf("Failed to apply resource: %v", err)
			}
			cm := configMap.(*corev1.ConfigMap)
			assert.Equal(t, map[string]string{"k0": "v0", "k1": "v1"}, cm.Data)

			// Apply conflicting with test-manager-2, expect apply to fail
			patch = []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-1"}, "data": {"k1": "xyz"}}`)
			applyAction = clienttesting.NewPatchActionWithOptions(cmResource, "default", "cm-1", types.ApplyPatchType, patch,
				metav1.PatchOptions{FieldManager: "test-manager-2"})
			handled, _, err = reaction(applyAction)
			assert.True(t, handled)
			if assert.Error(t, err) {
				assert.Equal(t, "Apply failed with 1 conflict: conflict with \"test-manager-1\": .data.k1", err.Error())
			}

			// Apply with test-manager-2
			// Expect data to be shared with initial create and test-manager-1
			patch = []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-1"}, "data": {"k2": "v2"}}`)
			applyAction = clienttesting.NewPatchActionWithOptions(cmResource, "default", "cm-1", types.ApplyPatchType, patch,
				metav1.PatchOptions{FieldManager: "test-manager-2"})
			handled, configMap, err = reaction(applyAction)
			assert.True(t, handled)
			if err != nil {
				t.Errorf("Failed to apply resource: %v", err)
			}
			cm = configMap.(*corev1.ConfigMap)
			assert.Equal(t, map[string]string{"k0": "v0", "k1": "v1", "k2": "v2"}, cm.Data)

			// Apply with test-manager-1
			// Expect owned data to be updated
			patch = []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-1"}, "data": {"k1": "v101"}}`)
			applyAction = clienttesting.NewPatchActionWithOptions(cmResource, "default", "cm-1", types.ApplyPatchType, patch,
				metav1.PatchOptions{FieldManager: "test-manager-1"})
			handled, configMap, err = reaction(applyAction)
			assert.True(t, handled)
			if err != nil {
				t.Errorf("Failed to apply resource: %v", err)
			}
			cm = configMap.(*corev1.ConfigMap)
			assert.Equal(t, map[string]string{"k0": "v0", "k1": "v101", "k2": "v2"}, cm.Data)

			// Force apply with test-manager-2
			// Expect data owned by test-manager-1 to be updated, expect data already owned but not in apply configuration to be removed
			patch = []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-1"}, "data": {"k1": "v202"}}`)
			applyAction = clienttesting.NewPatchActionWithOptions(cmResource, "default", "cm-1", types.ApplyPatchType, patch,
				metav1.PatchOptions{FieldManager: "test-manager-2", Force: ptr.To(true)})
			handled, configMap, err = reaction(applyAction)
			assert.True(t, handled)
			if err != nil {
				t.Errorf("Failed to apply resource: %v", err)
			}
			cm = configMap.(*corev1.ConfigMap)
			assert.Equal(t, map[string]string{"k0": "v0", "k1": "v202"}, cm.Data)

			// Update with test-manager-1 to perform a force update of the entire resource
			reaction = clienttesting.ObjectReaction(o)
			updateAction := clienttesting.NewUpdateActionWithOptions(cmResource, "default", &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: "cm-1"},
				Data:       map[string]string{"k99": "v99"},
			}, metav1.UpdateOptions{FieldManager: "test-manager-1"})
			handled, configMap, err = reaction(updateAction)
			assert.True(t, handled)
			if err != nil {
				t.Errorf("Failed to apply resource: %v", err)
			}
			typedCm := configMap.(*corev1.ConfigMap)
			assert.Equal(t, map[string]string{"k99": "v99"}, typedCm.Data)
		})
	}
}

// smpCases are three-way merges (original: last applied, modified: the new
// configuration, current: the live object) where the patch strategy
// matters: containers merged by name, ports by containerPort, volumes
// replaced by "$retainKeys", finalizers and tolerations as lists.
var smpCases = []struct {
	name                        string
	gvk                         schema.GroupVersionKind
	original, modified, current string
}{{
	name: "deployment containers and env by name",
	gvk:  schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
	original: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[
		{"name":"a","image":"a:1","env":[{"name":"X","value":"1"}],"ports":[{"containerPort":80}]}]}}}}`,
	modified: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[
		{"name":"a","image":"a:2","env":[{"name":"Y","value":"2"}],"ports":[{"containerPort":443}]},{"name":"b","image":"b:1"}]}}}}`,
	current: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":3,"template":{"spec":{"containers":[
		{"name":"a","image":"a:1","env":[{"name":"X","value":"1"},{"name":"Z","value":"3"}],"ports":[{"containerPort":80}]},{"name":"injected","image":"i"}]}}}}`,
}, {
	name: "pod volumes and tolerations",
	gvk:  schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
	original: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","finalizers":["a"]},"spec":{"volumes":[{"name":"v","emptyDir":{}}],
		"tolerations":[{"key":"k","operator":"Exists"}],"containers":[{"name":"c","image":"i"}]}}`,
	modified: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","finalizers":["b"]},"spec":{"volumes":[{"name":"v","configMap":{"name":"cm"}}],
		"tolerations":[{"key":"j","operator":"Exists"}],"containers":[{"name":"c","image":"i"}]}}`,
	current: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","finalizers":["a","x"]},"spec":{"volumes":[{"name":"v","emptyDir":{}},{"name":"token","projected":{}}],
		"tolerations":[{"key":"k","operator":"Exists"},{"key":"node","operator":"Exists"}],"containers":[{"name":"c","image":"i"}]}}`,
}, {
	name:     "service ports by port",
	gvk:      schema.GroupVersionKind{Version: "v1", Kind: "Service"},
	original: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":8080}]}}`,
	modified: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":9090},{"port":443}]}}`,
	current:  `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"clusterIP":"10.0.0.1","ports":[{"port":80,"targetPort":8080,"protocol":"TCP"}]}}`,
}}

// kubectlPatchMeta is what kubectl's buildStrategicMergePatchFromOpenAPIV3
// builds: the kind's schema among client-go's parsed group-version
// document (openapi3.NewRoot(...).GVSpec), found by its
// x-kubernetes-group-version-kind.
func kubectlPatchMeta(t *testing.T, root openapi3.Root, gvk schema.GroupVersionKind) strategicpatch.LookupPatchMeta {
	t.Helper()
	gvSpec, err := root.GVSpec(gvk.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range gvSpec.Components.Schemas {
		var list []map[string]string
		if err := c.Extensions.GetObject("x-kubernetes-group-version-kind", &list); err != nil {
			continue
		}
		for _, m := range list {
			if m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
				return strategicpatch.PatchMetaFromOpenAPIV3{Schema: c, SchemaList: gvSpec.Components.Schemas}
			}
		}
	}
	t.Fatalf("no schema for %s", gvk)
	return nil
}

// TestPatchMetaAsKubectl: the three-way strategic merge patch computed
// with PatchMeta is the one kubectl computes from client-go's v3 root, and
// it merges lists by their keys (a patch of a list replaced whole would
// drop the injected container).
func TestPatchMetaAsKubectl(t *testing.T) {
	srv := newServer(t)
	root := openapi3.NewRoot(srv.clientGo(t))
	conv := newConverter(t, srv.client(t))
	for _, c := range smpCases {
		t.Run(c.name, func(t *testing.T) {
			pm, err := conv.PatchMeta(context.Background(), c.gvk)
			if err != nil {
				t.Fatal(err)
			}
			want, err := strategicpatch.CreateThreeWayMergePatch([]byte(c.original), []byte(c.modified), []byte(c.current), kubectlPatchMeta(t, root, c.gvk), true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := strategicpatch.CreateThreeWayMergePatch([]byte(c.original), []byte(c.modified), []byte(c.current), pm, true)
			if err != nil {
				t.Fatal(err)
			}
			assert.JSONEq(t, string(want), string(got))
			merged, err := strategicpatch.StrategicMergePatchUsingLookupPatchMeta([]byte(c.current), got, pm)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(merged, &m); err != nil {
				t.Fatal(err)
			}
			if c.name == "deployment containers and env by name" {
				assert.Contains(t, string(merged), `"name":"injected"`, "the container another writer added must stay")
				assert.Contains(t, string(merged), `"name":"Z"`, "the env var another writer added must stay")
			}
		})
	}
	// A CRD's PATCH takes no strategic merge patch (kubectl sends a merge
	// patch), but its schema is found all the same; an unknown kind is not.
	if _, err := conv.PatchMeta(context.Background(), widgetGVK); err != nil {
		t.Error(err)
	}
	if _, err := conv.PatchMeta(context.Background(), widgetGVK.GroupVersion().WithKind("Nope")); err == nil {
		t.Error("PatchMeta of an unknown kind: no error")
	}
}
