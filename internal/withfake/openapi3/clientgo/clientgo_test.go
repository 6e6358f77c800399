package clientgo_test

import (
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// TestHostileProtobufSchema (issue 43, finding 3): the protobuf document
// the adapter hands to kube-openapi's parsers came through
// openapi3.Client.Raw unchecked, and was downloaded again on every call.
// Now one over the client's DocumentLimits is refused, as the JSON form
// is, with an error naming the group-version, before any of it is
// decoded, and downloaded once for its hash.
func TestHostileProtobufSchema(t *testing.T) {
	all := make([]*openapi_v3.SchemaOrReference, 1000)
	for i := range all {
		all[i] = &openapi_v3.SchemaOrReference{Oneof: &openapi_v3.SchemaOrReference_Schema{Schema: &openapi_v3.Schema{}}}
	}
	doc, err := proto.Marshal(&openapi_v3.Document{Openapi: "3.0.0", Components: &openapi_v3.Components{Schemas: &openapi_v3.SchemasOrReferences{
		AdditionalProperties: []*openapi_v3.NamedSchemaOrReference{{Name: "A", Value: &openapi_v3.SchemaOrReference{
			Oneof: &openapi_v3.SchemaOrReference_Schema{Schema: &openapi_v3.Schema{AllOf: all}}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var downloads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi/v3" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"paths":{"apis/x/v1":{"serverRelativeURL":"/openapi/v3/apis/x/v1?hash=%X"}}}`, sha512.Sum512(doc))
			return
		}
		downloads.Add(1)
		w.Header().Set("Content-Type", openapi3.ProtobufTypeDeprecated)
		w.Write(doc)
	}))
	defer srv.Close()
	c, err := openapi3.NewForHTTPClient(nil, srv.URL, openapi3.WithDocumentLimits(openapi3.DocumentLimits{Objects: 500}))
	if err != nil {
		t.Fatal(err)
	}
	paths, err := clientgo.New(c).Paths()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_, err := paths["apis/x/v1"].Schema("application/com.github.proto-openapi.spec.v3@v1.0+protobuf")
		var le *openapi3.LimitError
		if !errors.As(err, &le) || le.Limit != "objects" || !strings.Contains(err.Error(), "apis/x/v1") {
			t.Fatalf("call %d: err = %v, want the objects bound, naming apis/x/v1", i, err)
		}
	}
	if n := downloads.Load(); n != 1 {
		t.Fatalf("%d downloads of one hash, want 1", n)
	}
}
