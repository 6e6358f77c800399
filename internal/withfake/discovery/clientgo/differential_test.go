package clientgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	cgopenapi3 "k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

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

// answers is what client-go's own helpers make of a discovery interface.
type answers struct {
	groupResources []*restmapper.APIGroupResources
	preferred      []*metav1.APIResourceList
	preferredNS    []*metav1.APIResourceList
	groups         []*metav1.APIGroup
	resources      []*metav1.APIResourceList
	failed         []schema.GroupVersion
}

func ask(t *testing.T, d cgdiscovery.DiscoveryInterface) answers {
	t.Helper()
	var a answers
	var err error
	if a.groupResources, err = restmapper.GetAPIGroupResources(d); err != nil && !cgdiscovery.IsGroupDiscoveryFailedError(err) {
		t.Fatalf("GetAPIGroupResources: %v", err)
	}
	a.preferred, _ = cgdiscovery.ServerPreferredResources(d)
	a.preferredNS, _ = cgdiscovery.ServerPreferredNamespacedResources(d)
	a.groups, a.resources, err = cgdiscovery.ServerGroupsAndResources(d)
	var failed *cgdiscovery.ErrGroupDiscoveryFailed
	if errors.As(err, &failed) {
		for gv := range failed.Groups {
			a.failed = append(a.failed, gv)
		}
	} else if err != nil {
		t.Fatalf("ServerGroupsAndResources: %v", err)
	}
	byGV := func(x, y *metav1.APIResourceList) int { return strings.Compare(x.GroupVersion, y.GroupVersion) }
	// The preferred-resources helpers build their lists from maps, in no
	// fixed order.
	for _, lists := range [][]*metav1.APIResourceList{a.preferred, a.preferredNS} {
		slices.SortFunc(lists, byGV)
		for _, l := range lists {
			slices.SortFunc(l.APIResources, func(x, y metav1.APIResource) int { return strings.Compare(x.Name, y.Name) })
		}
	}
	slices.SortFunc(a.resources, byGV)
	slices.SortFunc(a.failed, func(x, y schema.GroupVersion) int { return strings.Compare(x.String(), y.String()) })
	return a
}

func compareAnswers(t *testing.T, got, want answers) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"restmapper.GetAPIGroupResources", got.groupResources, want.groupResources},
		{"ServerPreferredResources", got.preferred, want.preferred},
		{"ServerPreferredNamespacedResources", got.preferredNS, want.preferredNS},
		{"ServerGroupsAndResources groups", got.groups, want.groups},
		{"ServerGroupsAndResources resources", got.resources, want.resources},
		{"failed group-versions", got.failed, want.failed},
	} {
		if !equality.Semantic.DeepEqual(c.got, c.want) {
			t.Errorf("%s differs from client-go's:\n%s", c.name, firstDifference(c.got, c.want))
		}
	}
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
			want := ask(t, clientGo(t, base))
			if gen == discoverytest.GenerationV2Beta1 {
				// The difference: client-go v0.37 no longer asks for v2beta1,
				// so it reads a 1.26–1.29 server through legacy discovery,
				// one request per group-version, and its legacy conversion
				// writes some fields differently from its aggregated one.
				// kubeatlas reads v2beta1 in two requests and answers what
				// client-go answers for the same cluster served as v2.
				_, v2 := discoverytest.Start(t, discoverytest.WithCRDs(60, 6))
				want = ask(t, clientGo(t, v2))
			}
			for _, opts := range [][]discovery.Option{nil, {discovery.WithJSONOnly()}} {
				compareAnswers(t, ask(t, adapter(t, base, opts...)), want)
			}
			if len(want.groupResources) < 20 || len(want.preferred) < 20 {
				t.Fatalf("too little to compare: %d groups", len(want.groupResources))
			}
		})
	}
}

// firstDifference shows where two answers part, as JSON lines.
func firstDifference(got, want any) string {
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	gl, wl := strings.Split(string(g), "\n"), strings.Split(string(w), "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			lo := max(0, i-6)
			hi := min(i+6, len(gl), len(wl))
			return fmt.Sprintf("at line %d:\n got %s\nwant %s", i, strings.Join(gl[lo:hi], "\n"), strings.Join(wl[lo:hi], "\n"))
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(gl), len(wl))
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
