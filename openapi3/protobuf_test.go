package openapi3_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// pb builds gnostic-models' wire format by hand (a million messages
// marshalled from Go structs would cost the test what decoding costs the
// client), naming fields as gnostic-models' descriptors do.
type pb []byte

// field is m's field called name.
func field(m proto.Message, name string) protowire.Number {
	fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic(fmt.Sprintf("%T has no field %s", m, name))
	}
	return fd.Number()
}

// msg appends the message (or string) inner as m's field name.
func (b pb) msg(m proto.Message, name string, inner []byte) pb {
	b = protowire.AppendTag(b, field(m, name), protowire.BytesType)
	return protowire.AppendBytes(b, inner)
}

var (
	gDocument    = &openapi_v3.Document{}
	gComponents  = &openapi_v3.Components{}
	gSchemas     = &openapi_v3.SchemasOrReferences{}
	gNamed       = &openapi_v3.NamedSchemaOrReference{}
	gOrReference = &openapi_v3.SchemaOrReference{}
	gSchema      = &openapi_v3.Schema{}
	gProperties  = &openapi_v3.Properties{}
)

// named is a NamedSchemaOrReference of name and the Schema schema.
func named(name string, schema []byte) pb {
	return pb(nil).msg(gNamed, "name", []byte(name)).msg(gNamed, "value", pb(nil).msg(gOrReference, "schema", schema))
}

// pbDocument is a document whose components/schemas are entries (each a
// NamedSchemaOrReference).
func pbDocument(entries ...[]byte) []byte {
	var schemas pb
	for _, e := range entries {
		schemas = schemas.msg(gSchemas, "additional_properties", e)
	}
	return pb(nil).msg(gDocument, "openapi", []byte("3.0.0")).
		msg(gDocument, "components", pb(nil).msg(gComponents, "schemas", schemas))
}

// pbSchemaDoc is schemaDoc in protobuf: one schema, Big, of n properties
// of type string, and extra more empty schemas "S<i>".
func pbSchemaDoc(n, extra int) []byte {
	props := make(pb, 0, 32*n)
	str := pb(nil).msg(gSchema, "type", []byte("string"))
	for i := range n {
		props = props.msg(gProperties, "additional_properties", named(fmt.Sprintf("prop%07d", i), str))
	}
	entries := [][]byte{named("Big", pb(nil).msg(gSchema, "type", []byte("object")).msg(gSchema, "properties", props))}
	for i := range extra {
		entries = append(entries, named(fmt.Sprintf("S%d", i), nil))
	}
	return pbDocument(entries...)
}

// pbAllOf is a schema A whose allOf lists n empty schemas: 5 bytes and 2
// messages (a SchemaOrReference, its Schema) each, some 570 B decoded.
func pbAllOf(n int) []byte {
	entry := pb(nil).msg(gSchema, "all_of", pb(nil).msg(gOrReference, "schema", nil))
	return pbDocument(named("A", bytes.Repeat(entry, n)))
}

// pbNested is a schema A of depth nested nots.
func pbNested(depth int) []byte {
	var s pb
	for range depth {
		s = pb(nil).msg(gSchema, "not", s)
	}
	return pbDocument(named("A", s))
}

// pbHostile serves a root of one group-version, apis/x/v1, whose protobuf
// document is doc, at a ?hash= of its bytes (a new document is a new
// hash); it counts the document's requests.
type pbHostile struct {
	mu          sync.Mutex
	doc         []byte
	contentType string // of the document, ProtobufType if ""

	requests atomic.Int64
}

func (h *pbHostile) set(doc []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.doc = doc
}

