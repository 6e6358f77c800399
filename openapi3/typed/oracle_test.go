package typed_test

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/managedfields/managedfieldstest"
	"k8s.io/client-go/openapi"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	smdtyped "sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"

	"github.com/kubeatlas/kubeatlas/internal/mediatype"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// kindsOf lists the kinds each fixture document names for its own
// group-version, and the CRD's.
func kindsOf(t *testing.T) []schema.GroupVersionKind {
	t.Helper()
	docs, err := fixtures()
	if err != nil {
		t.Fatal(err)
	}
	var out []schema.GroupVersionKind
	for path, doc := range docs {
		comps, _ := doc["components"].(map[string]any)
		schemas, _ := comps["schemas"].(map[string]any)
		for _, s := range schemas {
			list, _ := s.(map[string]any)["x-kubernetes-group-version-kind"].([]any)
			for _, e := range list {
				m := e.(map[string]any)
				gvk := schema.GroupVersionKind{Group: m["group"].(string), Version: m["version"].(string), Kind: m["kind"].(string)}
				if mediatype.OpenAPIPath(gvk.Group, gvk.Version) == path && !slices.Contains(out, gvk) {
					out = append(out, gvk)
				}
			}
		}
	}
	out = append(out, widgetGVK, schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "WidgetList"})
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

var widgetGVK = schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "Widget"}

// clientGoType is the type client-go's converter gives gvk: that of the
// typed value of an object of that kind with nothing else set, or the
// error converting it (a kind whose schema declares no apiVersion, such as
// WatchEvent).
func clientGoType(tc managedfields.TypeConverter, gvk schema.GroupVersionKind) (*smdtyped.ParseableType, error) {
	tv, err := tc.ObjectToTyped(probe(gvk))
	if err != nil {
		return nil, err
	}
	return &smdtyped.ParseableType{Schema: tv.Schema(), TypeRef: tv.TypeRef()}, nil
}

func probe(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func mustClientGoType(t *testing.T, tc managedfields.TypeConverter, gvk schema.GroupVersionKind) *smdtyped.ParseableType {
	t.Helper()
	pt, err := clientGoType(tc, gvk)
	if err != nil {
		t.Fatalf("client-go's converter, %s: %v", gvk, err)
	}
	return pt
}

// typeGraph is the canonical JSON of every named type reachable from a
// type (exported fields only, struct fields sorted by name), by name: two
// types merge, validate and extract alike when their graphs are equal.
func typeGraph(t *testing.T, pt *smdtyped.ParseableType) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(tr smdschema.TypeRef)
	walkAtom := func(a smdschema.Atom) {
		if a.Map != nil {
			for _, f := range a.Map.Fields {
				walk(f.Type)
			}
			walk(a.Map.ElementType)
		}
		if a.List != nil {
			walk(a.List.ElementType)
		}
	}
	walk = func(tr smdschema.TypeRef) {
		if tr.NamedType == nil {
			walkAtom(tr.Inlined)
			return
		}
		name := *tr.NamedType
		if _, seen := out[name]; seen {
			return
		}
		td, ok := pt.Schema.FindNamedType(name)
		if !ok {
			out[name] = "MISSING"
			return
		}
		b, err := json.Marshal(td.Atom)
		if err != nil {
			t.Fatal(err)
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		if b, err = json.Marshal(canonical(generic)); err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
		walkAtom(td.Atom)
	}
	root, _ := json.Marshal(pt.TypeRef)
	out["(root)"] = string(root)
	walk(pt.TypeRef)
	return out
}

// canonical sorts, at every depth, lists of struct fields by name:
// schemaconv lists a struct's fields in its map's order.
func canonical(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = canonical(e)
		}
	case []any:
		for i, e := range v {
			v[i] = canonical(e)
		}
		sort.SliceStable(v, func(i, j int) bool {
			a, _ := v[i].(map[string]any)
			b, _ := v[j].(map[string]any)
			an, _ := a["Name"].(string)
			bn, _ := b["Name"].(string)
			return an < bn
		})
	}
	return v
}

