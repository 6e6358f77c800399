package typed_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// TestSharedDefinitionsConvertedOnce (issue 44): the io.k8s.apimachinery
// schemas every group-version document repeats (ObjectMeta and the rest)
// are parsed and converted once, however many documents are typed: after
// the first CRD group-version, typing a Widget of each of 20 more (at
// once) converts that document's own schema alone (Widget's: a kind's
// type is built of the schemas it reaches), and each converts an object.
func TestSharedDefinitionsConvertedOnce(t *testing.T) {
	srv := newServer(t)
	gvks := serveCRDGroups(t, srv, 21)
	conv := newConverter(t, srv.client(t))
	ctx := context.Background()
	c0 := typed.Conversions()
	first, err := conv.Type(ctx, gvks[0])
	if err != nil {
		t.Fatal(err)
	}
	c1 := typed.Conversions()
	t.Logf("the first group-version converted %d schemas", c1-c0) // fewer if another test's documents hold some
	var wg sync.WaitGroup
	for _, gvk := range gvks[1:] { // at once, under -race
		wg.Go(func() {
			tp, err := conv.Type(ctx, gvk)
			if err != nil {
				t.Error(err)
				return
			}
			if tp.Schema == first.Schema {
				t.Errorf("%s has the first group-version's types", gvk)
			}
			if _, err := conv.ObjectToTyped(widgetOf(gvk, map[string]any{"name": "w", "labels": map[string]any{"a": "b"}})); err != nil {
				t.Errorf("%s: %v", gvk, err)
			}
		})
	}
	wg.Wait()
	if n := typed.Conversions() - c1; n != int64(len(gvks)-1) {
		t.Errorf("%d more group-versions converted %d schemas; want %d (each its Widget)", len(gvks)-1, n, len(gvks)-1)
	}
}

// widgetOf is a Widget of gvk's group-version with the given metadata.
func widgetOf(gvk schema.GroupVersionKind, meta map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "metadata": meta,
		"spec": map[string]any{"replicas": int64(1)},
	}}
}

// TestSameNameOtherContentStaysApart (issue 44): two documents whose
// ObjectMeta differs (one declares a field the other does not) each type
// their kinds with their own ObjectMeta, whichever is typed first: the
// schemas shared across documents are shared by content, not by name.
func TestSameNameOtherContentStaysApart(t *testing.T) {
	for _, order := range []string{"plain first", "changed first"} {
		t.Run(order, func(t *testing.T) {
			srv := newServer(t)
			gvks := serveCRDGroups(t, srv, 2)
			plain, changed := gvks[0], gvks[1]
			path := "apis/" + changed.Group + "/v1"
			var doc map[string]any
			b, _ := json.Marshal(srv.docs[path])
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			meta := doc["components"].(map[string]any)["schemas"].(map[string]any)["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].(map[string]any)
			meta["properties"].(map[string]any)["owner"] = map[string]any{"type": "string"}
			srv.set(t, path, doc)

			conv := newConverter(t, srv.client(t))
			withOwner := func(gvk schema.GroupVersionKind) error {
				_, err := conv.ObjectToTyped(widgetOf(gvk, map[string]any{"name": "w", "owner": "me"}))
				return err
			}
			first, second := plain, changed
			if order == "changed first" {
				first, second = changed, plain
			}
			for _, gvk := range []schema.GroupVersionKind{first, second} {
				err := withOwner(gvk)
				if gvk == changed && err != nil {
					t.Errorf("%s, whose ObjectMeta declares owner: %v", gvk, err)
				}
				if gvk == plain && (err == nil || !strings.Contains(err.Error(), "owner")) {
					t.Errorf("%s, whose ObjectMeta does not declare owner: %v; want it refused", gvk, err)
				}
			}
		})
	}
}