func (h *pbHostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	doc, ct := h.doc, h.contentType
	h.mu.Unlock()
	if ct == "" {
		ct = openapi3.ProtobufType
	}
	hash := fmt.Sprintf("%X", sha512.Sum512(doc))
	if r.URL.Path == "/openapi/v3" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"paths":{"apis/x/v1":{"serverRelativeURL":"/openapi/v3/apis/x/v1?hash=%s"}}}`, hash)
		return
	}
	h.requests.Add(1)
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "public, immutable") // as kube-apiserver answers a ?hash= URL
	w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	w.Write(doc)
}

func newPBHostile(t testing.TB, doc []byte) (*pbHostile, string) {
	h := &pbHostile{doc: doc}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

// TestProtobufDocumentLimits: a protobuf document over any of its bounds
// is refused before it is decoded, by Gnostic and by Raw (which hands the
// bytes on to other parsers), with a *DocumentError naming its
// group-version and URL wrapping a *LimitError that names the bound;
// objects and depth at twice the JSON form's bound; one within them is
// read, and what Raw hands on decodes.
func TestProtobufDocumentLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		doc    []byte
		limits openapi3.DocumentLimits
		want   string // the bound passed, "" for none, "bytes" for ErrTooLarge
	}{
		// 1 document, components, schemas; 11 named, their 11 schemas or
		// references and 11 schemas, properties, 10 of each three: 68.
		{"within", pbSchemaDoc(10, 10), openapi3.DocumentLimits{Schemas: 11, Properties: 10, Objects: 34, Depth: 5}, ""},
		{"schemas", pbSchemaDoc(10, 10), openapi3.DocumentLimits{Schemas: 10}, "schemas"},
		{"properties", pbSchemaDoc(10, 10), openapi3.DocumentLimits{Properties: 9}, "properties"},
		{"objects", pbSchemaDoc(10, 10), openapi3.DocumentLimits{Objects: 33}, "objects"},
		{"objects of allOf", pbAllOf(1000), openapi3.DocumentLimits{Objects: 1000}, "objects"},
		{"depth", pbNested(200), openapi3.DocumentLimits{Depth: 100}, "depth"},
		{"depth within", pbNested(190), openapi3.DocumentLimits{Depth: 100}, ""},
		{"bytes", pbSchemaDoc(100, 0), openapi3.DocumentLimits{Bytes: 1000}, "bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base := newPBHostile(t, tc.doc)
			c := newClient(t, base, openapi3.WithDocumentLimits(tc.limits))
			ctx := context.Background()
			doc, err := c.Gnostic(ctx, "apis/x/v1")
			u, uerr := c.Paths(ctx)
			if uerr != nil {
				t.Fatal(uerr)
			}
			raw, rawErr := newClient(t, base, openapi3.WithDocumentLimits(tc.limits)).Raw(ctx, u["apis/x/v1"], openapi3.ProtobufTypeDeprecated)
			if tc.want == "" {
				if err != nil || rawErr != nil {
					t.Fatalf("Gnostic: %v; Raw: %v", err, rawErr)
				}
				if tc.name == "within" && len(doc.GetComponents().GetSchemas().GetAdditionalProperties()) != 11 {
					t.Fatalf("decoded %v", doc.GetComponents())
				}
				if err := proto.Unmarshal(raw, &openapi_v3.Document{}); err != nil {
					t.Fatalf("Raw handed on what does not decode: %v", err)
				}
				return
			}
			for name, err := range map[string]error{"Gnostic": err, "Raw": rawErr} {
				var de *openapi3.DocumentError
				if !errors.As(err, &de) || de.Path != "apis/x/v1" || !strings.HasPrefix(de.URL, "/openapi/v3/apis/x/v1?hash=") {
					t.Fatalf("%s: err = %v, want a DocumentError naming apis/x/v1 and its URL", name, err)
				}
				if !errors.Is(err, openapi3.ErrTooLarge) {
					t.Fatalf("%s: err = %v, want ErrTooLarge", name, err)
				}
				var le *openapi3.LimitError
				if tc.want == "bytes" {
					if errors.As(err, &le) {
						t.Fatalf("%s: err = %v, want the read's ErrTooLarge", name, err)
					}
					continue
				}
				if !errors.As(err, &le) || le.Limit != tc.want {
					t.Fatalf("%s: err = %v, want a LimitError of %s", name, err, tc.want)
				}
			}
		})
	}
}

// TestProtobufRefusedBeforeDecoding (issue 43, finding 3): 20 MB of
// empty allOf entries decode into some 2.3 GB of gnostic-models structs (a
// Schema is 456 B; a process decoding it peaked at 4.5 GB); with the
// default bounds the client refuses it for what it allocates reading the
// body, in Gnostic as in Raw.
func TestProtobufRefusedBeforeDecoding(t *testing.T) {
	doc := pbAllOf(4_000_000)
	_, base := newPBHostile(t, doc)
	ctx := context.Background()
	c := newClient(t, base)
	root, err := c.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gerr, rerr error
	n := allocated(func() {
		_, gerr = c.Gnostic(ctx, "apis/x/v1")
		_, rerr = newClient(t, base).Raw(ctx, root["apis/x/v1"], openapi3.ProtobufType)
	})
	for name, err := range map[string]error{"Gnostic": gerr, "Raw": rerr} {
		var le *openapi3.LimitError
		if !errors.As(err, &le) || le.Limit != "objects" {
			t.Fatalf("%s: err = %v, want the objects bound", name, err)
		}
	}
	// Two reads of the body, each into buffers that double, and the
	// server's side of the test allocating in this process too.
	if n > 160<<20 {
		t.Fatalf("allocated %d MB refusing a %d MB document twice", n>>20, len(doc)>>20)
	}
	t.Logf("allocated %d MB refusing a %d MB document twice", n>>20, len(doc)>>20)
}

// TestRawProtobufFailureIsRemembered: the protobuf document Raw hands to
// client-go and kube-openapi (openapi3/clientgo) was asked of the server
// on every call, whatever it held. A document over a bound, or that does
// not decode, is downloaded once for its hash, by concurrent and later
// callers, Raw and Gnostic alike, until the root names a new hash.
func TestRawProtobufFailureIsRemembered(t *testing.T) {
	for name, bad := range map[string][]byte{
		"over a bound":     pbSchemaDoc(20, 0),
		"does not decode":  {0xff, 0xff, 0xff},
		"a string not UTF": pb(nil).msg(gDocument, "openapi", []byte{0xff}),
	} {
		t.Run(name, func(t *testing.T) {
			h, base := newPBHostile(t, bad)
			clk := clocktesting.NewFakePassiveClock(time.Now())
			c := newClient(t, base, openapi3.WithClock(clk), openapi3.WithDocumentLimits(openapi3.DocumentLimits{Properties: 10}))
			ctx := context.Background()
			root, err := c.Paths(ctx)
			if err != nil {
				t.Fatal(err)
			}
			u := root["apis/x/v1"]
			if _, err := c.Raw(ctx, u, openapi3.ProtobufType); err == nil || errors.Is(err, openapi3.ErrRemembered) || !errors.As(err, new(*openapi3.DocumentError)) {
				t.Fatalf("first: err = %v, want a DocumentError, not remembered", err)
			}
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() {
					if _, err := c.Raw(ctx, u, openapi3.ProtobufTypeDeprecated); !errors.Is(err, openapi3.ErrRemembered) {
						t.Errorf("Raw again: err = %v, want it remembered", err)
					}
				})
			}
			wg.Wait()
			clk.SetTime(clk.Now().Add(time.Hour))
			if _, err := c.Gnostic(ctx, "apis/x/v1"); !errors.Is(err, openapi3.ErrRemembered) {
				t.Fatalf("Gnostic an hour later: err = %v, want it remembered", err)
			}
			if n := h.requests.Load(); n != 1 {
				t.Fatalf("%d downloads of one hash, want 1", n)
			}

			h.set(pbSchemaDoc(10, 0)) // a new hash, within the bounds
			root, err = c.RefreshRoot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Raw(ctx, root["apis/x/v1"], openapi3.ProtobufType); err != nil {
				t.Fatalf("the new hash: %v", err)
			}
			if n := h.requests.Load(); n != 2 {
				t.Fatalf("%d downloads, want 2", n)
			}
		})
	}
}

// TestDeprecatedProtobufType: a server before Kubernetes 1.27 answers
// with ProtobufTypeDeprecated, which mime.ParseMediaType refuses ("@" is
// not a token character): Gnostic took it for another content type, and
// Raw took client-go's request for it (openapi3/clientgo) for a request
// for something else, handed on unchecked. Both now read it as protobuf,
// and the disk cache stores it.
func TestDeprecatedProtobufType(t *testing.T) {
	h, base := newPBHostile(t, pbSchemaDoc(10, 0))
	h.contentType = openapi3.ProtobufTypeDeprecated
	dc, err := diskcache.Open(t.TempDir(), base)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	doc, err := newClient(t, base, openapi3.WithDiskCache(dc)).Gnostic(ctx, "apis/x/v1")
	if err != nil || len(doc.GetComponents().GetSchemas().GetAdditionalProperties()) != 1 {
		t.Fatalf("Gnostic: %v", err)
	}
	c := newClient(t, base, openapi3.WithDiskCache(dc))
	if _, err := c.Gnostic(ctx, "apis/x/v1"); err != nil {
		t.Fatal(err)
	}
	if n := h.requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1: the document was not stored", n)
	}

	h.set(pbSchemaDoc(20, 0)) // over the bound below, at a new hash
	c = newClient(t, base, openapi3.WithDocumentLimits(openapi3.DocumentLimits{Properties: 10}))
	root, err := c.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Raw(ctx, root["apis/x/v1"], openapi3.ProtobufTypeDeprecated); !errors.As(err, new(*openapi3.LimitError)) {
		t.Fatalf("Raw of %s: err = %v, want the properties bound", openapi3.ProtobufTypeDeprecated, err)
	}
}
