package clientgo_test

import (
	"context"
	"testing"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgopenapi3 "k8s.io/client-go/openapi3"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/clientgo"
)

func newAdapter(t *testing.T) (*discoverytest.Server, *openapi3.Client) {
	t.Helper()
	srv, base := discoverytest.Start(t)
	c, err := openapi3.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// TestClientGoRoot: client-go's openapi3.Root runs on kubeatlas.
func TestClientGoRoot(t *testing.T) {
	_, c := newAdapter(t)
	root := cgopenapi3.NewRoot(clientgo.New(c))
	gvs, err := root.GroupVersions()
	if err != nil || len(gvs) < 20 {
		t.Fatalf("GroupVersions: %v %v", gvs, err)
	}
	doc, err := root.GVSpec(schema.GroupVersion{Group: "apps", Version: "v1"})
	if err != nil || doc.Components.Schemas["io.k8s.api.apps.v1.Deployment"] == nil {
		t.Fatalf("GVSpec: %v", err)
	}
	s, err := root.GVSpecAsMap(schema.GroupVersion{Group: "batch", Version: "v1"})
	if err != nil || s["openapi"] != "3.0.0" {
		t.Errorf("GVSpecAsMap: %v", err)
	}
}

// TestProtobufSchema: a group-version's Schema in protobuf is the
// server's protobuf document (gnostic parses it), and in JSON the document
// kubeatlas keeps.
func TestProtobufSchema(t *testing.T) {
	_, c := newAdapter(t)
	paths, err := clientgo.New(c).Paths()
	if err != nil {
		t.Fatal(err)
	}
	gv, ok := paths["apis/apps/v1"]
	if !ok {
		t.Fatalf("no apis/apps/v1 in %d paths", len(paths))
	}
	pb, err := gv.Schema("application/com.github.proto-openapi.spec.v3@v1.0+protobuf")
	if err != nil {
		t.Fatal(err)
	}
	var doc openapi_v3.Document
	if err := proto.Unmarshal(pb, &doc); err != nil || doc.Components == nil {
		t.Fatalf("protobuf document: %v", err)
	}
	js, err := gv.Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.Document(context.Background(), "apis/apps/v1")
	if err != nil || string(js) != string(kept.JSON) {
		t.Errorf("JSON schema is not the kept document: %v", err)
	}
}
