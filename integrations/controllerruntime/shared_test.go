package controllerruntime_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
	"github.com/kubeatlas/kubeatlas/shared"
)

// frontDoor is an API server's front: it accepts the bearer tokens
// "tok-*" (401 for others), passes requests to the fake, and logs the
// discovery requests (/api, /apis and below) by token.
type frontDoor struct {
	url string

	mu  sync.Mutex
	log []discoveryHit
}

type discoveryHit struct {
	token, path, ifNoneMatch string
	status                   int
}

func startFrontDoor(t *testing.T, opts ...discoverytest.Option) *frontDoor {
	t.Helper()
	srv, base := discoverytest.Start(t, opts...)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	f := &frontDoor{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !strings.HasPrefix(tok, "tok-") {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		proxy.ServeHTTP(rec, r)
		if r.URL.Path == "/api" || r.URL.Path == "/apis" || strings.Count(r.URL.Path, "/") <= 3 && strings.HasPrefix(r.URL.Path, "/apis/") {
			f.mu.Lock()
			f.log = append(f.log, discoveryHit{token: tok, path: r.URL.Path, ifNoneMatch: r.Header.Get("If-None-Match"), status: rec.status})
			f.mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		// The fake's watches end first: ts.Close waits for every request
		// it is proxying, and the watches of clients still held (a test
		// that failed before gcReleases) would otherwise keep it, and the
		// test, waiting forever; the fake's own cleanup runs after this.
		srv.Close()
		ts.Close()
	})
	f.url = ts.URL
	return f
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (f *frontDoor) hits(token string) []discoveryHit {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []discoveryHit
	for _, h := range f.log {
		if token == "" || h.token == token {
			out = append(out, h)
		}
	}
	return out
}

func (f *frontDoor) config(token string) *rest.Config {
	return &rest.Config{Host: f.url, BearerToken: token}
}

// getWidget is a reconcile's read: a Get of a custom resource, which the
// fake does not store (NotFound), after the client mapped its kind.
func getWidget(ctx context.Context, c client.Client) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "g000.stress.example.com", Version: "v1", Kind: "Widget0000"})
	err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "w"}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// newRegistry is a registry that stops a client at its last release and
// whose snapshots do not age within a test (a revalidation because a
// loaded machine ran a test for 30 s would be counted as the clients').
// Tests that count requests exactly add shared.WithoutWatch: a client's
// watch, once its lists are in, revalidates discovery once (two more
// 304s) at a time the scheduler decides, before or after the check.
func newRegistry(t *testing.T, opts ...shared.Option) *shared.Registry {
	t.Helper()
	opts = append([]shared.Option{shared.WithLinger(0), shared.WithDiscoveryOptions(discovery.WithMaxAge(time.Hour))}, opts...)
	r, err := shared.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gcReleases drops what holds the registry's clients (*held = nil) and
// waits for the garbage collector to release them all, which stops their
// watches (no linger), before the servers close.
func gcReleases[T any](t *testing.T, r *shared.Registry, held *[]T) {
	t.Helper()
	*held = nil
	for deadline := time.Now().Add(10 * time.Second); r.Len() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d shared clients still held 10s after their users became unreachable", r.Len())
		}
		runtime.GC()
	}
}

// A hundred reconciles, each with a new client.New: the first client's
// discovery and at most two requests after it (controller-runtime's
// default reads discovery again for every client). The shared client's
// watch runs: its one revalidation, when its lists are in, is the two.
func TestClientPerReconcile(t *testing.T) {
	f := startFrontDoor(t, discoverytest.WithCRDs(50, 5))
	s := controllerruntime.Sharing{Registry: newRegistry(t)}
	ctx := context.Background()
	var firstHits int
	var keep []client.Client
	for i := range 100 {
		c, err := client.New(f.config("tok-1"), s.ClientOptions(f.config("tok-1"), client.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, c) // held, so that the test does not depend on when the GC runs
		if err := getWidget(ctx, c); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		if i == 0 {
			firstHits = len(f.hits(""))
		}
	}
	if after := len(f.hits("")) - firstHits; firstHits == 0 || after > 2 {
		t.Fatalf("the first client: %d discovery requests; the 99 after it: %d, want at most 2", firstHits, after)
	}
	if s.Registry.Len() != 1 {
		t.Fatalf("%d shared clients, want 1", s.Registry.Len())
	}
	gcReleases(t, s.Registry, &keep)
}

// Fifty identities on one server: the first reads discovery cold, each
// other sends two conditional requests answered 304, and none shares
// another's client.
func TestClientsOfFiftyIdentities(t *testing.T) {
	f := startFrontDoor(t, discoverytest.WithCRDs(50, 5))
	s := controllerruntime.Sharing{Registry: newRegistry(t, shared.WithoutWatch())}
	ctx := context.Background()
	var keep []client.Client
	for i := range 50 {
		tok := fmt.Sprintf("tok-%d", i)
		c, err := client.New(f.config(tok), s.ClientOptions(f.config(tok), client.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, c)
		if err := getWidget(ctx, c); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
		hits := f.hits(tok)
		if i == 0 {
			if len(hits) != 2 || hits[0].status != 200 || hits[1].status != 200 {
				t.Fatalf("the first identity: %+v, want a cold read (two 200s)", hits)
			}
			continue
		}
		if len(hits) != 2 {
			t.Fatalf("%s: %+v, want two requests", tok, hits)
		}
		for _, h := range hits {
			if h.status != http.StatusNotModified || h.ifNoneMatch == "" {
				t.Fatalf("%s: %+v, want two conditional requests answered 304", tok, hits)
			}
		}
	}
	if s.Registry.Len() != 50 {
		t.Fatalf("%d shared clients, want one per identity (50)", s.Registry.Len())
	}
	gcReleases(t, s.Registry, &keep)
}

// cluster.New with ClusterOption takes the shared mapper: a second
// cluster of the same config reads nothing.
func TestClusterOption(t *testing.T) {
	f := startFrontDoor(t, discoverytest.WithCRDs(5, 1))
	s := controllerruntime.Sharing{Registry: newRegistry(t, shared.WithoutWatch())}
	var clusters []cluster.Cluster
	for range 2 {
		cfg := f.config("tok-1")
		cl, err := cluster.New(cfg, s.ClusterOption(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if err := getWidget(context.Background(), cl.GetClient()); err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, cl)
	}
	if n := len(f.hits("")); n != 2 {
		t.Fatalf("%d discovery requests for two clusters, want 2", n)
	}
	if s.Registry.Len() != 1 {
		t.Fatalf("%d shared clients, want 1", s.Registry.Len())
	}
	gcReleases(t, s.Registry, &clusters)
}

// Options the caller set are kept: a caller's own mapper is not mixed
// with the shared HTTP client.
func TestClientOptionsKeepTheCallers(t *testing.T) {
	s := controllerruntime.Sharing{Registry: newRegistry(t)}
	hc := &http.Client{}
	o := s.ClientOptions(&rest.Config{Host: "https://example.invalid"}, client.Options{HTTPClient: hc})
	if o.HTTPClient != hc || o.Mapper != nil {
		t.Fatalf("options changed: %+v", o)
	}
	if s.Registry.Len() != 0 {
		t.Fatal("a client was acquired for options the caller set")
	}
}
