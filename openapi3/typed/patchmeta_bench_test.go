package typed

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// BenchmarkPatchMeta: kubectl apply's three-way strategic merge patch of a
// Deployment (its containers, their env and ports merged by their keys)
// through PatchMeta's answer (patchMeta, which records each lookup's way
// from the kind's schema for a field it may lack, one allocation each), against strategicpatch's
// PatchMetaFromOpenAPIV3 of the same schema alone: what a lookup costs
// that finds its field.
func BenchmarkPatchMeta(b *testing.B) {
	f, err := os.Open(filepath.Join("..", "testdata", "k8s-v1.36.3", "openapi", "v3", "apis", "apps", "v1.json.gz"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		b.Fatal(err)
	}
	d, err := openapi3.NewDocument("apis/apps/v1", "", body)
	if err != nil {
		b.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	meta, err := checkedPatchMeta(d, gvk)
	if err != nil {
		b.Fatal(err)
	}
	deployment := func(image string, extra ...string) []byte {
		containers := `{"name":"app","image":"` + image + `","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],"ports":[{"containerPort":80,"protocol":"TCP"}]}`
		for _, c := range extra {
			containers += `,{"name":"` + c + `","image":"` + c + `"}`
		}
		return []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{"app":"d"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[` + containers + `]}}}}`)
	}
	original, modified, current := deployment("v1"), deployment("v2", "log"), deployment("v1", "injected")
	for _, c := range []struct {
		name string
		meta strategicpatch.LookupPatchMeta
	}{
		{"PatchMetaFromOpenAPIV3", meta},
		{"kubeatlas", &patchMeta{meta: meta, doc: d, kind: &patchKind{gvk: gvk}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, c.meta, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
