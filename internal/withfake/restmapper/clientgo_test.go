package restmapper_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// clientGoMapper is what the issue compares against: client-go's deferred
// discovery mapper over its memory cache, wrapped in its ShortcutExpander.
func clientGoMapper(t testing.TB, base string) (meta.RESTMapper, cgrestmapper.CategoryExpander) {
	t.Helper()
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(&rest.Config{Host: base, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	mc := memory.NewMemCacheClient(dc)
	return cgrestmapper.NewShortcutExpander(cgrestmapper.NewDeferredDiscoveryRESTMapper(mc), mc, nil),
		cgrestmapper.NewDiscoveryCategoryExpander(mc)
}

// questions builds inputs from the server's own resources: plural,
// singular, short and kind names, in several cases, with and without group
// and version, plus names that exist nowhere and partial group names.
//
// With stride n > 1, only every nth CRD's resources are asked about
// (client-go's answers cost up to a millisecond each at 500 CRDs).
func questions(t *testing.T, c *discovery.Client, stride int) ([]schema.GroupVersionResource, []schema.GroupKind) {
	snap, err := c.Snapshot(context.Background())
	if snap == nil {
		t.Fatal(err)
	}
	// client-go resolves a short name shared by two resources in map order,
	// so differently from run to run; those are tested on their own.
	owners := map[string]map[string]bool{}
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				for _, s := range r.ShortNames {
					if owners[s] == nil {
						owners[s] = map[string]bool{}
					}
					owners[s][g.Name+"/"+r.Name] = true
				}
			}
		}
	}
	var rs []schema.GroupVersionResource
	var ks []schema.GroupKind
	seen := 0
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				if strings.Contains(g.Name, ".example.") {
					if seen++; seen%stride != 0 {
						continue
					}
				}
				names := []string{r.Name, r.SingularName, strings.ToUpper(r.Name), strings.ToLower(r.Kind.Kind) + "lists"}
				for _, s := range r.ShortNames {
					if len(owners[s]) == 1 {
						names = append(names, s)
					}
				}
				for _, n := range names {
					rs = append(rs,
						schema.GroupVersionResource{Resource: n},
						schema.GroupVersionResource{Group: g.Name, Resource: n},
						schema.GroupVersionResource{Version: v.Version, Resource: n},
						schema.GroupVersionResource{Group: g.Name, Version: v.Version, Resource: n})
				}
				if len(g.Name) > 3 {
					rs = append(rs, schema.GroupVersionResource{Group: g.Name[:3], Resource: r.Name})
				}
				for _, k := range []string{r.Kind.Kind, strings.ToLower(r.Kind.Kind), strings.ToUpper(r.Kind.Kind), r.Kind.Kind + "List"} {
					ks = append(ks, schema.GroupKind{Group: g.Name, Kind: k}, schema.GroupKind{Kind: k})
				}
			}
		}
	}
	rs = append(rs, schema.GroupVersionResource{Resource: "doesnotexist"}, schema.GroupVersionResource{Group: "apps", Resource: "doesnotexist"},
		schema.GroupVersionResource{Resource: "lists"}, schema.GroupVersionResource{Resource: "list"})
	ks = append(ks, schema.GroupKind{Kind: "DoesNotExist"}, schema.GroupKind{Kind: "List"})
	return dedupe(rs), dedupe(ks)
}

func dedupe[T comparable](xs []T) []T {
	seen := map[T]bool{}
	return slices.DeleteFunc(xs, func(x T) bool {
		if seen[x] {
			return true
		}
		seen[x] = true
		return false
	})
}

func same(t *testing.T, what string, got, want any, gotErr, wantErr error) {
	t.Helper()
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %v, %v\nwant %v, %v", what, got, gotErr, want, wantErr)
	}
}

