package openapi3_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestRedirectedDocumentIsAskedAgain: behind a balancer over two servers,
// a root read from the server that has a schema's change lists its new
// hash, and the document's request reaches the other, whose 301 leads to
// its current, older document. That document answers for a second at
// most; then the document is asked for again, and the other server's
// change, served meanwhile, is found. Without it the older document was
// kept as the new hash's until the root changed again (issue 47's soak: a
// balancer's typed schema 6.9 s behind both servers).
func TestRedirectedDocumentIsAskedAgain(t *testing.T) {
	a, baseA := docserver.Start(t)
	b, baseB := docserver.Start(t)
	toA, toB := reverseProxy(t, baseA), reverseProxy(t, baseB)
	var docsToB atomic.Bool // documents go to b, the root to a
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/openapi/v3" && docsToB.Load() {
			toB.ServeHTTP(w, r)
			return
		}
		toA.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newClient(t, front.URL, openapi3.WithClock(clk), openapi3.WithMaxAge(time.Hour))
	ctx := context.Background()
	gv := schema.GroupVersion{Group: "apps", Version: "v1"}
	path := openapi3.PathFor(gv)
	before, err := c.Document(ctx, path)
	if err != nil {
		t.Fatal(err)
	}

	if err := a.ChangeSchema(gv); err != nil {
		t.Fatal(err)
	}
	docsToB.Store(true)
	clk.SetTime(clk.Now().Add(2 * time.Second))
	c.Changed()
	d, err := c.Document(ctx, path) // a's root, b's 301 and older document
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.JSON, before.JSON) {
		t.Fatal("b did not answer with its older document: the test shows nothing")
	}

	if err := b.ChangeSchema(gv); err != nil { // b catches up
		t.Fatal(err)
	}
	b.ResetRequests()
	clk.SetTime(clk.Now().Add(500 * time.Millisecond))
	if d, err = c.Document(ctx, path); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Requests()); n != 0 || !bytes.Equal(d.JSON, before.JSON) {
		t.Errorf("within the second: %d requests to b, a document of its own %v; want the held one, nothing sent", n, !bytes.Equal(d.JSON, before.JSON))
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if d, err = c.Document(ctx, path); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(d.JSON, before.JSON) {
		t.Error("a second after the 301, the document of the root's hash was not asked for again")
	}
	a.ResetRequests()
	b.ResetRequests()
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if _, err := c.Document(ctx, path); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Requests()) + len(b.Requests()); n != 0 {
		t.Errorf("once the document of the root's hash is held, %d requests for it; want none", n)
	}
}

// reverseProxy forwards to base.
func reverseProxy(t *testing.T, base string) *httputil.ReverseProxy {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(u)
}
