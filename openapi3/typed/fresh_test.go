package typed_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
