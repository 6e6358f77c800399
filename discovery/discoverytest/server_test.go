package discoverytest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

func aggregatedGroups(t *testing.T, base, accept string) (apidiscoveryv2.APIGroupDiscoveryList, *http.Response) {
	t.Helper()
	resp, body := get(t, base+"/apis", "Accept", accept)
	var list apidiscoveryv2.APIGroupDiscoveryList
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("/apis: %v", err)
		}
	}
	return list, resp
}

func findVersion(list apidiscoveryv2.APIGroupDiscoveryList, gv schema.GroupVersion) *apidiscoveryv2.APIVersionDiscovery {
	for _, g := range list.Items {
		if g.Name != gv.Group {
			continue
		}
		for i := range g.Versions {
			if g.Versions[i].Version == gv.Version {
				return &g.Versions[i]
			}
		}
	}
	return nil
}

func TestGenerations(t *testing.T) {
	const legacyJSON = "application/json"
	for _, tc := range []struct {
		gen  discoverytest.Generation
		git  string
		want map[string]string // Accept -> Content-Type answered ("" for 406)
	}{
		{discoverytest.GenerationV2, "v1.36.3", map[string]string{
			acceptAll:                            acceptV2PB,
			acceptV2JSON:                         acceptV2JSON,
			acceptV2Beta1JSON:                    "",
			acceptV2Beta1JSON + "," + legacyJSON: legacyJSON,
		}},
		{discoverytest.GenerationV2AndV2Beta1, "v1.31.14", map[string]string{
			acceptAll:         acceptV2PB,
			acceptV2JSON:      acceptV2JSON,
			acceptV2Beta1JSON: acceptV2Beta1JSON,
			acceptV2Beta1PB:   acceptV2Beta1PB,
		}},
		{discoverytest.GenerationV2Beta1, "v1.28.15", map[string]string{
			acceptAll:         acceptV2Beta1JSON,
			acceptV2JSON:      "",
			acceptV2Beta1JSON: acceptV2Beta1JSON,
			acceptV2Beta1PB:   acceptV2Beta1PB,
		}},
		{discoverytest.GenerationLegacy, "v1.25.16", map[string]string{
			acceptAll:         legacyJSON,
			acceptV2JSON:      "",
			acceptV2Beta1JSON: "",
		}},
	} {
		t.Run(tc.gen.String(), func(t *testing.T) {
			_, base := discoverytest.Start(t, discoverytest.WithGeneration(tc.gen), discoverytest.WithCRDs(10, 2))
			for accept, wantType := range tc.want {
				for _, path := range []string{"/api", "/apis"} {
					resp, body := get(t, base+path, "Accept", accept)
					if wantType == "" {
						if resp.StatusCode != http.StatusNotAcceptable {
							t.Errorf("%s Accept %s: %d %s, want 406", path, accept, resp.StatusCode, resp.Header.Get("Content-Type"))
						}
						continue
					}
					if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != wantType {
						t.Errorf("%s Accept %s: %d %q, want 200 %q", path, accept, resp.StatusCode, resp.Header.Get("Content-Type"), wantType)
						continue
					}
					if wantType == acceptV2Beta1JSON {
						var list apidiscoveryv2beta1.APIGroupDiscoveryList
						if err := json.Unmarshal(body, &list); err != nil || list.APIVersion != "apidiscovery.k8s.io/v2beta1" || len(list.Items) == 0 {
							t.Errorf("%s: v2beta1 body: %v, apiVersion %q, %d groups", path, err, list.APIVersion, len(list.Items))
						}
					}
				}
			}
			_, body := get(t, base+"/version")
			var v struct{ GitVersion string }
			if err := json.Unmarshal(body, &v); err != nil || v.GitVersion != tc.git {
				t.Errorf("/version gitVersion %q (%v), want %q", v.GitVersion, err, tc.git)
			}
		})
	}
}

