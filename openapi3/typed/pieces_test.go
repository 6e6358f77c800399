package typed

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

var xGVK = schema.GroupVersionKind{Group: "x", Version: "v1", Kind: "W"}

// docOf is a document of the kind x/v1 W, whose schema is named w and
// lists its kind with the member named gvkMember (raw JSON, quotes and all),
// and of the schemas given (name to raw JSON).
func docOf(t *testing.T, w, gvkMember string, others map[string]string) *openapi3.Document {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `{"openapi":"3.0.0","components":{"schemas":{%q:{"type":"object",%s:[{"group":"x","version":"v1","kind":"W"}],`+
		`"properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},"spec":{"$ref":"#/components/schemas/S"}}}`, w, gvkMember)
	for n, s := range others {
		fmt.Fprintf(&b, ",%q:%s", n, s)
	}
	b.WriteString(`}}}`)
	d, err := openapi3.NewDocument("apis/x/v1", "/openapi/v3/apis/x/v1?hash=1", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// typeOfDoc is W's type in d, built as a Converter builds it.
func typeOfDoc(d *openapi3.Document, gvk schema.GroupVersionKind) (*built, error) {
	v, err := d.Derived(buildKey{}, buildKey{}.build)
	if err != nil {
		return nil, err
	}
	b := v.(*built)
	k := b.kinds[gvk]
	if k == nil {
		return b, fmt.Errorf("%w: %s", openapi3.ErrNotFound, gvk)
	}
	b.typeKind(k)
	return b, k.err
}

// TestKindsFoundAsUpstream: the kinds are found as managedfields'
// converter finds them over all of the document's schemas, though only
// the schemas whose bytes may name the extension are parsed to find them
// (mayListKinds): an extension name in another case, or spelt with \u
// escapes, lists the kind for kube-openapi's parser exactly when it does
// for ours.
func TestKindsFoundAsUpstream(t *testing.T) {
	spec := map[string]string{"S": `{"type":"object","properties":{"a":{"type":"string"}}}`}
	for _, member := range []string{
		`"x-kubernetes-group-version-kind"`,
		`"X-Kubernetes-Group-Version-Kind"`,
		`"\u0078-kubernetes-group-version-kind"`,
		`"x-kubernetes-group-version-\u006bind"`,
		`"x-kubernetes-group-version-kinds"`,
	} {
		t.Run(member, func(t *testing.T) {
			d := docOf(t, "w", member, spec)
			schemas, err := d.Schemas()
			if err != nil {
				t.Fatal(err)
			}
			upstream, err := managedfields.NewTypeConverter(schemas, false)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": "W", "spec": map[string]any{"a": "b"}}}
			_, want := upstream.ObjectToTyped(obj)
			_, got := typeOfDoc(d, xGVK)
			if (want == nil) != (got == nil) {
				t.Fatalf("managedfields' converter: %v; ours: %v", want, got)
			}
		})
	}
}

// TestBrokenSchemaFailsItsKindsAlone: a schema that does not convert (of a
// type structured-merge-diff has no type for) fails the kinds that reach
// it, with schemaconv's message, and not the other kinds of its document
// (managedfields' converter refuses the whole document).
func TestBrokenSchemaFailsItsKindsAlone(t *testing.T) {
	d := docOf(t, "w", `"x-kubernetes-group-version-kind"`, map[string]string{
		"S": `{"type":"object","properties":{"odd":{"type":"tuple"}}}`,
		"v": `{"type":"object","x-kubernetes-group-version-kind":[{"group":"x","version":"v1","kind":"V"}],"properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"}}}`,
	})
	if _, err := typeOfDoc(d, xGVK); err == nil || !strings.Contains(err.Error(), "unrecognized type: 'tuple'") {
		t.Errorf("W, which reaches the broken schema: %v", err)
	}
	if _, err := typeOfDoc(d, xGVK.GroupVersion().WithKind("V")); err != nil {
		t.Errorf("V, which does not: %v", err)
	}
}

// TestPiecesLiveWithTheirDocuments: the pool holds a piece while a
// document's types use it, shares it with another document of the same
// schema, and drops it once no document's types hold it: it keeps no
// memory alive by itself.
func TestPiecesLiveWithTheirDocuments(t *testing.T) {
	name := fmt.Sprintf("w-%d", time.Now().UnixNano()) // a schema no other test has
	held := func() bool {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		for k, w := range pool.m {
			if k.name == name && w.Value() != nil {
				return true
			}
		}
		return false
	}
	spec := map[string]string{"S": `{"type":"object"}`}
	b1, err := typeOfDoc(docOf(t, name, `"x-kubernetes-group-version-kind"`, spec), xGVK)
	if err != nil || !held() {
		t.Fatalf("after typing a document: %v, held %v", err, held())
	}
	c := conversions.load()
	b2, err := typeOfDoc(docOf(t, name, `"x-kubernetes-group-version-kind"`, spec), xGVK)
	if err != nil || conversions.load() != c {
		t.Fatalf("a second document of the same schemas: %v, %d conversions; want none", err, conversions.load()-c)
	}
	if b1.pieces[name] != b2.pieces[name] {
		t.Fatal("two documents of one schema hold two pieces")
	}
	runtime.KeepAlive(b1)
	b1 = nil
	runtime.GC()
	if !held() {
		t.Fatal("dropped while the second document's types hold it")
	}
	runtime.KeepAlive(b2)
	b2 = nil
	for deadline := time.Now().Add(10 * time.Second); held(); {
		if time.Now().After(deadline) {
			t.Fatal("still held 10 s after every document using it is gone")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for k := range pool.m {
		if k.name == name {
			t.Error("its entry is left in the pool")
		}
	}
}

// TestManyKindsReachingMuchCostTheDocument: a document whose every kind
// reaches every one of its schemas (50 kinds, 100 shared schemas) costs
// types of the order of its schemas, not kinds times schemas: once the
// kinds' own types hold twice the document's schemas, the kinds typed
// next share the whole document's. Every kind's type is whole either way,
// and a schema that does not convert fails only the kind that reaches it,
// in both.
func TestManyKindsReachingMuchCostTheDocument(t *testing.T) {
	const kinds, shared = 50, 100
	others := map[string]string{"S": `{"type":"object"}`}
	var props strings.Builder
	for i := range shared {
		others[fmt.Sprintf("s%03d", i)] = `{"type":"object","properties":{"v":{"type":"string"}}}`
		fmt.Fprintf(&props, `,"f%03d":{"$ref":"#/components/schemas/s%03d"}`, i, i)
	}
	kind := func(k string, extra string) string {
		return `{"type":"object","x-kubernetes-group-version-kind":[{"group":"x","version":"v1","kind":"` + k + `"}],` +
			`"properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"}` + props.String() + extra + `}}`
	}
	for i := range kinds {
		others[fmt.Sprintf("k%03d", i)] = kind(fmt.Sprintf("K%03d", i), "")
	}
	others["broken"] = `{"type":"object","properties":{"odd":{"type":"tuple"}}}`
	others["kb"] = kind("KB", `,"b":{"$ref":"#/components/schemas/broken"}`)
	d := docOf(t, "w", `"x-kubernetes-group-version-kind"`, others)
	schemas := len(d.SchemaNames())

	held := map[*smdschema.Schema]bool{}
	typedCount := 0
	check := func(k string) {
		gvk := xGVK.GroupVersion().WithKind(k)
		b, err := typeOfDoc(d, gvk)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		tp := b.kinds[gvk].t
		held[tp.Schema] = true
		obj := map[string]any{"apiVersion": "x/v1", "kind": k, "f000": map[string]any{"v": "a"}, fmt.Sprintf("f%03d", shared-1): map[string]any{"v": "b"}}
		if _, err := tp.FromUnstructured(obj); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if _, err := tp.FromUnstructured(map[string]any{"f050": map[string]any{"w": "undeclared"}}); err == nil {
			t.Fatalf("%s: a field s050 does not declare is accepted", k)
		}
		typedCount++
	}
	for i := range kinds {
		check(fmt.Sprintf("K%03d", i))
		if i == 0 {
			if _, err := typeOfDoc(d, xGVK.GroupVersion().WithKind("KB")); err == nil || !strings.Contains(err.Error(), "unrecognized type: 'tuple'") {
				t.Fatalf("KB, before the budget is spent: %v", err)
			}
		}
	}
	total := 0
	for s := range held {
		total += len(s.Types)
	}
	if total > 3*(schemas+len(commonTypes)) {
		t.Errorf("%d kinds' types hold %d types; want at most 3 times the document's %d schemas", typedCount, total, schemas)
	}
	if len(held) < 2 {
		t.Errorf("every kind shares one type set: the budget is spent at once")
	}
	// KB again, from a new document of the same bytes, after its kinds
	// spent the budget: the whole document's types.
	d = docOf(t, "w", `"x-kubernetes-group-version-kind"`, others)
	for i := range kinds {
		if _, err := typeOfDoc(d, xGVK.GroupVersion().WithKind(fmt.Sprintf("K%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := typeOfDoc(d, xGVK.GroupVersion().WithKind("KB"))
	if err == nil || !strings.Contains(err.Error(), "unrecognized type: 'tuple'") || b.whole == nil {
		t.Fatalf("KB, after the budget is spent: %v (whole types built: %v)", err, b.whole != nil)
	}
}

// TestPanicWhileTypingIsAnError: a panic while typing a kind (here a
// built whose state is broken: typing it writes to a nil map) is the
// kind's error, kept, not a panic in the caller's process; so is one while
// typing the whole document.
func TestPanicWhileTypingIsAnError(t *testing.T) {
	d := docOf(t, "w", `"x-kubernetes-group-version-kind"`, map[string]string{"S": `{"type":"object"}`})
	b := &built{doc: d, budget: 100} // pieces nil
	k := &kindType{root: "w"}
	for range 2 {
		b.typeKind(k)
		if k.t != nil || k.err == nil || !strings.Contains(k.err.Error(), "panic") {
			t.Fatalf("type %v, err %v; want a panic's error", k.t, k.err)
		}
	}
	for range 2 {
		if _, err := b.wholeType("w"); err == nil || !strings.Contains(err.Error(), "panic") {
			t.Fatalf("whole document: %v; want a panic's error", err)
		}
	}
}
