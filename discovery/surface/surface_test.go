package surface_test

import (
	"io"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestDecodeAggregatedFormsAgree: the recorded v1.36.3 /apis, with CRDs,
// decodes to the same surface from JSON and from protobuf; the JSON
// document is verified against its ETag, a changed ETag is not, and a
// protobuf one cannot be. A legacy type is refused.
func TestDecodeAggregatedFormsAgree(t *testing.T) {
	_, base := docserver.Start(t, docserver.WithCRDs(50, 5))
	get := func(accept string) (body []byte, contentType, etag string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/apis", nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		return body, resp.Header.Get("Content-Type"), resp.Header.Get("ETag")
	}
	jb, jct, etag := get(surface.Source{Format: surface.FormatAggregatedV2}.MediaType(""))
	pb, pct, _ := get(surface.Source{Format: surface.FormatAggregatedV2, Protobuf: true}.MediaType(""))

	fromJSON, src, verified, err := surface.DecodeAggregated(jb, jct, etag)
	if err != nil || !verified || src != (surface.Source{Format: surface.FormatAggregatedV2}) {
		t.Fatalf("JSON: verified %v, source %v, err %v", verified, src, err)
	}
	if _, _, verified, _ := surface.DecodeAggregated(jb, jct, `"`+etag[2:]); verified {
		t.Error("the JSON document verified against another ETag")
	}
	fromPB, src, verified, err := surface.DecodeAggregated(pb, pct, etag)
	if err != nil || verified || src.String() != "aggregated/v2+protobuf" {
		t.Fatalf("protobuf: verified %v, source %v, err %v", verified, src, err)
	}
	if len(fromJSON) < 20 || !reflect.DeepEqual(fromJSON, fromPB) {
		t.Errorf("JSON and protobuf decode differently (%d and %d groups)", len(fromJSON), len(fromPB))
	}
	if _, _, _, err := surface.DecodeAggregated(jb, surface.Source{Format: surface.FormatLegacy}.MediaType(""), ""); err == nil {
		t.Error("a document labelled plain JSON (legacy discovery) decoded as aggregated")
	}
}

// TestDecodeLegacy: legacy discovery as client-go reads it: a group named
// by its versions' groupVersion, listed twice (one group, versions of
// both, in order), a preferred version not among the versions; a
// group-version's resources with their subresources folded in, and a
// subresource whose resource is not listed under a kindless parent.
func TestDecodeLegacy(t *testing.T) {
	groups, err := surface.DecodeLegacyGroups([]byte(`{"kind":"APIGroupList","apiVersion":"v1","groups":[
		{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}},
		{"versions":[{"groupVersion":"batch/v1"}],"preferredVersion":{"groupVersion":"batch/v2"}},
		{"name":"apps","versions":[{"groupVersion":"apps/v1beta1","version":"v1beta1"}]}]}`), surface.Source{Format: surface.FormatLegacy}.MediaType(""), false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range groups {
		for _, v := range g.Versions {
			got = append(got, schema.GroupVersion{Group: g.Name, Version: v.Version}.String())
		}
		got = append(got, "preferred "+g.LegacyPreferred())
	}
	want := []string{"apps/v1", "apps/v1beta1", "preferred v1", "batch/v1", "batch/v2", "preferred v2"}
	if !slices.Equal(got, want) {
		t.Errorf("groups: %v, want %v", got, want)
	}
	if _, err := surface.DecodeLegacyGroups([]byte(`{"kind":"Status","apiVersion":"v1"}`), surface.Source{Format: surface.FormatLegacy}.MediaType(""), false); err == nil {
		t.Error("a Status decoded as an APIGroupList")
	}

	gv := schema.GroupVersion{Group: "custom.metrics.k8s.io", Version: "v1beta1"}
	v, err := surface.DecodeLegacyVersion(gv, []byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"custom.metrics.k8s.io/v1beta1","resources":[
		{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["get"]},
		{"name":"widgets/status","namespaced":true,"kind":"Widget","verbs":["get"]},
		{"name":"pods/http_requests","namespaced":true,"kind":"MetricValueList","verbs":["get"]}]}`), surface.Source{Format: surface.FormatLegacy}.MediaType(""))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Resources) != 2 || v.Resources[0].Name != "widgets" || len(v.Resources[0].Subresources) != 1 ||
		v.Resources[1].Name != "pods" || !v.Resources[1].SubresourcesOnly() || v.Resources[1].Subresources[0].Name != "http_requests" {
		t.Errorf("resources: %+v", v.Resources)
	}
	if av, k := v.LegacyType(); av != "v1" || k != "APIResourceList" || v.Version != "v1beta1" || v.Freshness != surface.FreshnessCurrent {
		t.Errorf("version %q, type %q %q, freshness %v", v.Version, av, k, v.Freshness)
	}
	if _, err := surface.DecodeLegacyVersion(schema.GroupVersion{Group: "apps", Version: "v1"}, []byte(`{"kind":"APIResourceList","groupVersion":"batch/v1"}`), surface.Source{Format: surface.FormatLegacy}.MediaType("")); err == nil {
		t.Error("a document for batch/v1 decoded as apps/v1")
	}
}