// TestV2Beta1ConditionalRequests: the older generations' v2beta1 layer keeps
// the real handler's ETag semantics.
func TestV2Beta1ConditionalRequests(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithGeneration(discoverytest.GenerationV2AndV2Beta1))
	resp, _ := get(t, base+"/apis", "Accept", acceptV2Beta1JSON)
	etag := resp.Header.Get("ETag")
	v2, _ := get(t, base+"/apis", "Accept", acceptV2JSON)
	if etag == "" || v2.Header.Get("ETag") != etag {
		t.Fatalf("v2beta1 ETag %q, v2 ETag %q: want equal and set", etag, v2.Header.Get("ETag"))
	}
	if resp, _ := get(t, base+"/apis", "Accept", acceptV2Beta1JSON, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match with the current ETag: %d, want 304", resp.StatusCode)
	}
	if err := srv.AddCRD(discoverytest.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "Thing"}); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, base+"/apis", "Accept", acceptV2Beta1JSON, "If-None-Match", etag)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == etag || !strings.Contains(string(body), `"new.example.com"`) {
		t.Errorf("after a change: %d, ETag %s (was %s): want 200 with a new ETag and the new group", resp.StatusCode, resp.Header.Get("ETag"), etag)
	}
}

func TestMutations(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	crd := discoverytest.CRD{
		Group: "fresh.example.com", Versions: []string{"v2", "v1"}, Kind: "Gadget",
		Namespaced: true, ShortNames: []string{"gd"}, Categories: []string{"all"}, Status: true, Scale: true,
	}
	gv2 := schema.GroupVersion{Group: crd.Group, Version: "v2"}
	before, resp := aggregatedGroups(t, base, acceptV2JSON)
	etag := resp.Header.Get("ETag")
	rootBefore := openAPIRoot(t, base)

	t.Run("AddCRD", func(t *testing.T) {
		if err := srv.AddCRD(crd); err != nil {
			t.Fatal(err)
		}
		if resp, _ := get(t, base+"/apis", "Accept", acceptV2JSON, "If-None-Match", etag); resp.StatusCode != http.StatusOK {
			t.Errorf("old ETag after AddCRD: %d, want 200", resp.StatusCode)
		}
		after, _ := aggregatedGroups(t, base, acceptV2JSON)
		if len(after.Items) != len(before.Items)+1 || after.Items[len(after.Items)-1].Name != crd.Group {
			t.Fatalf("groups %d -> %d, last %q: want one more, the new group last", len(before.Items), len(after.Items), after.Items[len(after.Items)-1].Name)
		}
		g := after.Items[len(after.Items)-1]
		if g.Versions[0].Version != "v2" || g.Versions[1].Version != "v1" {
			t.Errorf("versions %v, want v2 preferred then v1", g.Versions)
		}
		r := g.Versions[0].Resources[0]
		if r.Resource != "gadgets" || r.SingularResource != "gadget" || r.Scope != apidiscoveryv2.ScopeNamespace ||
			!slices.Equal(r.ShortNames, []string{"gd"}) || len(r.Subresources) != 2 || r.ResponseKind.Kind != "Gadget" {
			t.Errorf("resource %+v", r)
		}
		resp, body := get(t, base+"/apis/fresh.example.com/v2", "Accept", "application/json")
		var list metav1.APIResourceList
		if err := json.Unmarshal(body, &list); resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("legacy %d %v", resp.StatusCode, err)
		}
		var names []string
		for _, r := range list.APIResources {
			names = append(names, r.Name)
		}
		if !slices.Equal(names, []string{"gadgets", "gadgets/scale", "gadgets/status"}) {
			t.Errorf("legacy resources %v", names)
		}
		root := openAPIRoot(t, base)
		if len(root) != len(rootBefore)+2 || root["apis/fresh.example.com/v2"] == "" {
			t.Errorf("OpenAPI root has %d paths (was %d), want the two new group-versions", len(root), len(rootBefore))
		}
		_, doc := get(t, base+root["apis/fresh.example.com/v2"], "Accept", "application/json")
		if !strings.Contains(string(doc), `"x-kubernetes-group-version-kind":[{"group":"fresh.example.com","kind":"Gadget","version":"v2"}]`) {
			t.Errorf("the new group-version's OpenAPI document has no Gadget schema")
		}
	})

	t.Run("ChangeSchema", func(t *testing.T) {
		_, resp := aggregatedGroups(t, base, acceptV2JSON)
		etag := resp.Header.Get("ETag")
		old := openAPIRoot(t, base)
		if err := srv.ChangeSchema(gv2); err != nil {
			t.Fatal(err)
		}
		now := openAPIRoot(t, base)
		for p, u := range old {
			if changed := now[p] != u; changed != (p == "apis/fresh.example.com/v2") {
				t.Errorf("%s: hash changed=%v", p, changed)
			}
		}
		resp, _ = do(t, noRedirects, http.MethodGet, base+old["apis/fresh.example.com/v2"], "Accept", "application/json")
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != now["apis/fresh.example.com/v2"] {
			t.Errorf("stale hash: %d Location %q, want 301 to %q", resp.StatusCode, resp.Header.Get("Location"), now["apis/fresh.example.com/v2"])
		}
		if resp, _ := get(t, base+"/apis", "Accept", acceptV2JSON, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
			t.Errorf("a schema change changed discovery: %d, want 304", resp.StatusCode)
		}
	})

	t.Run("SetStale", func(t *testing.T) {
		if err := srv.SetStale(gv2, true); err != nil {
			t.Fatal(err)
		}
		list, _ := aggregatedGroups(t, base, acceptV2JSON)
		v := findVersion(list, gv2)
		if v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessStale || len(v.Resources) != 1 {
			t.Fatalf("stale version %+v: want freshness Stale with its resources kept", v)
		}
		if resp, _ := get(t, base+"/apis/fresh.example.com/v2", "Accept", "application/json"); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("legacy stale group-version: %d, want 503", resp.StatusCode)
		}
		if resp, _ := get(t, base+"/apis/fresh.example.com/v1", "Accept", "application/json"); resp.StatusCode != http.StatusOK {
			t.Errorf("legacy sibling version: %d, want 200", resp.StatusCode)
		}
		if err := srv.SetStale(gv2, false); err != nil {
			t.Fatal(err)
		}
		list, _ = aggregatedGroups(t, base, acceptV2JSON)
		if v := findVersion(list, gv2); v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
			t.Errorf("after recovery freshness %q", v.Freshness)
		}
	})

	t.Run("RemoveGroupVersion", func(t *testing.T) {
		if err := srv.RemoveGroupVersion(gv2); err != nil {
			t.Fatal(err)
		}
		list, _ := aggregatedGroups(t, base, acceptV2JSON)
		if findVersion(list, gv2) != nil || findVersion(list, schema.GroupVersion{Group: crd.Group, Version: "v1"}) == nil {
			t.Errorf("want v2 gone and v1 kept")
		}
		if resp, _ := get(t, base+"/openapi/v3/apis/fresh.example.com/v2"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("OpenAPI of a removed group-version: %d, want 404", resp.StatusCode)
		}
		if err := srv.RemoveGroupVersion(gv2); err == nil {
			t.Errorf("removing it twice: no error")
		}
	})

	t.Run("RemoveCRD", func(t *testing.T) {
		if err := srv.RemoveCRD(crd.Group, "gadgets"); err != nil {
			t.Fatal(err)
		}
		list, _ := aggregatedGroups(t, base, acceptV2JSON)
		if len(list.Items) != len(before.Items) {
			t.Errorf("%d groups, want %d: the emptied group should be gone", len(list.Items), len(before.Items))
		}
		if resp, _ := get(t, base+"/apis/fresh.example.com", "Accept", "application/json"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("legacy group after removal: %d, want 404", resp.StatusCode)
		}
		if _, resp := aggregatedGroups(t, base, acceptV2JSON); resp.Header.Get("ETag") != etag {
			t.Errorf("back to the starting content, the ETag should be the starting one")
		}
	})

	t.Run("RemoveGroup", func(t *testing.T) {
		if err := srv.RemoveGroup("g000.stress.example.com"); err != nil {
			t.Fatal(err)
		}
		list, _ := aggregatedGroups(t, base, acceptV2JSON)
		if findVersion(list, schema.GroupVersion{Group: "g000.stress.example.com", Version: "v1"}) != nil {
			t.Errorf("group still served")
		}
		if err := srv.RemoveGroup("nope.example.com"); err == nil {
			t.Errorf("removing an unknown group: no error")
		}
	})
}