// TestSameTypesAsClientGo: for every kind the real server serves, and a
// CRD's, with and without preserve-unknown-fields, the type built from the
// kind's document alone is client-go's (openapi.NewTypeConverter over
// every document), type for type.
func TestSameTypesAsClientGo(t *testing.T) {
	srv := newServer(t)
	kinds := kindsOf(t)
	if len(kinds) < 100 {
		t.Fatalf("only %d kinds in the fixtures", len(kinds))
	}
	for _, preserve := range []bool{false, true} {
		cg, err := openapi.NewTypeConverter(srv.clientGo(t), preserve)
		if err != nil {
			t.Fatal(err)
		}
		conv, err := typed.New(srv.client(t), typed.WithPreserveUnknownFields(preserve))
		if err != nil {
			t.Fatal(err)
		}
		compared, refused, lost := 0, 0, []string(nil)
		for _, gvk := range kinds {
			ours, err := conv.Type(context.Background(), gvk)
			if err != nil {
				t.Errorf("preserve %v, %s: %v", preserve, gvk, err)
				continue
			}
			theirs, cgErr := clientGoType(cg, gvk)
			if cgErr != nil && strings.HasPrefix(cgErr.Error(), "no corresponding type") &&
				strings.HasPrefix(*ours.TypeRef.NamedType, "io.k8s.apimachinery.pkg.apis.meta.v1.") {
				// client-go merges every document's schemas into one map,
				// where the last document's copy of a shared meta schema
				// (DeleteOptions, WatchEvent) wins, with the kinds that
				// document lists: the others' are lost. Ours reads the
				// kind's own document.
				lost = append(lost, gvk.String())
				continue
			}
			if cgErr != nil {
				// The same object is refused alike: the same error, but
				// for the field named, which is the first of the object's
				// undeclared fields in map order (random on both sides).
				_, err := conv.ObjectToTyped(probe(gvk))
				if err == nil || withoutField(err.Error()) != withoutField(cgErr.Error()) {
					t.Errorf("%s: client-go's converter: %v; ours: %v", gvk, cgErr, err)
				}
				refused++
				continue
			}
			compared++
			want, got := typeGraph(t, theirs), typeGraph(t, ours)
			if len(got) < 2 {
				t.Errorf("%s: no named type", gvk)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("preserve %v, %s: types differ from client-go's (-client-go +ours):\n%s", preserve, gvk, diff)
			}
		}
		t.Logf("preserve %v: %d kinds' types compared, %d refused alike; %d kinds client-go's merged map lost: %v", preserve, compared, refused, len(lost), lost)
		if compared < len(kinds)*3/4 {
			t.Errorf("only %d of %d kinds compared", compared, len(kinds))
		}
	}
}

// step is one server-side apply (or update) of a manager to the live object.
type step struct {
	manager string
	update  bool // an update rather than an apply
	force   bool
	obj     string // YAML
}

// applyCase is a kind and the applies that give its object managed fields.
type applyCase struct {
	name  string
	gvk   schema.GroupVersionKind
	steps []step
	// extract is the manager whose applied configuration is compared;
	// want, when set, what it must be (fields beside apiVersion, kind,
	// name and namespace), so that a test that extracts nothing fails.
	extract string
	want    string
}

