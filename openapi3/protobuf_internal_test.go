package openapi3

import (
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// FuzzCheckGnostic: what checkGnostic passes, proto.Unmarshal decodes,
// into no more messages than it counted (a message field given twice is
// merged into one), and no deeper; what it refuses, it refuses for a bound
// or as errNotProtobuf.
func FuzzCheckGnostic(f *testing.F) {
	doc := &openapi_v3.Document{
		Openapi: "3.0.0",
		Components: &openapi_v3.Components{Schemas: &openapi_v3.SchemasOrReferences{AdditionalProperties: []*openapi_v3.NamedSchemaOrReference{
			{Name: "A", Value: &openapi_v3.SchemaOrReference{Oneof: &openapi_v3.SchemaOrReference_Schema{Schema: &openapi_v3.Schema{
				Type: "object", Required: []string{"b"}, MaxLength: 3, Maximum: 1.5,
				Properties: &openapi_v3.Properties{AdditionalProperties: []*openapi_v3.NamedSchemaOrReference{
					{Name: "b", Value: &openapi_v3.SchemaOrReference{Oneof: &openapi_v3.SchemaOrReference_Reference{Reference: &openapi_v3.Reference{XRef: "#/components/schemas/B"}}}},
				}},
				Not: &openapi_v3.Schema{Not: &openapi_v3.Schema{}},
			}}}},
		}}},
	}
	seed, err := proto.Marshal(doc)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{0xff, 0xff})
	f.Add([]byte{0x0a, 0x01, 0xff}) // openapi: not UTF-8
	lim := DocumentLimits{}.withDefaults()
	f.Fuzz(func(t *testing.T, b []byte) {
		stats, err := checkGnostic(b, &lim)
		if err != nil {
			if !errors.Is(err, errNotProtobuf) && !errors.As(err, new(*LimitError)) {
				t.Fatalf("error %v is neither a bound nor errNotProtobuf", err)
			}
			return
		}
		var d openapi_v3.Document
		if err := proto.Unmarshal(b, &d); err != nil {
			t.Fatalf("passed, does not decode: %v", err)
		}
		n, depth := messages(d.ProtoReflect(), 1)
		if n > stats.Objects || depth > stats.Depth {
			t.Fatalf("decoded %d messages %d deep, counted %+v", n, depth, stats)
		}
	})
}

// messages counts m's messages, m included, and how deep they nest.
func messages(m protoreflect.Message, depth int) (n, deepest int) {
	n, deepest = 1, depth
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		add := func(m protoreflect.Message) {
			c, d := messages(m, depth+1)
			n, deepest = n+c, max(deepest, d)
		}
		if fd.IsList() {
			for i := range v.List().Len() {
				add(v.List().Get(i).Message())
			}
		} else {
			add(v.Message())
		}
		return true
	})
	return n, deepest
}

// BenchmarkCheckGnostic: bounding kube-apiserver v1.36.3's api/v1 in
// protobuf (gnostic-models' encoding of its JSON) before decoding it, against
// the decoding it precedes.
func BenchmarkCheckGnostic(b *testing.B) {
	f, err := os.Open(filepath.Join("testdata", "k8s-v1.36.3", "openapi", "v3", "api", "v1.json.gz"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	js, err := io.ReadAll(r)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := openapi_v3.ParseDocument(js)
	if err != nil {
		b.Fatal(err)
	}
	body, err := proto.Marshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	lim := DocumentLimits{}.withDefaults()
	b.Run("check", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := checkGnostic(body, &lim); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(body, &openapi_v3.Document{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
