package clientgo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/internal/clientgooracle"

	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	cgopenapi3 "k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/clientgo"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/openapi3"
	oapiclientgo "github.com/kubeatlas/kubeatlas/openapi3/clientgo"
)

// newClient, adapter and clientGo are copies of discovery/clientgo's
// test helpers (clientgo_helpers_test.go); answers, ask, compareAnswers and
// firstDifference of its clientgo_test.go's.
func newClient(t testing.TB, base string, opts ...discovery.Option) *discovery.Client {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func adapter(t testing.TB, base string, opts ...discovery.Option) *clientgo.Discovery {
	t.Helper()
	a, err := clientgo.New(newClient(t, base, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func clientGo(t testing.TB, base string) *cgdiscovery.DiscoveryClient {
	t.Helper()
	d, err := cgdiscovery.NewDiscoveryClientForConfig(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestClientGoDifferential runs client-go's own helpers over the adapter and
// over client-go's DiscoveryClient against the same server, in every server
// generation, and requires the same answers.
func TestClientGoDifferential(t *testing.T) {
	for _, gen := range []discoverytest.Generation{
		discoverytest.GenerationV2, discoverytest.GenerationV2AndV2Beta1,
		discoverytest.GenerationV2Beta1, discoverytest.GenerationLegacy,
	} {
		t.Run(gen.String(), func(t *testing.T) {
			_, base := discoverytest.Start(t, discoverytest.WithGeneration(gen), discoverytest.WithCRDs(60, 6))
			want := clientgooracle.Ask(t, clientGo(t, base))
			if gen == discoverytest.GenerationV2Beta1 {
				// The difference: client-go v0.37 no longer asks for v2beta1,
				// so it reads a 1.26–1.29 server through legacy discovery,
				// one request per group-version, and its legacy conversion
				// writes some fields differently from its aggregated one.
				// kubeatlas reads v2beta1 in two requests and answers what
				// client-go answers for the same cluster served as v2.
				_, v2 := discoverytest.Start(t, discoverytest.WithCRDs(60, 6))
				want = clientgooracle.Ask(t, clientGo(t, v2))
			}
			for _, opts := range [][]discovery.Option{nil, {discovery.WithJSONOnly()}} {
				clientgooracle.Compare(t, clientgooracle.Ask(t, adapter(t, base, opts...)), want)
			}
			if len(want.GroupResources) < 20 || len(want.Preferred) < 20 {
				t.Fatalf("too little to compare: %d groups", len(want.GroupResources))
			}
		})
	}
}

// TestClientGoOpenAPIV3: with WithOpenAPIV3, OpenAPI v3 read through the
// discovery interface (as kubectl explain reads it) comes from kubeatlas:
// client-go's openapi3.Root gets its documents with the root read once,
// where client-go's own client reads the root again for each.
func TestClientGoOpenAPIV3(t *testing.T) {
	srv, base := discoverytest.Start(t)
	oc, err := openapi3.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	a, err := clientgo.New(newClient(t, base), clientgo.WithOpenAPIV3(oapiclientgo.New(oc)))
	if err != nil {
		t.Fatal(err)
	}
	gvs := []schema.GroupVersion{{Group: "apps", Version: "v1"}, {Group: "batch", Version: "v1"}, {Version: "v1"}}
	roots := func(c openapi.Client) int {
		srv.ResetRequests()
		root := cgopenapi3.NewRoot(c)
		for _, gv := range gvs {
			doc, err := root.GVSpec(gv)
			if err != nil || doc.Components == nil || len(doc.Components.Schemas) == 0 {
				t.Fatalf("%s: %v", gv, err)
			}
		}
		n := 0
		for _, r := range srv.Requests() {
			if r.Path == "/openapi/v3" {
				n++
			}
		}
		return n
	}
	if n := roots(a.OpenAPIV3()); n != 1 {
		t.Errorf("kubeatlas through the adapter: the root read %d times, want once", n)
	}
	if n := roots(adapter(t, base).OpenAPIV3()); n != len(gvs) {
		t.Errorf("client-go's own (the default): the root read %d times, want %d", n, len(gvs))
	}
	paths, err := a.OpenAPIV3WithContext(context.Background()).PathsWithContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body, err := paths["apis/apps/v1"].SchemaWithContext(context.Background(), "application/json")
	if err != nil || !strings.Contains(string(body), "io.k8s.api.apps.v1.Deployment") {
		t.Errorf("SchemaWithContext: %v", err)
	}
}