var applyCases = []applyCase{{
	name: "deployment", gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
	steps: []step{
		{manager: "a", obj: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: ns, labels: {app: x}}, spec: {replicas: 2, selector: {matchLabels: {app: x}}, template: {metadata: {labels: {app: x}}, spec: {containers: [{name: c, image: nginx, ports: [{containerPort: 80, protocol: TCP}], env: [{name: A, value: "1"}]}]}}}}`},
		{manager: "b", obj: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: ns}, spec: {template: {spec: {containers: [{name: c, env: [{name: B, value: "2"}]}, {name: sidecar, image: busybox}]}}}}`},
		{manager: "hpa", update: true, obj: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: ns, labels: {app: x}}, spec: {replicas: 5, selector: {matchLabels: {app: x}}, template: {metadata: {labels: {app: x}}, spec: {containers: [{name: c, image: nginx, ports: [{containerPort: 80, protocol: TCP}], env: [{name: A, value: "1"}, {name: B, value: "2"}]}, {name: sidecar, image: busybox}]}}}}`},
	},
	extract: "b",
	want:    `{spec: {template: {spec: {containers: [{name: c, env: [{name: B, value: "2"}]}, {name: sidecar, image: busybox}]}}}}`,
}, {
	name: "service", gvk: schema.GroupVersionKind{Version: "v1", Kind: "Service"},
	steps: []step{
		{manager: "a", obj: `{apiVersion: v1, kind: Service, metadata: {name: s, namespace: ns}, spec: {selector: {app: x}, ports: [{port: 80, protocol: TCP, targetPort: 8080}, {port: 80, protocol: UDP, targetPort: dns}]}}`},
		{manager: "b", obj: `{apiVersion: v1, kind: Service, metadata: {name: s, namespace: ns, annotations: {b: "1"}}, spec: {ports: [{port: 443, protocol: TCP, targetPort: 8443}]}}`},
	},
	extract: "a",
	want:    `{spec: {selector: {app: x}, ports: [{port: 80, protocol: TCP, targetPort: 8080}, {port: 80, protocol: UDP, targetPort: dns}]}}`,
}, {
	name: "configmap", gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
	steps: []step{
		{manager: "a", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: ns}, data: {k0: v0, k1: v1}}`},
		{manager: "b", force: true, obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: ns}, data: {k1: changed}}`},
	},
	extract: "a",
	want:    `{data: {k0: v0}}`,
}, {
	name: "crd", gvk: widgetGVK,
	steps: []step{
		{manager: "a", obj: `{apiVersion: stable.example.com/v1, kind: Widget, metadata: {name: w, namespace: ns}, spec: {replicas: 1, port: http, config: {free: {form: [1, 2]}}, template: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {anything: true}}, ports: [{name: web, protocol: TCP, port: 80}, {name: web, protocol: UDP, port: 81}], tags: [red, blue], labels: {l: "1"}, selector: {s: "1"}}}`},
		{manager: "b", obj: `{apiVersion: stable.example.com/v1, kind: Widget, metadata: {name: w, namespace: ns}, spec: {ports: [{name: metrics, protocol: TCP, port: 9090}], tags: [green], labels: {m: "2"}}}`},
		{manager: "a", force: true, obj: `{apiVersion: stable.example.com/v1, kind: Widget, metadata: {name: w, namespace: ns}, spec: {replicas: 3, port: http, config: {free: {form: [3]}}, template: {apiVersion: v1, kind: Pod, metadata: {name: p}}, ports: [{name: web, protocol: TCP, port: 80}], tags: [red], labels: {l: "1"}, selector: {s: "2"}}}`},
		{manager: "ctl", update: true, obj: `{apiVersion: stable.example.com/v1, kind: Widget, metadata: {name: w, namespace: ns}, spec: {replicas: 3, port: http, config: {free: {form: [3]}, more: 1}, template: {apiVersion: v1, kind: Pod, metadata: {name: p}}, ports: [{name: web, protocol: TCP, port: 80}, {name: metrics, protocol: TCP, port: 9090}], tags: [red, green], labels: {l: "1", m: "2"}, selector: {s: "2"}}, status: {ready: true, conditions: [{type: Ready, status: "True"}]}}`},
	},
	extract: "a",
	want:    `{spec: {replicas: 3, port: http, config: {free: {form: [3]}}, template: {apiVersion: v1, kind: Pod, metadata: {name: p}}, ports: [{name: web, protocol: TCP, port: 80}], tags: [red], labels: {l: "1"}, selector: {s: "2"}}}`,
}}

func fromYAML(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return u
}

// run applies c's steps with tc, and returns the live object with the
// managed fields' times cleared.
func (c applyCase) run(t *testing.T, tc managedfields.TypeConverter) *unstructured.Unstructured {
	t.Helper()
	fm := managedfieldstest.NewTestFieldManager(tc, c.gvk)
	for i, s := range c.steps {
		var err error
		if s.update {
			err = fm.Update(fromYAML(t, s.obj), s.manager)
		} else {
			err = fm.Apply(fromYAML(t, s.obj), s.manager, s.force)
		}
		if err != nil {
			t.Fatalf("%s: step %d (%s): %v", c.name, i, s.manager, err)
		}
	}
	live := fm.Live().(*unstructured.Unstructured)
	mf := live.GetManagedFields()
	for i := range mf {
		mf[i].Time = nil
	}
	live.SetManagedFields(mf)
	return live
}

// TestApplyAndExtractAsClientGo: server-side applies through the field
// manager give the same object and managed fields on our converter as on
// client-go's, and extracting a manager's configuration from it gives the
// same object as client-go's extractor's code path (managedfields.ExtractInto
// on client-go's type), and the configuration the manager applied.
func TestApplyAndExtractAsClientGo(t *testing.T) {
	srv := newServer(t)
	cg, err := openapi.NewTypeConverter(srv.clientGo(t), false)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := typed.New(srv.client(t))
	if err != nil {
		t.Fatal(err)
	}
	ex := conv.Extractor()
	for _, c := range applyCases {
		t.Run(c.name, func(t *testing.T) {
			want, got := c.run(t, cg), c.run(t, conv)
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Fatalf("live object differs from client-go's (-client-go +ours):\n%s", diff)
			}
			if len(got.GetManagedFields()) < 2 {
				t.Fatalf("managed fields: %v", got.GetManagedFields())
			}
			ours, err := ex.Extract(got, c.extract)
			if err != nil {
				t.Fatal(err)
			}
			theirs := &unstructured.Unstructured{}
			if err := managedfields.ExtractInto(want, *mustClientGoType(t, cg, c.gvk), c.extract, theirs, ""); err != nil { //nolint:forbidigo
				t.Fatal(err)
			}
			theirs.SetName(want.GetName())
			theirs.SetNamespace(want.GetNamespace())
			theirs.SetKind(want.GetKind())
			theirs.SetAPIVersion(want.GetAPIVersion())
			if diff := cmp.Diff(theirs.Object, ours.Object); diff != "" {
				t.Errorf("extracted differs from client-go's (-client-go +ours):\n%s", diff)
			}
			j, err := yaml.YAMLToJSON([]byte(c.want))
			if err != nil {
				t.Fatal(err)
			}
			expect := &unstructured.Unstructured{}
			if err := utiljson.Unmarshal(j, &expect.Object); err != nil {
				t.Fatal(err)
			}
			expect.SetGroupVersionKind(c.gvk)
			expect.SetName(got.GetName())
			expect.SetNamespace(got.GetNamespace())
			if diff := cmp.Diff(expect.Object, ours.Object); diff != "" {
				t.Errorf("extracted is not what %s applied (-want +got):\n%s", c.extract, diff)
			}
		})
	}
}

// TestExtractStatus: what a manager applied to the status subresource is
// extracted by ExtractStatus, not by Extract.
func TestExtractStatus(t *testing.T) {
	srv := newServer(t)
	conv, err := typed.New(srv.client(t))
	if err != nil {
		t.Fatal(err)
	}
	fm := managedfieldstest.NewTestFieldManager(conv, widgetGVK)
	if err := fm.Apply(fromYAML(t, `{apiVersion: stable.example.com/v1, kind: Widget, metadata: {name: w}, spec: {replicas: 1}}`), "ctl", false); err != nil {
		t.Fatal(err)
	}
	live := fm.Live().(*unstructured.Unstructured)
	sub := managedfieldstest.NewTestFieldManagerSubresource(conv, widgetGVK, "status")
	withStatus := live.DeepCopy()
	if err := unstructured.SetNestedField(withStatus.Object, true, "status", "ready"); err != nil {
		t.Fatal(err)
	}
	// The status manager applies onto the live object (as the server's
	// status endpoint would).
	subLive := fromYAML(t, `{apiVersion: stable.example.com/v1, kind: Widget, metadata: {name: w}, status: {ready: true, conditions: [{type: Ready, status: "True"}]}}`)
	if err := sub.Apply(subLive, "ctl", false); err != nil {
		t.Fatal(err)
	}
	st := sub.Live().(*unstructured.Unstructured)
	// Merge both managers' entries into one object, as the server holds them.
	obj := live.DeepCopy()
	obj.Object["status"] = st.Object["status"]
	obj.SetManagedFields(append(live.GetManagedFields(), st.GetManagedFields()...))
	ex := conv.Extractor()
	status, err := ex.ExtractStatus(obj, "ctl")
	if err != nil {
		t.Fatal(err)
	}
	main, err := ex.Extract(obj, "ctl")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := status.Object["spec"]; ok || status.Object["status"] == nil {
		t.Errorf("ExtractStatus: %v; want the status alone", status.Object)
	}
	if _, ok := main.Object["status"]; ok || main.Object["spec"] == nil {
		t.Errorf("Extract: %v; want the spec alone", main.Object)
	}
	if !strings.Contains(func() string { b, _ := json.Marshal(status.Object); return string(b) }(), `"conditions":[{"status":"True","type":"Ready"}]`) {
		t.Errorf("ExtractStatus: %v", status.Object)
	}
	for _, e := range obj.GetManagedFields() {
		if e.Manager == "ctl" && e.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("entry %+v", e)
		}
	}
}

// withoutField is a structured-merge-diff validation error without the
// path of the field it names (".kind: field not declared in schema").
func withoutField(msg string) string {
	if path, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(path, ".") {
		return rest
	}
	return msg
}
