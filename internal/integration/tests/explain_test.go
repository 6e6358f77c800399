package tests

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubeatlas/kubeatlas/internal/testenv"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// widgetSchema has each kind of field explain renders differently: enums
// at several depths, int-or-string, maps of strings and of objects, arrays
// of arrays, inline objects, required fields, a free-form object, and a
// description whose indented lines must keep their spaces.
const widgetSchema = `{
  "type": "object",
  "description": "A Widget is a thing with many kinds of fields, for explain.",
  "properties": {
    "spec": {
      "type": "object",
      "description": "Spec is what the widget should be.\n\n  An indented line, kept as it is.\nAnd a plain one.",
      "required": ["size"],
      "properties": {
        "size": {"type": "integer", "format": "int32", "minimum": 1, "description": "Size of the widget."},
        "color": {"type": "string", "enum": ["red", "green", "blue"], "default": "red", "description": "Color of the widget."},
        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "description": "Port, a number or a name."},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Labels to put on the parts."},
        "parts": {"type": "object", "description": "Parts by name.", "additionalProperties": {
          "type": "object", "description": "A part.",
          "properties": {"count": {"type": "integer"}, "kind": {"type": "string", "enum": ["bolt", "nut"], "description": "What the part is."}}}},
        "grid": {"type": "array", "description": "Rows of cells.", "items": {"type": "array", "items": {
          "type": "object",
          "properties": {"x": {"type": "integer"}, "mode": {"type": "string", "enum": ["on", "off"], "description": "Whether the cell is on."}}}}},
        "steps": {"type": "array", "description": "Steps to run, in order.", "items": {
          "type": "object", "required": ["name"],
          "properties": {"name": {"type": "string"}, "action": {"type": "string", "enum": ["Create", "Delete"]}, "args": {"type": "array", "items": {"type": "string"}}}}},
        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Free-form configuration."},
        "nested": {"type": "object", "properties": {"deeper": {"type": "object", "properties": {"deepest": {"type": "string", "enum": ["a", "b"]}}}}}
      }
    },
    "status": {
      "type": "object",
      "properties": {
        "phase": {"type": "string", "enum": ["Pending", "Ready", "Failed"], "description": "Phase of the widget."},
        "conditions": {"type": "array", "items": {"type": "object", "properties": {
          "type": {"type": "string"}, "status": {"type": "string", "enum": ["True", "False", "Unknown"]}}}}
      }
    }
  }
}`

// widgetCRD serves widgetSchema as widgets.example.com in v1 (stored) and
// v1beta1, with a short name.
func widgetCRD(t *testing.T) *unstructured.Unstructured {
	var schema map[string]any
	if err := json.Unmarshal([]byte(widgetSchema), &schema); err != nil {
		t.Fatal(err)
	}
	var versions []any
	for i, v := range []string{"v1", "v1beta1"} {
		versions = append(versions, map[string]any{"name": v, "served": true, "storage": i == 0,
			"schema": map[string]any{"openAPIV3Schema": schema}})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com", "scope": "Namespaced",
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": []any{"wdg"}},
			"versions": versions,
		},
	}}
}

// installWidgets creates widgetCRD on the cluster and returns the dynamic
// client it used.
func installWidgets(t *testing.T, c *cluster) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdGVR).Create(context.Background(), widgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dyn
}

// TestExplainMatchesKubectl: explain prints what kubectl explain prints,
// byte for byte, on the real server's documents, for built-in types and
// for a CRD with every kind of field; --recursive on a self-referencing
// schema (JSONSchemaProps, inside a CRD's versions) ends where kubectl's
// ends.
func TestExplainMatchesKubectl(t *testing.T) {
	kubectl := testenv.Tool(t, "kubectl")
	c := startCluster(t)
	ctx := context.Background()
	installWidgets(t, c)
	eventually(t, "OpenAPI v3 describes widgets", 30*time.Second, func() (bool, string) {
		oc, err := openapi3.New(c.config) // a new client reads the root anew
		if err != nil {
			return false, err.Error()
		}
		paths, err := oc.Paths(ctx)
		if err != nil {
			return false, err.Error()
		}
		_, v1 := paths["apis/example.com/v1"]
		_, v1beta1 := paths["apis/example.com/v1beta1"]
		return v1 && v1beta1, "not yet"
	})
	bin := filepath.Join(t.TempDir(), "explain")
	if out, err := buildExample(bin, "explain"); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	builtIn := []string{"customresourcedefinitions.spec.versions.schema --recursive", "deployments.spec.template.spec.containers --recursive",
		"deployments", "deployments.apps.spec.strategy", "pods.spec.containers.imagePullPolicy", "customresourcedefinitions.spec", "pods.spec.volumes", "nodes.status.capacity",
		"pods", "pods.spec", "pods.spec.containers.ports", "pods.spec.containers.ports.protocol", "pods.spec.containers.resources.limits",
		"pods.spec.volumes.configMap.items", "services.spec.ports.targetPort", "deployments.spec.strategy.rollingUpdate.maxSurge", "configmaps.data",
		"secrets.type", "jobs.spec.template.spec.restartPolicy", "cronjobs.spec.jobTemplate", "ingresses.spec.rules.http.paths.pathType",
		"networkpolicies.spec.ingress.from", "--api-version apps/v1 deployments.spec.replicas", "--api-version autoscaling/v2 hpa.spec.metrics",
		"hpa --api-version autoscaling/v1", "svc.spec.type", "po.metadata.labels", "ev.reason", "events.events.k8s.io.note",
		"statefulsets.spec.volumeClaimTemplates.spec --recursive", "roles.rules", "storageclasses.parameters", "crd.spec.versions.schema.openAPIV3Schema"}
	crd := []string{"widgets", "widgets.spec", "widgets.example.com.spec.size", "widgets.spec.color", "widgets.spec.port",
		"widgets.spec.labels", "widgets.spec.parts", "widgets.spec.parts.kind", "widgets.spec.grid", "widgets.spec.grid.mode",
		"widgets.spec.steps", "widgets.spec.steps.action", "widgets.spec.config", "widgets.status.phase", "widgets.status.conditions.status",
		"widgets --recursive", "wdg.spec.nested --recursive", "--api-version example.com/v1beta1 widgets.spec", "widgets.spec.nope",
		"widgets.example.com", "widget.spec.steps --recursive"}
	for _, path := range append(builtIn, crd...) {
		got, want, err, werr := sideBySide(t, c, bin, kubectl, "explain", strings.Fields(path))
		// kubectl fails on some paths too (events.events.k8s.io.note: it
		// picks the core group's events, as we do): failing alike is right.
		if (err == nil) != (werr == nil) {
			t.Errorf("explain %s: %v, kubectl: %v", path, err, werr)
		}
		var ee, wee *exec.ExitError
		if errors.As(err, &ee) && errors.As(werr, &wee) && string(ee.Stderr) != string(wee.Stderr) {
			t.Errorf("explain %s: stderr %q, kubectl's %q", path, ee.Stderr, wee.Stderr)
		}
		if g, w := fieldLines(string(got)), fieldLines(string(want)); !slices.Equal(g, w) {
			t.Errorf("explain %s: %d field lines, kubectl %d:\n got %q\nwant %q", path, len(g), len(w), g, w)
		} else if string(got) != string(want) {
			t.Errorf("explain %s: not kubectl's bytes:\n got:\n%s\nwant:\n%s", path, got, want)
		}
	}
}
