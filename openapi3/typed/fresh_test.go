package typed_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// widgetWithExtra is a Widget that sets spec.extra, which the CRD's
// schema declares only from its "extra" revision, applied by manager
// "tool" (its managedFields entry owns spec.extra).
func widgetWithExtra(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	w.SetName("w")
	if err := unstructured.SetNestedField(w.Object, "x", "spec", "extra"); err != nil {
		t.Fatal(err)
	}
	w.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: "tool", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "stable.example.com/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:extra":{}}}`),
	}})
	return w
}

// TestFieldAddedFoundWithoutWatch: with no watch to tell it, a converter
// whose held schema lacks a field an object sets (a CRD upgraded since)
// reads the root again, at most once a second, and converts the object
// (ObjectToTyped) and extracts from it (Extract) with the new document's
// types: the root and that one document, built once, instead of refusing
// the object for a max age. Within a second of the last read it refuses
// it, sending nothing.
func TestFieldAddedFoundWithoutWatch(t *testing.T) {
	srv := newServer(t)
	clock := clocktesting.NewFakePassiveClock(time.Now())
	conv := newConverter(t, srv.client(t, openapi3.WithClock(clock), openapi3.WithMaxAge(time.Hour)))
	if _, err := conv.Type(context.Background(), widgetGVK); err != nil {
		t.Fatal(err)
	}
	docs, _ := fixtures()
	srv.set(t, crdPath, crdDocument(t, docs["apis/apps/v1"], "extra"))
	srv.requests()
	w := widgetWithExtra(t)
	if _, err := conv.ObjectToTyped(w); err == nil {
		t.Fatal("spec.extra accepted within a second of the root read, before the converter could look")
	}
	if got := srv.requests(); len(got) != 0 {
		t.Errorf("requests %v within a second of the root read; want none", got)
	}
	clock.SetTime(clock.Now().Add(time.Second))
	b0 := typed.Builds()
	if _, err := conv.ObjectToTyped(w); err != nil {
		t.Fatalf("spec.extra a second later: %v", err)
	}
	if got := srv.requests(); !slices.Equal(got, []string{"/openapi/v3", "/openapi/v3/" + crdPath}) {
		t.Errorf("requests %v; want the root and %s", got, crdPath)
	}
	if n := typed.Builds() - b0; n != 1 {
		t.Errorf("%d documents built; want 1", n)
	}

	// Extract, on a converter of its own that holds the old schema.
	srv.set(t, crdPath, crdDocument(t, docs["apis/apps/v1"], ""))
	clock.SetTime(clock.Now().Add(time.Second))
	other := newConverter(t, srv.client(t, openapi3.WithClock(clock), openapi3.WithMaxAge(time.Hour)))
	if _, err := other.Type(context.Background(), widgetGVK); err != nil {
		t.Fatal(err)
	}
	srv.set(t, crdPath, crdDocument(t, docs["apis/apps/v1"], "extra"))
	clock.SetTime(clock.Now().Add(time.Second))
	got, err := other.Extractor().Extract(w, "tool")
	if err != nil {
		t.Fatalf("Extract of spec.extra a second after the change: %v", err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "spec", "extra"); v != "x" {
		t.Errorf("extracted %v; want spec.extra", got.Object)
	}
}

// TestChangedReachesTheConverter: after openapi3.Client.Changed (as a
// watch calls it), an existing converter types an object with a field the
// CRD gained, and a kind of a group-version the server no longer serves
// is no type at all (ObjectToTyped's "no corresponding type"), each at its
// next call, without a miss of its own.
func TestChangedReachesTheConverter(t *testing.T) {
	srv := newServer(t)
	clock := clocktesting.NewFakePassiveClock(time.Now())
	client := srv.client(t, openapi3.WithClock(clock), openapi3.WithMaxAge(time.Hour))
	conv := newConverter(t, client)
	old, err := conv.Type(context.Background(), widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := fixtures()
	srv.set(t, crdPath, crdDocument(t, docs["apis/apps/v1"], "extra"))
	clock.SetTime(clock.Now().Add(time.Second))
	client.Changed()
	if t2, err := conv.Type(context.Background(), widgetGVK); err != nil || t2 == old {
		t.Errorf("Type after Changed: the old type (%v)", err)
	}

	srv.svc.DeleteGroupVersion(crdPath)
	clock.SetTime(clock.Now().Add(time.Second))
	client.Changed()
	if _, err := conv.Type(context.Background(), widgetGVK); !errors.Is(err, openapi3.ErrNotFound) {
		t.Errorf("Type of a kind of a removed group-version after Changed: %v; want ErrNotFound", err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	if _, err := conv.ObjectToTyped(u); err == nil || err.Error() != "no corresponding type for "+widgetGVK.String() {
		t.Errorf("ObjectToTyped of a kind of a removed group-version: %v", err)
	}
}

// withSidecars is apps/v1's document with a list Deployment's spec gained
// since (as a server upgrade adds one): spec.sidecars, containers merged
// by name, as PodSpec's containers are.
func withSidecars(t *testing.T, apps map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(apps)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	spec := doc["components"].(map[string]any)["schemas"].(map[string]any)["io.k8s.api.apps.v1.DeploymentSpec"].(map[string]any)
	spec["properties"].(map[string]any)["sidecars"] = map[string]any{
		"type":                   "array",
		"items":                  map[string]any{"allOf": []any{map[string]any{"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}}},
		"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"name"},
		"x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge",
	}
	return doc
}

// sidecarsPatch is the three-way strategic merge patch kubectl's apply
// computes with meta for a Deployment whose last applied configuration
// lists sidecar a, whose new one lists a and b, and whose live object
// holds a and one another manager injected, and the live object patched.
func sidecarsPatch(meta strategicpatch.LookupPatchMeta) (patch, patched []byte, err error) {
	object := func(sidecars ...string) []byte {
		var list []any
		for _, s := range sidecars {
			list = append(list, map[string]any{"name": s, "image": s})
		}
		b, _ := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d"}, "spec": map[string]any{"sidecars": list}})
		return b
	}
	current := object("a", "injected")
	if patch, err = strategicpatch.CreateThreeWayMergePatch(object("a"), object("a", "b"), current, meta, true); err != nil {
		return nil, nil, err
	}
	patched, err = strategicpatch.StrategicMergePatchUsingLookupPatchMeta(current, patch, meta)
	return patch, patched, err
}

// TestPatchMetaFindsAFieldAddedSince: with no watch to tell it, a
// strategic merge patch of a list the held schema lacks (a field the
// server gained since, with a merge key), computed with PatchMeta's
// answer, reads the root again (at most once a second) and merges the
// list by its key in the new document, where strategicpatch failed with
// "unable to find api field": the root and that one document. Within a
// second of the last read it fails, sending nothing; a list no schema
// has costs a root read a second, and no document.
func TestPatchMetaFindsAFieldAddedSince(t *testing.T) {
	srv := newServer(t)
	clock := clocktesting.NewFakePassiveClock(time.Now())
	conv := newConverter(t, srv.client(t, openapi3.WithClock(clock), openapi3.WithMaxAge(time.Hour)))
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	held, err := conv.PatchMeta(ctx, gvk)
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := fixtures()
	srv.set(t, "apis/apps/v1", withSidecars(t, docs["apis/apps/v1"]))
	srv.requests()
	if _, _, err := sidecarsPatch(held); err == nil || !strings.Contains(err.Error(), `unable to find api field "sidecars"`) {
		t.Fatalf("a patch of spec.sidecars within a second of the root read: %v; want strategicpatch's unknown field", err)
	}
	if got := srv.requests(); len(got) != 0 {
		t.Errorf("requests %v within a second of the root read; want none", got)
	}

	clock.SetTime(clock.Now().Add(time.Second))
	patch, patched, err := sidecarsPatch(held)
	if err != nil {
		t.Fatalf("a patch of spec.sidecars a second after the change: %v", err)
	}
	if want := `{"spec":{"$setElementOrder/sidecars":[{"name":"a"},{"name":"b"}],"sidecars":[{"image":"b","name":"b"}]}}`; string(patch) != want {
		t.Errorf("patch %s; want %s (sidecars merged by name)", patch, want)
	}
	var live struct {
		Spec struct{ Sidecars []struct{ Name string } }
	}
	if err := json.Unmarshal(patched, &live); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range live.Spec.Sidecars {
		names = append(names, s.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"a", "b", "injected"}) {
		t.Errorf("sidecars after the patch %v; want a, b and the injected one", names)
	}
	if got := srv.requests(); !slices.Equal(got, []string{"/openapi/v3", "/openapi/v3/apis/apps/v1"}) {
		t.Errorf("requests %v; want the root and apps/v1", got)
	}

	// A list no schema has, patched 300 times over 3 s.
	meta, err := conv.PatchMeta(ctx, gvk)
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		_, err := strategicpatch.CreateThreeWayMergePatch(
			[]byte(`{"spec":{"nope":[{"name":"a"}]}}`), []byte(`{"spec":{"nope":[{"name":"b"}]}}`), []byte(`{"spec":{"nope":[{"name":"a"}]}}`), meta, true)
		if err == nil || !strings.Contains(err.Error(), `unable to find api field "nope"`) {
			t.Fatalf("a patch of a list no schema has: %v", err)
		}
		clock.SetTime(clock.Now().Add(10 * time.Millisecond))
	}
	got := srv.requests()
	if len(got) > 4 || len(documentRequests(got)) != 0 {
		t.Errorf("requests %v for 300 patches of an unknown list over 3s; want at most a root read a second", got)
	}
}

// TestMissesReadTheRootOnceASecond: callers of a converter that miss at
// once, however many, on the real clock for a second and a half (an object
// setting a field no schema has, through ObjectToTyped and Extract, and a
// strategic merge patch of one, through PatchMeta, some with a context
// that has ended), read the root at most once a second between them, and
// no document, and each call returns.
func TestMissesReadTheRootOnceASecond(t *testing.T) {
	srv := newServer(t)
	conv := newConverter(t, srv.client(t, openapi3.WithMaxAge(time.Hour)))
	ctx := context.Background()
	if _, err := conv.Type(ctx, widgetGVK); err != nil {
		t.Fatal(err)
	}
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	if _, err := conv.PatchMeta(ctx, deployment); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	w := widgetWithExtra(t) // spec.extra, which the served schema lacks
	misses := []func(context.Context) error{
		func(context.Context) error { _, err := conv.ObjectToTyped(w); return err },
		func(context.Context) error { _, err := conv.Extractor().Extract(w, "tool"); return err },
		func(ctx context.Context) error {
			meta, err := conv.PatchMeta(ctx, deployment)
			if err != nil {
				return nil // an ended context's: not the miss
			}
			_, err = strategicpatch.CreateThreeWayMergePatch(
				[]byte(`{"spec":{"nope":[{"name":"a"}]}}`), []byte(`{"spec":{"nope":[{"name":"b"}]}}`), []byte(`{"spec":{"nope":[{"name":"a"}]}}`), meta, true)
			return err
		},
	}
	srv.requests()
	start := time.Now()
	stop := start.Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			miss, ctx := misses[i%len(misses)], ctx
			if i%2 == 1 {
				ctx = ended
			}
			for time.Now().Before(stop) {
				if err := miss(ctx); err == nil && (i%len(misses) != 2 || i%2 == 0) {
					t.Errorf("miss %d answered", i%len(misses))
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	got := srv.requests()
	if most := int(elapsed/time.Second) + 1; len(got) > most || len(got) == 0 || len(documentRequests(got)) != 0 {
		t.Errorf("requests %v in %v of misses from 24 callers; want 1 to %d root reads (one a second) and no document", got, elapsed, most)
	}
}
