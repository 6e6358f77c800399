package cliruntime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	cgrestmapper "k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/integrations/cliruntime"
	"github.com/kubeatlas/kubeatlas/shared"
)

func flagsFor(t *testing.T, base string) *genericclioptions.ConfigFlags {
	t.Helper()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	f := genericclioptions.NewConfigFlags(true)
	cacheDir := t.TempDir()
	f.APIServer, f.CacheDir = &base, &cacheDir
	return f
}

// TestSameAnswersAsConfigFlags: through the getter, kubectl-style code
// resolves what it resolves with ConfigFlags alone: resources, short
// names, kinds (CRDs included) and categories.
func TestSameAnswersAsConfigFlags(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 2))
	getter := cliruntime.NewGetter(flagsFor(t, base))
	plain := flagsFor(t, base)
	ours, err := getter.ToRESTMapper()
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := plain.ToRESTMapper()
	if err != nil {
		t.Fatal(err)
	}
	// kubectl's factory wraps ConfigFlags' mapper in a shortcut expander.
	theirDC, err := plain.ToDiscoveryClient()
	if err != nil {
		t.Fatal(err)
	}
	theirs = cgrestmapper.NewShortcutExpander(theirs, theirDC, nil)
	for _, in := range []string{"deploy", "deployments", "svc", "po", "pods", "cm", "deployments.apps", "widget0001s", "widget0001", "hpa", "ev"} {
		gvr, _ := schema.ParseResourceArg(in)
		var r schema.GroupVersionResource
		if gvr != nil {
			r = *gvr
		} else {
			gr := schema.ParseGroupResource(in)
			r = gr.WithVersion("")
		}
		got, gerr := ours.ResourceFor(r)
		want, werr := theirs.ResourceFor(r)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Errorf("ResourceFor(%s) = %v, %v; ConfigFlags: %v, %v", in, got, gerr, want, werr)
		}
		if werr != nil {
			continue
		}
		gk, _ := theirs.KindFor(want)
		m, err := ours.RESTMapping(gk.GroupKind())
		wm, _ := theirs.RESTMapping(gk.GroupKind())
		if err != nil || m.Resource != wm.Resource || m.Scope.Name() != wm.Scope.Name() {
			t.Errorf("RESTMapping(%v) = %v, %v; ConfigFlags: %v", gk, m, err, wm)
		}
	}
	ourDC, err := getter.ToDiscoveryClient()
	if err != nil {
		t.Fatal(err)
	}
	for _, category := range []string{"all", "nope"} {
		got, gok := cgrestmapper.NewDiscoveryCategoryExpander(ourDC).Expand(category)
		want, wok := cgrestmapper.NewDiscoveryCategoryExpander(theirDC).Expand(category)
		if gok != wok || !sameSet(got, want) {
			t.Errorf("category %q: %v (%v); ConfigFlags: %v (%v)", category, got, gok, want, wok)
		}
	}
	if _, err := ours.KindFor(schema.GroupVersionResource{Resource: "nosuchthings"}); !meta.IsNoMatchError(err) {
		t.Errorf("a missing resource: %v, want a NoMatch error", err)
	}
}

// TestOneClientAndFreshness: the getter hands out one discovery client and
// one mapper (kubectl's factory asks for them for every builder), and
// Invalidate makes the next read revalidate (Fresh false until then).
func TestOneClientAndFreshness(t *testing.T) {
	srv, base := discoverytest.Start(t)
	getter := cliruntime.NewGetter(flagsFor(t, base))
	dc1, err := getter.ToDiscoveryClient()
	if err != nil {
		t.Fatal(err)
	}
	dc2, _ := getter.ToDiscoveryClient()
	m1, _ := getter.ToRESTMapper()
	m2, _ := getter.ToRESTMapper()
	if dc1 != dc2 || m1 != m2 {
		t.Errorf("a new discovery client or mapper per call")
	}
	if _, err := dc1.ServerGroups(); err != nil || !dc1.Fresh() {
		t.Fatalf("after a read: %v, fresh %v", err, dc1.Fresh())
	}
	before := len(srv.Requests())
	dc1.Invalidate()
	if dc1.Fresh() {
		t.Errorf("fresh after Invalidate")
	}
	if _, err := dc1.ServerGroups(); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()) - before; n != 2 {
		t.Errorf("a read after Invalidate sent %d requests, want the two revalidations", n)
	}
}