// TestSameAnswersAsClientGo asks both mappers everything and requires the
// same answers and errors, on the real v1.36.3 discovery and with CRDs in
// several versions.
func TestSameAnswersAsClientGo(t *testing.T) {
	for name, opts := range map[string][]discoverytest.Option{
		"fixture":                   nil,
		"crds":                      {discoverytest.WithCRDs(40, 6)},
		"legacy+crds":               {discoverytest.WithGeneration(discoverytest.GenerationLegacy), discoverytest.WithCRDs(20, 4)},
		"real server with 500 CRDs": nil,
	} {
		t.Run(name, func(t *testing.T) {
			var base string
			if strings.HasPrefix(name, "real") {
				base = serveCapture(t, "../../../restmapper/testdata/crd500")
			} else {
				_, base = discoverytest.Start(t, opts...)
			}
			m, c := newMapper(t, base)
			ref, refCategories := clientGoMapper(t, base)
			stride := 1
			if strings.HasPrefix(name, "real") {
				stride = 20
			}
			rs, ks := questions(t, c, stride)
			for _, r := range rs {
				gvk, err := m.KindFor(r)
				wgvk, werr := ref.KindFor(r)
				same(t, fmt.Sprintf("KindFor(%v)", r), gvk, wgvk, err, werr)
				gvks, err := m.KindsFor(r)
				wgvks, werr := ref.KindsFor(r)
				same(t, fmt.Sprintf("KindsFor(%v)", r), gvks, wgvks, err, werr)
				gvr, err := m.ResourceFor(r)
				wgvr, werr := ref.ResourceFor(r)
				same(t, fmt.Sprintf("ResourceFor(%v)", r), gvr, wgvr, err, werr)
				gvrs, err := m.ResourcesFor(r)
				wgvrs, werr := ref.ResourcesFor(r)
				same(t, fmt.Sprintf("ResourcesFor(%v)", r), gvrs, wgvrs, err, werr)
				if r.Group == "" && r.Version == "" {
					s, err := m.ResourceSingularizer(r.Resource)
					ws, werr := ref.ResourceSingularizer(r.Resource)
					same(t, fmt.Sprintf("ResourceSingularizer(%q)", r.Resource), s, ws, err, werr)
				}
			}
			for _, gk := range ks {
				for _, versions := range [][]string{nil, {"v1"}, {"v1beta1", "v1"}} {
					mp, err := m.RESTMapping(gk, versions...)
					wmp, werr := ref.RESTMapping(gk, versions...)
					same(t, fmt.Sprintf("RESTMapping(%v, %v)", gk, versions), mp, wmp, err, werr)
					mps, err := m.RESTMappings(gk, versions...)
					wmps, werr := ref.RESTMappings(gk, versions...)
					same(t, fmt.Sprintf("RESTMappings(%v, %v)", gk, versions), mps, wmps, err, werr)
				}
			}
			// Category expansion: client-go lists in map order and once per
			// version; kubeatlas in discovery order, once per resource.
			for _, cat := range []string{"all", "api-extensions", "stress", "nope"} {
				got, ok := m.Expand(cat)
				want, wok := refCategories.Expand(cat)
				if ok != wok || !slices.Equal(sortedGR(got), dedupe(sortedGR(want))) {
					t.Errorf("Expand(%q): %v %v, client-go %v %v", cat, got, ok, want, wok)
				}
			}
			if len(rs) < 200 || len(ks) < 100 {
				t.Fatalf("too few questions: %d, %d", len(rs), len(ks))
			}
		})
	}
}

func sortedGR(in []schema.GroupResource) []schema.GroupResource {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// serveCapture serves /api and /apis as a real server answered them
// (captured aggregated discovery, protobuf or JSON as the Accept header
// prefers), for questions asked of real data rather than the fake
// server's.
func serveCapture(t testing.TB, dir string) string {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bodies := map[string][2][]byte{
		"/api":  {read("api.v2.pb"), read("api.v2.json")},
		"/apis": {read("apis.v2.pb"), read("apis.v2.json")},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		accept := r.Header.Get("Accept")
		if !ok || !strings.Contains(accept, "g=apidiscovery.k8s.io;v=v2;") {
			http.NotFound(w, r)
			return
		}
		// The first type named decides, as the API server's negotiation does.
		if strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;") {
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
			w.Write(b[0])
			return
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		w.Write(b[1])
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// newMapper is restmapper's newMapper (restmapper/mapper_helpers_test.go),
// for the tests that stay here.
func newMapper(t testing.TB, base string, opts ...restmapper.Option) (*restmapper.Mapper, *discovery.Client) {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}
