package openapi3_test

import (
	"context"
	"net/http"
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

// TestDocumentsRedirectKeyedByFinalHash: a document that a 301 led to (a
// stale ?hash=, as kube-openapi answers during a rolling CRD upgrade) is
// held under the hash its bytes have, the final URL's, never under the
// one asked for: a cluster still serving the document of the old hash
// asks its own server for it, and gets its own.
func TestDocumentsRedirectKeyedByFinalHash(t *testing.T) {
	docs := openapi3.NewDocuments()
	upgraded, baseUpgraded := discoverytest.Start(t, discoverytest.WithCRDs(10, 2))
	old, baseOld := discoverytest.Start(t, discoverytest.WithCRDs(10, 2))
	ctx := context.Background()
	const path = "apis/apps/v1"
	gv := schema.GroupVersion{Group: "apps", Version: "v1"}

	// The upgraded cluster's client read its root before the upgrade, so
	// it asks for the old hash and is redirected to the new document.
	c := newClient(t, baseUpgraded, openapi3.WithDocuments(docs))
	if _, err := c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	if err := upgraded.ChangeSchema(gv); err != nil {
		t.Fatal(err)
	}
	upgraded.ResetRequests()
	d, err := c.Document(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if reqs := upgraded.Requests(); len(reqs) != 2 || reqs[0].Status != http.StatusMovedPermanently {
		t.Fatalf("requests %+v, want a 301 then the document", reqs)
	}
	if !strings.Contains(string(d.JSON), "schema revision 1") {
		t.Fatalf("the redirect did not lead to the upgraded document")
	}

	// A cluster not yet upgraded lists the old hash.
	do, err := newClient(t, baseOld, openapi3.WithDocuments(docs)).Document(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if n := documentFetches(old, path); n != 1 {
		t.Errorf("a cluster asking the old hash made %d requests for it, want its own 1", n)
	}
	if strings.Contains(string(do.JSON), "schema revision 1") {
		t.Errorf("a cluster asking the old hash got the document it redirected to")
	}
	runtime.KeepAlive([]*openapi3.Document{d, do})
}
