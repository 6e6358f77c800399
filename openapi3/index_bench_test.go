package openapi3_test

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// BenchmarkNewDocument: indexing kube-apiserver v1.36.3's largest document,
// api/v1 (descriptions emptied), as the client does with each document it
// reads; the index counts what DocumentLimits bounds as it goes.
func BenchmarkNewDocument(b *testing.B) {
	f, err := os.Open(filepath.Join("testdata", "k8s-v1.36.3", "openapi", "v3", "api", "v1.json.gz"))
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
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openapi3.NewDocument("api/v1", "", body); err != nil {
			b.Fatal(err)
		}
	}
}
