package shared_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
	"github.com/kubeatlas/kubeatlas/shared"
)

// waitUntil polls cond until it holds, failing the test after 10s (the
// OpenAPI root's max age is an hour here: only the watch can make it).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// openAPIRequests counts srv's requests for the OpenAPI root and for
// group-version documents since the last ResetRequests.
func openAPIRequests(srv *discoverytest.Server) (root, docs int) {
	for _, r := range srv.Requests() {
		switch {
		case r.Path == "/openapi/v3":
			root++
		case strings.HasPrefix(r.Path, "/openapi/v3/"):
			docs++
		}
	}
	return root, docs
}

// TestWatchKeepsOpenAPIFresh: the watch a handle runs tells its OpenAPI
// client of the changes it sees (watch.WithOnChange, openapi3.Client.
// Changed), so that a CRD's new schema (which discovery does not show)
// reaches an existing typed.Converter, and a removed group-version is
// forgotten, long before the root's max age (an hour here): a schema
// change costs the root and that one document, once, however often the
// converter is asked meanwhile.
func TestWatchKeepsOpenAPIFresh(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	r, err := shared.New(shared.WithLinger(0),
		shared.WithWatchOptions(watch.WithUpgradePoll(time.Hour)),
		shared.WithOpenAPIOptions(openapi3.WithMaxAge(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.Acquire(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	ctx := context.Background()
	conv, err := typed.New(h.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	late := schema.GroupVersionKind{Group: "late.example.com", Version: "v1", Kind: "Late"}
	if err := srv.AddCRD(discoverytest.CRD{Group: late.Group, Versions: []string{late.Version}, Kind: late.Kind}); err != nil {
		t.Fatal(err)
	}
	widget := schema.GroupVersionKind{Group: "g000.stress.example.com", Version: "v1", Kind: "Widget0000"}
	if _, err := h.Mapper().RESTMapping(widget.GroupKind(), widget.Version); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "watching", func() bool { return h.Watcher().Stats().Watching })
	old, err := conv.Type(ctx, widget)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conv.Type(ctx, late); err != nil {
		t.Fatal(err)
	}

	srv.ResetRequests()
	if err := srv.ChangeSchema(widget.GroupVersion()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the converter's new type", func() bool {
		t2, err := conv.Type(ctx, widget)
		return err == nil && t2 != old
	})
	// The rounds the watch runs while the change settles (about 2.5s)
	// tell the client nothing more.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := conv.Type(ctx, widget); err != nil {
			t.Fatal(err)
		}
	}
	if root, docs := openAPIRequests(srv); root != 1 || docs != 1 {
		t.Errorf("one schema change: %d root reads and %d documents; want 1 and 1", root, docs)
	}

	if err := srv.RemoveCRD(late.Group, "lates"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the removed group-version forgotten", func() bool {
		_, err := conv.Type(ctx, late)
		return errors.Is(err, openapi3.ErrNotFound)
	})
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(late)
	if _, err := conv.ObjectToTyped(u); err == nil || err.Error() != "no corresponding type for "+late.String() {
		t.Errorf("ObjectToTyped of a kind of a removed group-version: %v", err)
	}
}
