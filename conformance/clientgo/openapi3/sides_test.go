package openapi3

// What the kubeatlas side of a case is built from. Not part of upstream's
// files.

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	cgopenapi3 "k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	testutil "k8s.io/client-go/util/testing"

	"github.com/kubeatlas/kubeatlas/openapi3"
	oapiclientgo "github.com/kubeatlas/kubeatlas/openapi3/clientgo"
)

// newClient is kubeatlas's OpenAPI v3 client as client-go's interface:
// openapi3/clientgo.New(openapi3.New(cfg)).
func newClient(t *testing.T, cfg *rest.Config) openapi.Client {
	t.Helper()
	c, err := openapi3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return oapiclientgo.New(c)
}

// servePaths serves what a fake OpenAPI client holds as a kube-apiserver
// would (client-go's fake OpenAPI v3 server, on kube-openapi's handler3:
// a root of ?hash= URLs, each document at its hash) and returns kubeatlas's
// client over it. A path the fake holds no document for gets an empty
// one; a fake that fails fails the root with a 500.
func servePaths(t *testing.T, fake openapi.Client) openapi.Client {
	t.Helper()
	paths, err := fake.Paths()
	if err != nil {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}))
		t.Cleanup(srv.Close)
		return newClient(t, &rest.Config{Host: srv.URL})
	}
	dir := t.TempDir()
	for p, gv := range paths {
		body := []byte(`{"openapi":"3.0.0","info":{"title":"empty","version":"v0"},"paths":{}}`)
		if gv != nil {
			if body, err = gv.Schema("application/json"); err != nil {
				t.Fatal(err)
			}
		}
		file := filepath.Join(dir, filepath.FromSlash(p)+".json")
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := testutil.NewFakeOpenAPIV3Server(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.HttpServer.Close)
	if len(srv.ServedDocuments) != len(paths) {
		t.Fatalf("serving %d documents of %d", len(srv.ServedDocuments), len(paths))
	}
	return newClient(t, &rest.Config{Host: srv.HttpServer.URL})
}

// groupVersionNotFoundError is client-go's error for a group-version the
// root does not list, which only client-go's package can build (its field
// is unexported): upstream's tests write it as a literal.
func groupVersionNotFoundError(gv schema.GroupVersion) error {
	_, err := cgopenapi3.NewRoot(openapitest.NewFakeClient()).GVSpec(gv)
	return err
}
