package openapi3_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

var deployment = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// TestKindFindsAFieldAddedSince: with no watch to tell it, Kind with a
// field path the held schema lacks (explain's "deployment.spec.revision1"
// right after the schema gained it) reads the root again, at most once a
// second, and answers with the new document's schema, which has the
// field: the root and that one document. Within a second of the last read
// it answers with the held schema and sends nothing; a field that does not
// exist is no error of Kind's, and costs a root read a second, no
// document.
func TestKindFindsAFieldAddedSince(t *testing.T) {
	srv, c, clk := changedClient(t)
	ctx := context.Background()
	held, err := c.Kind(ctx, deployment)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := held.Field("spec", "revision1"); !errors.Is(err, openapi3.ErrNotFound) {
		t.Fatalf("spec.revision1 before the change: %v; want ErrNotFound", err)
	}
	clk.SetTime(clk.Now().Add(5 * time.Second))
	if err := srv.ChangeSchema(deployment.GroupVersion()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Paths(ctx); err != nil { // no read: the max age is an hour
		t.Fatal(err)
	}
	srv.ResetRequests()

	k, err := c.Kind(ctx, deployment, "spec", "revision1")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.Field("spec", "revision1"); err != nil {
		t.Errorf("spec.revision1 after the change: %v", err)
	}
	if got, want := paths(srv), []string{"/openapi/v3", "/openapi/v3/apis/apps/v1"}; !slices.Equal(got, want) {
		t.Errorf("requests %v; want %v", got, want)
	}
	if k, err := c.Kind(ctx, deployment); err != nil || k.Schema != mustKind(t, c).Schema {
		t.Errorf("Kind without a path after the miss: not the new document's schema (%v)", err)
	}

	// Within a second of that read, a miss sends nothing and answers with
	// the schema held.
	if err := srv.ChangeSchema(deployment.GroupVersion()); err != nil {
		t.Fatal(err)
	}
	k2, err := c.Kind(ctx, deployment, "spec", "revision2")
	if err != nil {
		t.Fatal(err)
	}
	if k2.Schema != k.Schema {
		t.Error("a miss within a second of the last read answered with another schema")
	}
	if got := paths(srv); len(got) != 0 {
		t.Errorf("requests %v within a second of the last read; want none", got)
	}

	// A field that does not exist: a root read a second, no document.
	clk.SetTime(clk.Now().Add(time.Second))
	if _, err := c.Kind(ctx, deployment, "spec", "revision2"); err != nil { // takes revision 2
		t.Fatal(err)
	}
	srv.ResetRequests()
	const seconds = 5
	for range seconds * 100 {
		k, err := c.Kind(ctx, deployment, "spec", "nope")
		if err != nil {
			t.Fatalf("Kind with a field that does not exist: %v; want the schema", err)
		}
		if _, _, err := k.Field("spec", "nope"); !errors.Is(err, openapi3.ErrNotFound) {
			t.Fatalf("Field of a field that does not exist: %v; want ErrNotFound", err)
		}
		clk.SetTime(clk.Now().Add(10 * time.Millisecond))
	}
	got := paths(srv)
	if n := len(got); n > seconds+1 || n < seconds-1 {
		t.Errorf("%d requests for %d misses over %ds; want a root read a second", n, seconds*100, seconds)
	}
	for _, p := range got {
		if p != "/openapi/v3" {
			t.Errorf("request for %s; want the root alone", p)
		}
	}
}

// TestKindFieldMissOfARemovedGroupVersion: a field miss whose root read
// fails is both the field's ErrNotFound and the read's error; one whose
// read finds the group-version gone is an ErrNotFound, as a kind's is.
func TestKindFieldMissOfARemovedGroupVersion(t *testing.T) {
	srv, c, clk := changedClient(t)
	ctx := context.Background()
	widget := schema.GroupVersionKind{Group: "late.example.com", Version: "v1", Kind: "Widget"}
	if err := srv.AddCRD(docserver.CRD{Group: widget.Group, Versions: []string{widget.Version}, Kind: widget.Kind}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if _, err := c.Kind(ctx, widget); err != nil {
		t.Fatal(err)
	}

	srv.InjectFault("/openapi/v3", docserver.Fault{Status: 500, Times: 1})
	clk.SetTime(clk.Now().Add(time.Second))
	_, err := c.Kind(ctx, widget, "spec", "nope")
	if !errors.Is(err, openapi3.ErrNotFound) || !strings.Contains(err.Error(), `"spec.nope"`) || !strings.Contains(err.Error(), "injected fault") {
		t.Errorf("a field miss whose root read fails: %v; want the field's ErrNotFound and the read's error", err)
	}

	if err := srv.RemoveCRD(widget.Group, "widgets"); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	srv.ResetRequests()
	if _, err := c.Kind(ctx, widget, "spec", "nope"); !errors.Is(err, openapi3.ErrNotFound) || !strings.Contains(err.Error(), "lists no OpenAPI document") {
		t.Errorf("a field miss of a removed group-version: %v; want ErrNotFound", err)
	}
	if got := paths(srv); !slices.Equal(got, []string{"/openapi/v3"}) {
		t.Errorf("requests %v; want the root alone", got)
	}
}

// mustKind is Deployment's schema, as Kind gives it now.
func mustKind(t *testing.T, c *openapi3.Client) *openapi3.Schema {
	t.Helper()
	k, err := c.Kind(context.Background(), deployment)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestMissesReadTheRootOnceASecond: callers that miss at once, however
// many, on the real clock for a second and a half (a path the root does
// not list, a kind the document lacks, a field the kind lacks, through
// Document, DocumentOf, Kind and their callers' contexts, ended ones
// among them), read the root at most once a second between them, and
// each call returns (none loops, an ended context's at once).
func TestMissesReadTheRootOnceASecond(t *testing.T) {
	srv, base := docserver.Start(t)
	c := newClient(t, base, openapi3.WithMaxAge(time.Hour))
	ctx := context.Background()
	if _, err := c.Kind(ctx, deployment); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	misses := []func(context.Context) error{
		func(ctx context.Context) error { _, err := c.Document(ctx, "apis/none.example.com/v1"); return err },
		func(ctx context.Context) error {
			_, err := c.DocumentOf(ctx, deployment.GroupVersion().WithKind("None"))
			return err
		},
		func(ctx context.Context) error { _, err := c.Kind(ctx, deployment, "spec", "none"); return err },
	}
	srv.ResetRequests()
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
				if err := miss(ctx); err == nil && i%len(misses) != 2 {
					t.Error("a miss answered")
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := rootReads(srv)
	if most := int(elapsed/time.Second) + 1; n > most || n == 0 {
		t.Errorf("%d root reads in %v of misses from 24 callers; want 1 to %d (one a second)", n, elapsed, most)
	}
	for _, r := range srv.Requests() {
		if r.Path != "/openapi/v3" {
			t.Errorf("request for %s; want the root alone", r.Path)
		}
	}
}
