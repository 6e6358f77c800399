package typed_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/discovery"
	cgopenapi3 "k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// The kinds of upstream's strategic-merge-patch test documents, each
// served as a group-version of its own. Upstream's documents list no
// kind; the server adds the x-kubernetes-group-version-kind a real
// server's documents carry, by which kubectl and PatchMeta find a kind's
// schema. Nothing else of them changes.
var (
	mergeItemKind     = schema.GroupVersionKind{Group: "mergeitem.strategicpatch.test", Version: "v1", Kind: "MergeItem"}
	precisionItemKind = schema.GroupVersionKind{Group: "precisionitem.strategicpatch.test", Version: "v1", Kind: "PrecisionItem"}
)

// upstreamDocuments: the kind, the file and the schema of each document.
var upstreamDocuments = []struct {
	gvk          schema.GroupVersionKind
	file, schema string
}{
	{mergeItemKind, "swagger-merge-item-v3.json", "mergeItem"},
	{precisionItemKind, "swagger-precision-item-v3.json", "precisionItem"},
}

// namedPatchMeta names the path a LookupPatchMeta came by, for the
// subtests' names and the upstream messages (getSchemaType); it passes
// every lookup through.
type namedPatchMeta struct {
	strategicpatch.LookupPatchMeta
	name string
}

func (n namedPatchMeta) Name() string { return n.name }

// upstreamPatchMetas serves upstream's two documents through kube-openapi's
// handler3, as a kube-apiserver does, and returns gvk's patch metadata by
// client-go's path (openapi3.NewRoot(...).GVSpec and a
// PatchMetaFromOpenAPIV3 of the kind's schema, as kubectl's
// buildStrategicMergePatchFromOpenAPIV3 builds it) and by ours
// (typed.Converter.PatchMeta over an openapi3.Client of the server).
func upstreamPatchMetas(t *testing.T, gvk schema.GroupVersionKind) []strategicpatch.LookupPatchMeta {
	t.Helper()
	svc := handler3.NewOpenAPIService()
	for _, d := range upstreamDocuments {
		b, err := os.ReadFile(filepath.Join("testdata", "strategicpatch", d.file))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		s := doc["components"].(map[string]any)["schemas"].(map[string]any)[d.schema].(map[string]any)
		s["x-kubernetes-group-version-kind"] = []any{map[string]any{"group": d.gvk.Group, "version": d.gvk.Version, "kind": d.gvk.Kind}}
		if b, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		var o spec3.OpenAPI
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		svc.UpdateGroupVersion("apis/"+d.gvk.Group+"/"+d.gvk.Version, &o)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/openapi/v3":
			svc.HandleDiscovery(w, r)
		case strings.HasPrefix(r.URL.Path, "/openapi/v3/"):
			svc.HandleGroupVersion(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	kubectl := kubectlPatchMeta(t, cgopenapi3.NewRoot(dc.OpenAPIV3()), gvk)

	c, err := openapi3.NewForHTTPClient(nil, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newConverter(t, c).PatchMeta(context.Background(), gvk)
	if err != nil {
		t.Fatal(err)
	}
	return []strategicpatch.LookupPatchMeta{
		namedPatchMeta{kubectl, "client-go"},
		namedPatchMeta{ours, "kubeatlas"},
	}
}
