// Package docserver_test holds internal/docserver (the small server the
// core's internal tests use, since they may not import the fake server's
// module) to the fake server it stands in for.
package docserver_test

import (
	"io"
	"net/http"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestSameDocumentsAsTheFake: for the same CRDs, before and after a change,
// docserver serves the fake's aggregated /api and /apis byte for byte,
// JSON and protobuf, under the same ETags (kube-apiserver's, which clients
// verify bodies against), and answers its ETag with a 304.
func TestSameDocumentsAsTheFake(t *testing.T) {
	fake, fakeBase := discoverytest.Start(t, discoverytest.WithCRDs(40, 6))
	ours, oursBase := docserver.Start(t, docserver.WithCRDs(40, 6))
	compare := func(t *testing.T) {
		t.Helper()
		for _, path := range []string{"/api", "/apis"} {
			for _, protobuf := range []bool{false, true} {
				accept := surface.Source{Format: surface.FormatAggregatedV2, Protobuf: protobuf}.MediaType("")
				wantBody, wantETag, wantType := get(t, fakeBase+path, accept, "")
				body, etag, contentType := get(t, oursBase+path, accept, "")
				if string(body) != string(wantBody) || etag != wantETag || contentType != wantType {
					t.Errorf("%s (protobuf %v): %d bytes, ETag %.12s, %s; the fake: %d bytes, ETag %.12s, %s",
						path, protobuf, len(body), etag, contentType, len(wantBody), wantETag, wantType)
				}
				if _, _, status := get(t, oursBase+path, accept, etag); status != "304" {
					t.Errorf("%s with If-None-Match of its ETag: %s, want 304", path, status)
				}
			}
		}
	}
	compare(t)
	wantVersion, _, _ := get(t, fakeBase+"/version", "application/json", "")
	if version, _, _ := get(t, oursBase+"/version", "application/json", ""); string(version) != string(wantVersion) {
		t.Errorf("/version: %s; the fake: %s", version, wantVersion)
	}
	crd := discoverytest.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "Thing", Namespaced: true, Status: true}
	if err := fake.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	if err := ours.AddCRD(docserver.CRD{Group: crd.Group, Versions: crd.Versions, Kind: crd.Kind, Namespaced: true, Status: true}); err != nil {
		t.Fatal(err)
	}
	compare(t)
	stale := apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Freshness: apidiscoveryv2.DiscoveryFreshnessStale}
	gv := schema.GroupVersion{Group: "g001.stress.example.com", Version: "v1beta1"}
	if err := fake.SetGroupVersion(gv.Group, stale); err != nil {
		t.Fatal(err)
	}
	if err := ours.SetGroupVersion(gv.Group, stale); err != nil {
		t.Fatal(err)
	}
	compare(t)

	// What the core's tests do with it since they moved beside the code
	// (docs/testing.md): a new group-version with no freshness given, a
	// CRD gaining a preferred version, a group-version gone stale and
	// back, a CRD deleted.
	metrics := apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Resources: []apidiscoveryv2.APIResourceDiscovery{{
		Resource: "pods", ResponseKind: &metav1.GroupVersionKind{Group: "metrics.k8s.io", Version: "v1beta1", Kind: "PodMetrics"},
		Scope: apidiscoveryv2.ScopeNamespace, Verbs: []string{"get", "list"},
	}}}
	if err := fake.SetGroupVersion("metrics.k8s.io", metrics); err != nil {
		t.Fatal(err)
	}
	if err := ours.SetGroupVersion("metrics.k8s.io", metrics); err != nil {
		t.Fatal(err)
	}
	compare(t)
	crd.Versions = []string{"v2", "v1"}
	if err := fake.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	if err := ours.AddCRD(docserver.CRD{Group: crd.Group, Versions: crd.Versions, Kind: crd.Kind, Namespaced: true, Status: true}); err != nil {
		t.Fatal(err)
	}
	compare(t)
	for _, stale := range []bool{true, false} {
		gv := schema.GroupVersion{Group: "g002.stress.example.com", Version: "v1"}
		if err := fake.SetStale(gv, stale); err != nil {
			t.Fatal(err)
		}
		if err := ours.SetStale(gv, stale); err != nil {
			t.Fatal(err)
		}
		compare(t)
	}
	for _, del := range []struct{ group, plural string }{{crd.Group, "things"}, {"g003.stress.example.com", "widget0003s"}} {
		if err := fake.RemoveCRD(del.group, del.plural); err != nil {
			t.Fatal(err)
		}
		if err := ours.RemoveCRD(del.group, del.plural); err != nil {
			t.Fatal(err)
		}
		compare(t)
	}
}

// get returns a response's body, ETag and Content-Type; with ifNoneMatch,
// its body, ETag and status code.
func get(t *testing.T, url, accept, ifNoneMatch string) ([]byte, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ifNoneMatch != "" {
		return body, resp.Header.Get("ETag"), resp.Status[:3]
	}
	return body, resp.Header.Get("ETag"), resp.Header.Get("Content-Type")
}
