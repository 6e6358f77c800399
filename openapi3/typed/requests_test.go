package typed_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	smdtyped "sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

var deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

func newConverter(t testing.TB, c *openapi3.Client, opts ...typed.Option) *typed.Converter {
	t.Helper()
	conv, err := typed.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return conv
}

func deployment() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(deploymentGVK)
	u.SetName("d")
	_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas")
	return u
}

// TestFirstTypedValueReadsOneDocument: the first typed value of a kind
// reads the root and its group-version's document, nothing else, and
// builds that one document; the next kinds of that group-version read and
// build nothing; a core kind reads api/v1.
func TestFirstTypedValueReadsOneDocument(t *testing.T) {
	srv := newServer(t)
	conv := newConverter(t, srv.client(t))
	b0 := typed.Builds()
	if _, err := conv.ObjectToTyped(deployment()); err != nil {
		t.Fatal(err)
	}
	if got := srv.requests(); !slices.Equal(got, []string{"/openapi/v3", "/openapi/v3/apis/apps/v1"}) {
		t.Errorf("requests %v; want the root and apps/v1's document", got)
	}
	if n := typed.Builds() - b0; n != 1 {
		t.Errorf("%d documents built; want 1", n)
	}
	for _, k := range []string{"StatefulSet", "DaemonSet", "ReplicaSet"} {
		if _, err := conv.Type(context.Background(), deploymentGVK.GroupVersion().WithKind(k)); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.requests(); len(got) != 0 {
		t.Errorf("requests %v for more apps/v1 kinds; want none", got)
	}
	if _, err := conv.Type(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "Pod"}); err != nil {
		t.Fatal(err)
	}
	if got := documentRequests(srv.requests()); !slices.Equal(got, []string{"api/v1"}) {
		t.Errorf("document requests %v for a Pod; want api/v1", got)
	}
	if n := typed.Builds() - b0; n != 2 {
		t.Errorf("%d documents built; want 2", n)
	}
}

// TestSharedDocumentsBuildOnce: a second cluster's converter, on a client
// that shares the first's Documents table (as a fleet's clusters do),
// reads the root, no document, and builds nothing: it gets the same types.
// Concurrent first callers build once.
func TestSharedDocumentsBuildOnce(t *testing.T) {
	srv := newServer(t)
	other := newServer(t) // another cluster serving the same documents
	table := openapi3.NewDocuments()
	conv := newConverter(t, srv.client(t, openapi3.WithDocuments(table)))
	b0 := typed.Builds()
	var wg sync.WaitGroup
	types := make([]any, 8)
	for i := range types {
		wg.Go(func() {
			tp, err := conv.Type(context.Background(), deploymentGVK)
			if err != nil {
				t.Error(err)
			}
			types[i] = tp
		})
	}
	wg.Wait()
	if n := typed.Builds() - b0; n != 1 {
		t.Errorf("8 concurrent first callers built %d times; want 1", n)
	}
	conv2 := newConverter(t, other.client(t, openapi3.WithDocuments(table)))
	tp, err := conv2.Type(context.Background(), deploymentGVK)
	if err != nil {
		t.Fatal(err)
	}
	if n := typed.Builds() - b0; n != 1 {
		t.Errorf("the second cluster built %d more", n-1)
	}
	if got := other.requests(); !slices.Equal(got, []string{"/openapi/v3"}) {
		t.Errorf("second cluster's requests %v; want the root alone", got)
	}
	first := types[0].(*smdtyped.ParseableType)
	for _, other := range types {
		if other.(*smdtyped.ParseableType).Schema != first.Schema {
			t.Error("concurrent first callers got different types")
		}
	}
	if tp.Schema != first.Schema {
		t.Error("the second cluster's types are not the first's")
	}
	// Another preserve-unknown-fields flag is other types, built once.
	conv3 := newConverter(t, other.client(t, openapi3.WithDocuments(table)), typed.WithPreserveUnknownFields(true))
	p, err := conv3.Type(context.Background(), deploymentGVK)
	if err != nil {
		t.Fatal(err)
	}
	if p.Schema == first.Schema || typed.Builds()-b0 != 2 {
		t.Errorf("preserve-unknown-fields types: shared %v, %d builds; want their own, 2", p.Schema == first.Schema, typed.Builds()-b0)
	}
	// The table shares what some client holds: a document no client holds
	// is forgotten (openapi3.Documents), and with it its types.
	runtime.KeepAlive(conv)
	runtime.KeepAlive(conv2)
}