// TestOpenAPIV3SharesTheCache: the getter's OpenAPI v3 client reads and
// writes documents in the flags' cache directory (a second getter on it
// asks for the root only), also with WithoutOpenAPIV3, which only keeps it
// from ToDiscoveryClient.
func TestOpenAPIV3SharesTheCache(t *testing.T) {
	srv, base := discoverytest.Start(t)
	flags := flagsFor(t, base)
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	for i, opts := range [][]cliruntime.Option{nil, {cliruntime.WithoutOpenAPIV3()}} {
		srv.ResetRequests()
		oc, err := cliruntime.NewGetter(flags, opts...).OpenAPIV3()
		if err != nil {
			t.Fatal(err)
		}
		s, err := oc.Kind(context.Background(), deploy)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Field("spec", "replicas"); err != nil {
			t.Errorf("deployments.spec.replicas: %v", err)
		}
		var documents []string
		for _, r := range srv.Requests() {
			if strings.HasPrefix(r.Path, "/openapi/v3/") && r.Status == 200 {
				documents = append(documents, r.Path)
			}
		}
		if i == 0 && len(documents) == 0 {
			t.Errorf("a cold cache fetched no document")
		}
		if i > 0 && len(documents) > 0 {
			t.Errorf("a warm cache fetched %v", documents)
		}
	}
}

func sameSet(a, b []schema.GroupResource) bool {
	seen := map[schema.GroupResource]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestWithLogger: discovery logs through the caller's logr.Logger: a
// server that cannot be reached is said there.
func TestWithLogger(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	l := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	getter := cliruntime.NewGetter(flagsFor(t, down.URL), cliruntime.WithLogger(l.WithName("cmd")))
	m, err := getter.ToRESTMapper()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err == nil {
		t.Fatal("a server that is down answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "cmd ") || !strings.Contains(strings.Join(lines, "\n"), strings.TrimPrefix(down.URL, "http://")) {
		t.Errorf("logged %q, want the failed refresh, naming the server, through the logger given", lines)
	}
}

// Getters built many times in one process (a Helm action, a request
// each) share one client with WithShared: one read of discovery for all.
func TestSharedGetters(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 2))
	r, err := shared.New(shared.WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	flags := flagsFor(t, base)
	var first *cliruntime.Getter
	for i := range 20 {
		g := cliruntime.NewGetter(flags, cliruntime.WithShared(r))
		m, err := g.ToRESTMapper()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
			t.Fatalf("getter %d: %v", i, err)
		}
		dc, err := g.ToDiscoveryClient()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dc.ServerResourcesForGroupVersion("apps/v1"); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = g
			continue
		}
		c1, _ := first.Client()
		c2, _ := g.Client()
		if c1 != c2 {
			t.Fatalf("getter %d has a discovery client of its own", i)
		}
	}
	c, _ := first.Client()
	if n := c.Stats().Requests; n != 2 {
		t.Fatalf("%d discovery requests for 20 getters, want 2", n)
	}
	if r.Len() != 1 {
		t.Fatalf("%d shared clients, want 1", r.Len())
	}
	// The registry's options apply: the getter's own are an error.
	g := cliruntime.NewGetter(flags, cliruntime.WithShared(r), cliruntime.WithWarningHandler(func(string) {}))
	if _, err := g.ToRESTMapper(); err == nil {
		t.Fatal("WithWarningHandler with WithShared: no error")
	}
}
