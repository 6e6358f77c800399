package openapi3_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// documentFetches counts the requests a server answered for one
// group-version's document.
func documentFetches(srv *discoverytest.Server, path string) int {
	n := 0
	for _, r := range srv.Requests() {
		if strings.HasSuffix(r.Path, "/openapi/v3/"+path) {
			n++
		}
	}
	return n
}

// TestDocumentsShared: clients given one Documents read a document that
// another client read, of the same content (the same ?hash=), without
// asking their server for it, and share its bytes and what was parsed of
// it; a cluster whose schema differs gets its own.
func TestDocumentsShared(t *testing.T) {
	docs := openapi3.NewDocuments()
	a, baseA := discoverytest.Start(t, discoverytest.WithCRDs(10, 2))
	b, baseB := discoverytest.Start(t, discoverytest.WithCRDs(10, 2))
	c, baseC := discoverytest.Start(t, discoverytest.WithCRDs(10, 2))
	if err := c.ChangeSchema(schema.GroupVersion{Group: "apps", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const path = "apis/apps/v1"
	read := func(base string) *openapi3.Document {
		t.Helper()
		d, err := newClient(t, base, openapi3.WithDocuments(docs)).Document(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	da := read(baseA)
	db := read(baseB)
	if n := documentFetches(a, path); n != 1 {
		t.Errorf("first cluster: %d fetches of %s, want 1", n, path)
	}
	if n := documentFetches(b, path); n != 0 {
		t.Errorf("second cluster of the same schemas: %d fetches of %s, want 0", n, path)
	}
	if &da.JSON[0] != &db.JSON[0] {
		t.Errorf("the two clusters hold two copies of one document")
	}
	sa, err := da.Schema("io.k8s.api.apps.v1.Deployment")
	if err != nil {
		t.Fatal(err)
	}
	if sb, err := db.Schema("io.k8s.api.apps.v1.Deployment"); err != nil || sb != sa {
		t.Errorf("a schema parsed for one cluster is parsed again for the other (%v)", err)
	}
	if docs.Len() != 1 {
		t.Errorf("table holds %d documents, want 1", docs.Len())
	}
	dc := read(baseC)
	if n := documentFetches(c, path); n != 1 || &dc.JSON[0] == &da.JSON[0] {
		t.Errorf("a cluster with another schema: %d fetches, shared bytes %v", n, &dc.JSON[0] == &da.JSON[0])
	}
	if docs.Len() != 2 {
		t.Errorf("table holds %d documents, want 2", docs.Len())
	}
	runtime.KeepAlive([]*openapi3.Document{da, db, dc}) // the table holds them weakly
}