// TestChangedHashRebuildsOneGroupVersion: after the CRD's schema changes
// (a new field, a new hash), reading the root again reads and rebuilds
// that group-version's document alone; apps/v1's types stay.
func TestChangedHashRebuildsOneGroupVersion(t *testing.T) {
	srv := newServer(t)
	client := srv.client(t)
	conv := newConverter(t, client)
	ctx := context.Background()
	apps, err := conv.Type(ctx, deploymentGVK)
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	w.SetName("w")
	if err := unstructured.SetNestedField(w.Object, "x", "spec", "extra"); err != nil {
		t.Fatal(err)
	}
	if _, err := conv.ObjectToTyped(w); err == nil {
		t.Fatal("spec.extra accepted before the schema has it")
	}
	srv.requests()
	docs, _ := fixtures()
	srv.set(t, crdPath, crdDocument(t, docs["apis/apps/v1"], "extra"))
	if _, err := client.RefreshRoot(ctx); err != nil {
		t.Fatal(err)
	}
	b0 := typed.Builds()
	if _, err := conv.ObjectToTyped(w); err != nil {
		t.Fatalf("spec.extra after the schema change: %v", err)
	}
	again, err := conv.Type(ctx, deploymentGVK)
	if err != nil {
		t.Fatal(err)
	}
	if got := documentRequests(srv.requests()); !slices.Equal(got, []string{crdPath}) {
		t.Errorf("document requests %v; want %s alone", got, crdPath)
	}
	if n := typed.Builds() - b0; n != 1 {
		t.Errorf("%d documents built; want 1", n)
	}
	if again.Schema != apps.Schema {
		t.Error("apps/v1 was rebuilt")
	}
}

// TestWarmStartReadsNoDocument: a process starting on a disk cache that
// holds the documents reads the root (which carries the hashes, and which
// the server sends uncacheable) and no document.
func TestWarmStartReadsNoDocument(t *testing.T) {
	srv := newServer(t)
	dir := t.TempDir()
	process := func() *typed.Converter {
		dc, err := diskcache.Open(dir, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		return newConverter(t, srv.client(t, openapi3.WithDiskCache(dc)))
	}
	if _, err := process().ObjectToTyped(deployment()); err != nil {
		t.Fatal(err)
	}
	if got := documentRequests(srv.requests()); !slices.Equal(got, []string{"apis/apps/v1"}) {
		t.Fatalf("cold: document requests %v", got)
	}
	tv, err := process().ObjectToTyped(deployment())
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.requests(); !slices.Equal(got, []string{"/openapi/v3"}) {
		t.Errorf("warm: requests %v; want the root alone", got)
	}
	if r, _, _ := unstructured.NestedInt64(tv.AsValue().Unstructured().(map[string]any), "spec", "replicas"); r != 2 {
		t.Errorf("warm typed value: %v", tv.AsValue())
	}
}

// TestNoType: a kind its document does not list, and a group-version the
// server does not serve, are ErrNotFound from Type, managedfields' "no
// corresponding type" from ObjectToTyped, and an error (not a panic, as
// client-go's) from Extract.
func TestNoType(t *testing.T) {
	srv := newServer(t)
	conv := newConverter(t, srv.client(t))
	for _, gvk := range []schema.GroupVersionKind{
		deploymentGVK.GroupVersion().WithKind("Nope"),
		{Group: "nope.example.com", Version: "v1", Kind: "Nope"},
	} {
		if _, err := conv.Type(context.Background(), gvk); !errors.Is(err, openapi3.ErrNotFound) {
			t.Errorf("Type(%s): %v; want ErrNotFound", gvk, err)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if _, err := conv.ObjectToTyped(u); err == nil || err.Error() != "no corresponding type for "+gvk.String() {
			t.Errorf("ObjectToTyped(%s): %v", gvk, err)
		}
		if _, err := conv.Extractor().Extract(u, "m"); err == nil {
			t.Errorf("Extract(%s): no error", gvk)
		}
	}
}

// TestOptions: documented defaults and errors.
func TestOptions(t *testing.T) {
	srv := newServer(t)
	c := srv.client(t)
	if _, err := typed.New(c, typed.WithTimeout(0)); err == nil {
		t.Error("WithTimeout(0) accepted")
	}
	if _, err := typed.New(c, typed.WithTimeout(1), typed.WithTimeout(2)); err == nil || err.Error() != "typed: WithTimeout given twice" {
		t.Errorf("WithTimeout twice: %v", err)
	}
	if _, err := typed.New(c, typed.WithPreserveUnknownFields(true), typed.WithPreserveUnknownFields(false)); err == nil {
		t.Error("WithPreserveUnknownFields twice accepted")
	}
	if _, err := typed.New(nil); err == nil {
		t.Error("New(nil) accepted")
	}
}

// TestTimeoutBoundsFetch: ObjectToTyped and Extract, which take no
// context, give up on a document the server does not send within
// WithTimeout, with a deadline error, and the next call tries again.
func TestTimeoutBoundsFetch(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi/v3" {
			_, _ = w.Write([]byte(`{"paths":{"apis/apps/v1":{"serverRelativeURL":"/openapi/v3/apis/apps/v1?hash=AB"}}}`))
			return
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
		http.Error(w, "gone", http.StatusNotFound)
	}))
	defer srv.Close()
	defer close(release)
	c, err := openapi3.NewForHTTPClient(nil, srv.URL, openapi3.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	conv := newConverter(t, c, typed.WithTimeout(100*time.Millisecond))
	for range 2 {
		if _, err := conv.ObjectToTyped(deployment()); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ObjectToTyped: %v; want a deadline error", err)
		}
		if _, err := conv.Extractor().Extract(deployment(), "m"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Extract: %v; want a deadline error", err)
		}
	}
}
