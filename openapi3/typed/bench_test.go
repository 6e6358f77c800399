package typed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields/managedfieldstest"
	"k8s.io/client-go/openapi"

	"github.com/kubeatlas/kubeatlas/internal/mediatype"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// BenchmarkFirstTypedValue: a new process's first typed value of a
// Deployment on the recorded v1.36.3 documents (served by kube-openapi's
// handler on loopback, no disk cache), side by side: client-go's
// openapi.NewTypeConverter (every document read and parsed first) and a
// Converter (the root and apps/v1's document).
func BenchmarkFirstTypedValue(b *testing.B) {
	srv := newServer(b)
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tc, err := openapi.NewTypeConverter(srv.clientGo(b), false)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tc.ObjectToTyped(deployment()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kubeatlas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cold(b)
			conv, err := typed.New(srv.client(b))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := conv.ObjectToTyped(deployment()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTypedValue: one more typed value of a Deployment once the
// types are built (the per-object cost of an extract loop).
func BenchmarkTypedValue(b *testing.B) {
	srv := newServer(b)
	tc, err := openapi.NewTypeConverter(srv.clientGo(b), false)
	if err != nil {
		b.Fatal(err)
	}
	conv, err := typed.New(srv.client(b))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conv.Type(context.Background(), deploymentGVK); err != nil {
		b.Fatal(err)
	}
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tc.ObjectToTyped(deployment()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kubeatlas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := conv.ObjectToTyped(deployment()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// crdGroups is how many CRD group-versions BenchmarkExtractAll adds to the
// recorded documents: 40, as the tier's BenchmarkTypedRealServer types 40
// CRD kinds.
const crdGroups = 40

// serveCRDGroups adds n group-versions to srv, each a copy of the CRD's
// document (crdDocument) in a group of its own (g00.example.com/v1 ...),
// with the io.k8s.apimachinery schemas every CRD document repeats, and
// returns a Widget kind of each.
func serveCRDGroups(b testing.TB, srv *server, n int) []schema.GroupVersionKind {
	b.Helper()
	docs, err := fixtures()
	if err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(crdDocument(b, docs["apis/apps/v1"], ""))
	if err != nil {
		b.Fatal(err)
	}
	var out []schema.GroupVersionKind
	for i := range n {
		group := fmt.Sprintf("g%02d.example.com", i)
		s := strings.ReplaceAll(string(raw), "stable.example.com", group)
		s = strings.ReplaceAll(s, "com.example.stable.", fmt.Sprintf("com.example.g%02d.", i))
		var doc map[string]any
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			b.Fatal(err)
		}
		srv.set(b, "apis/"+group+"/v1", doc)
		out = append(out, schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"})
	}
	return out
}

// extractAllObjects are objects of every kind the recorded documents list
// for their own group-version (the CRD's among them) and of the n CRD
// groups' Widgets, perKind of each, each with managed fields of the
// manager "bench" (applied through a field manager on conv): what
// BenchmarkExtractAll extracts.
func extractAllObjects(b *testing.B, srv *server, crds []schema.GroupVersionKind, perKind int) []*unstructured.Unstructured {
	b.Helper()
	conv, err := typed.New(srv.client(b))
	if err != nil {
		b.Fatal(err)
	}
	var kinds []schema.GroupVersionKind
	docs, err := fixtures()
	if err != nil {
		b.Fatal(err)
	}
	for path, doc := range docs {
		comps, _ := doc["components"].(map[string]any)
		schemas, _ := comps["schemas"].(map[string]any)
		for _, s := range schemas {
			list, _ := s.(map[string]any)["x-kubernetes-group-version-kind"].([]any)
			for _, e := range list {
				m := e.(map[string]any)
				gvk := schema.GroupVersionKind{Group: m["group"].(string), Version: m["version"].(string), Kind: m["kind"].(string)}
				if mediatype.OpenAPIPath(gvk.Group, gvk.Version) == path && !strings.HasSuffix(gvk.Kind, "List") && !slices.Contains(kinds, gvk) {
					kinds = append(kinds, gvk)
				}
			}
		}
	}
	kinds = append(kinds, crds...)
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	var out []*unstructured.Unstructured
	for _, gvk := range kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetName("o")
		u.SetNamespace("ns")
		u.SetLabels(map[string]string{"app": "bench"})
		u.SetAnnotations(map[string]string{"note": "extract-all"})
		if gvk.Kind == "Widget" {
			_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas")
			_ = unstructured.SetNestedStringSlice(u.Object, []string{"a", "b"}, "spec", "tags")
		}
		fm := managedfieldstest.NewTestFieldManager(conv, gvk)
		if err := fm.Apply(u, "bench", false); err != nil {
			continue // a kind whose schema declares no metadata (WatchEvent, ...)
		}
		live := fm.Live().(*unstructured.Unstructured)
		for i := range perKind {
			o := live.DeepCopy()
			o.SetName(fmt.Sprintf("o%03d", i))
			out = append(out, o)
		}
	}
	return out
}

// BenchmarkExtractAll: a new process's Extract of every object of every
// kind the recorded v1.36.3 documents list, and of 40 CRD group-versions'
// (served by kube-openapi's handler on loopback): a new client and
// Converter each iteration, every group-version's document read and built
// once. The tier's BenchmarkTypedRealServer/extract-all is the same on a
// real server, beside client-go's extractor.
func BenchmarkExtractAll(b *testing.B) {
	srv := newServer(b)
	crds := serveCRDGroups(b, srv, crdGroups)
	objects := extractAllObjects(b, srv, crds, 25)
	b.Logf("%d objects", len(objects))
	b.ReportAllocs()
	for b.Loop() {
		cold(b)
		conv, err := typed.New(srv.client(b))
		if err != nil {
			b.Fatal(err)
		}
		ex := conv.Extractor()
		for _, o := range objects {
			u, err := ex.Extract(o, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := u.Object["metadata"]; !ok {
				b.Fatalf("%s: nothing extracted", o.GroupVersionKind())
			}
		}
	}
}

// cold collects the last iteration's garbage, timer stopped, so that no
// schema it converted is still held for this one (the conversions a
// process shares are held weakly, by live documents' types): each
// iteration converts what a new process would.
func cold(b *testing.B) {
	b.StopTimer()
	runtime.GC()
	b.StartTimer()
}