func TestSetGroupVersionCore(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithoutBuiltins())
	v := apidiscoveryv2.APIVersionDiscovery{Version: "v1", Resources: []apidiscoveryv2.APIResourceDiscovery{{
		Resource: "pods", ResponseKind: &metav1.GroupVersionKind{Kind: "Pod"}, Scope: apidiscoveryv2.ScopeNamespace,
		SingularResource: "pod", Verbs: []string{"get", "list"},
	}}}
	if err := srv.SetGroupVersion("", v); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, base+"/api/v1", "Accept", "application/json")
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != 200 || len(list.APIResources) != 1 {
		t.Fatalf("/api/v1 after SetGroupVersion: %d %v %+v", resp.StatusCode, err, list)
	}
	if list, _ := aggregatedGroups(t, base, acceptV2JSON); len(list.Items) != 0 {
		t.Errorf("WithoutBuiltins serves %d named groups, want none", len(list.Items))
	}
	if err := srv.SetGroupVersion("", apidiscoveryv2.APIVersionDiscovery{Version: "v2"}); err == nil {
		t.Errorf("core v2 accepted")
	}
}

func TestBadOptions(t *testing.T) {
	for name, opts := range map[string][]discoverytest.Option{
		"negative CRDs":       {discoverytest.WithCRDs(-1, 1)},
		"zero groups":         {discoverytest.WithCRDs(1, 0)},
		"zero backends":       {discoverytest.WithBackends(0, discoverytest.RoundRobin)},
		"unknown generation":  {discoverytest.WithGeneration(discoverytest.Generation(42))},
		"peer on old servers": {discoverytest.WithGeneration(discoverytest.GenerationV2Beta1), discoverytest.WithPeerAggregation()},
		"a version too many":  {discoverytest.WithBackendVersions("v1.36.3", "v1.37.1")},
		"a version too few":   {discoverytest.WithBackends(3, discoverytest.RoundRobin), discoverytest.WithBackendVersions("v1.36.3", "v1.37.1")},
		"not a gitVersion":    {discoverytest.WithBackendVersions("1.37")},
		"no v":                {discoverytest.WithBackendVersions("1.37.1")},
	} {
		if _, err := discoverytest.NewServer(opts...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := discoverytest.ParseGeneration("v3"); err == nil {
		t.Errorf("ParseGeneration(v3): no error")
	}
}

func TestBearerToken(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithBearerToken("s3cret"))
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/apis", "Bearer s3cret", http.StatusOK},
		{"/apis", "", http.StatusForbidden},
		{"/apis", "Bearer wrong", http.StatusUnauthorized},
		{"/version", "", http.StatusOK},
		{"/openapi/v3", "", http.StatusForbidden},
	} {
		var hdr []string
		if tc.auth != "" {
			hdr = []string{"Authorization", tc.auth}
		}
		if resp, _ := get(t, base+tc.path, hdr...); resp.StatusCode != tc.want {
			t.Errorf("%s with %q: %d, want %d", tc.path, tc.auth, resp.StatusCode, tc.want)
		}
	}
	if _, err := discoverytest.NewServer(discoverytest.WithBearerToken("")); err == nil {
		t.Errorf("an empty token accepted")
	}
}
