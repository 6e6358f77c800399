package openapi3_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestStaleRootOnError: with WithStaleRootOnError, a process whose disk
// cache holds the documents explains a kind while its server is down (no
// connection, or a 503), and says the root is stale; a server that
// refuses (403) is not worked around, and a client without the option
// fails as before. (kube-apiserver's root has no ETag or lifetime, so the
// disk cache alone never kept it.)
func TestStaleRootOnError(t *testing.T) {
	fake, origin := discoverytest.Start(t)
	u, _ := url.Parse(origin)
	var mode atomic.Value // "", "down", "503", "403"
	mode.Store("")
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "down":
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close() // as a server that went away
		case "503":
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		case "403":
			http.Error(w, "forbidden", http.StatusForbidden)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	client := func(opts ...openapi3.Option) *openapi3.Client {
		t.Helper()
		dc, err := diskcache.Open(dir, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		return newClient(t, srv.URL, append([]openapi3.Option{openapi3.WithDiskCache(dc), openapi3.WithMaxRetries(0)}, opts...)...)
	}
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	ctx := context.Background()

	c := client(openapi3.WithStaleRootOnError())
	if _, err := c.Kind(ctx, deploy); err != nil || c.StaleRoot() != nil {
		t.Fatalf("with the server up: %v, stale %v", err, c.StaleRoot())
	}
	for _, m := range []string{"down", "503"} {
		mode.Store(m)
		c := client(openapi3.WithStaleRootOnError())
		s, err := c.Kind(ctx, deploy)
		if err != nil || s.Name != "io.k8s.api.apps.v1.Deployment" {
			t.Errorf("server %s: %v %v, want the cached document", m, s, err)
		}
		if c.StaleRoot() == nil {
			t.Errorf("server %s: StaleRoot is nil, want why", m)
		}
		if _, err := client().Kind(ctx, deploy); err == nil {
			t.Errorf("server %s, without WithStaleRootOnError: no error", m)
		}
	}
	// A long-lived client keeps the root current: after a schema change,
	// the kept root names the documents on disk now, not those they
	// replaced.
	mode.Store("")
	long := client(openapi3.WithStaleRootOnError())
	if _, err := long.Kind(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	if err := fake.ChangeSchema(schema.GroupVersion{Group: "apps", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := long.RefreshRoot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := long.Kind(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	mode.Store("down")
	c = client(openapi3.WithStaleRootOnError())
	if _, err := c.Kind(ctx, deploy); err != nil || c.StaleRoot() == nil {
		t.Errorf("server down after a schema change a long-lived client saw: %v, stale %v, want the document it cached", err, c.StaleRoot())
	}

	mode.Store("403")
	if _, err := client(openapi3.WithStaleRootOnError()).Kind(ctx, deploy); err == nil {
		t.Error("a server that refuses (403) was worked around with the kept root")
	}
	mode.Store("")
	c = client(openapi3.WithStaleRootOnError())
	if _, err := c.Kind(ctx, deploy); err != nil || c.StaleRoot() != nil {
		t.Errorf("with the server back: %v, stale %v", err, c.StaleRoot())
	}
	if _, err := openapi3.NewForHTTPClient(nil, srv.URL, openapi3.WithStaleRootOnError()); err == nil {
		t.Error("WithStaleRootOnError without a disk cache: no error")
	}
}

// TestStaleRootWhenRootHangs: a root that never answers, with every
// document and the last root on disk, is an unavailable server: a new
// client (a new explain) answers from the kept root once the root timeout
// passes, and StaleRoot says why (the timeout). On c7f0643 the read waited
// for the caller's deadline (explain's minute) and failed. Without
// WithStaleRootOnError it is still an error, within the same bound.
func TestStaleRootWhenRootHangs(t *testing.T) {
	fake, origin := discoverytest.Start(t)
	dir := t.TempDir()
	const bound = 300 * time.Millisecond
	client := func(opts ...openapi3.Option) *openapi3.Client {
		t.Helper()
		dc, err := diskcache.Open(dir, origin)
		if err != nil {
			t.Fatal(err)
		}
		return newClient(t, origin, append([]openapi3.Option{openapi3.WithDiskCache(dc)}, opts...)...)
	}
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	// The caller's own deadline is far away, as explain's minute is.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := client(openapi3.WithStaleRootOnError()).Kind(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	fake.InjectFault("/openapi/v3", discoverytest.Fault{Latency: time.Hour})
	defer fake.ClearFaults()

	start := time.Now()
	c := client(openapi3.WithStaleRootOnError(), openapi3.WithRootTimeout(bound))
	s, err := c.Kind(ctx, deploy)
	took := time.Since(start)
	if err != nil || s.Name != "io.k8s.api.apps.v1.Deployment" {
		t.Fatalf("a hanging root with a warm cache: %v, %v; want the cached document", s, err)
	}
	if took > 20*time.Second {
		t.Errorf("answered after %v, want about the root timeout (%v)", took, bound)
	}
	var rte *openapi3.RootTimeoutError
	if serr := c.StaleRoot(); !errors.As(serr, &rte) || rte.Timeout != bound {
		t.Errorf("StaleRoot = %v, want a RootTimeoutError of %v", serr, bound)
	}

	start = time.Now()
	_, err = client(openapi3.WithRootTimeout(bound)).Kind(ctx, deploy)
	if !errors.As(err, &rte) || ctx.Err() != nil {
		t.Errorf("without WithStaleRootOnError: %v after %v, want a RootTimeoutError before the caller's deadline", err, time.Since(start))
	}
}
