package typed_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// serveOne serves a root of one group-version, apis/x/v1, whose document
// is doc at the ?hash= of its bytes, and counts the document's downloads.
func serveOne(t testing.TB, doc []byte) (base string, downloads *atomic.Int64) {
	downloads = new(atomic.Int64)
	hash := fmt.Sprintf("%X", sha512.Sum512(doc))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/openapi/v3" {
			fmt.Fprintf(w, `{"paths":{"apis/x/v1":{"serverRelativeURL":"/openapi/v3/apis/x/v1?hash=%s"}}}`, hash)
			return
		}
		downloads.Add(1)
		w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, downloads
}

// kindDoc is a document of the kind x/v1 W whose field "list" is a list
// with the given extensions (raw JSON members), of elements E.
func kindDoc(list string, extraProperties int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"openapi":"3.0.0","components":{"schemas":{"W":{"type":"object",` +
		`"x-kubernetes-group-version-kind":[{"group":"x","version":"v1","kind":"W"}],"properties":{` +
		`"apiVersion":{"type":"string"},"kind":{"type":"string"},"list":{"type":"array","items":{"$ref":"#/components/schemas/E"}` + list + `}`)
	for i := range extraProperties {
		fmt.Fprintf(&b, `,"prop%07d":{"type":"string"}`, i)
	}
	b.WriteString(`}},"E":{"type":"object","properties":{"name":{"type":"string"},"obj":{"type":"object"}}}}}}`)
	return b.Bytes()
}

var wGVK = schema.GroupVersionKind{Group: "x", Version: "v1", Kind: "W"}

func wObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": "W", "list": []any{map[string]any{"name": "a"}}}}
}

// TestPatchMetaRefusesHostileDocuments (issue 43, finding 3): through the
// client, a kind whose metadata would make CreateThreeWayMergePatch panic
// is an ErrPatchMeta naming the kind and the field; the same kind with
// well-formed metadata is handed on, and converts.
func TestPatchMetaRefusesHostileDocuments(t *testing.T) {
	for _, tc := range []struct{ name, list string }{
		{"numeric merge key", `,"x-kubernetes-patch-merge-key":7,"x-kubernetes-patch-strategy":"merge"`},
		{"numeric strategy", `,"x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":1`},
		{"object merge key", `,"x-kubernetes-patch-merge-key":"obj","x-kubernetes-patch-strategy":"merge"`},
		{"unknown strategy", `,"x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge,sideways"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := serveOne(t, kindDoc(tc.list, 0))
			conv := newConverter(t, newClientOf(t, base))
			_, err := conv.PatchMeta(context.Background(), wGVK)
			if !errors.Is(err, typed.ErrPatchMeta) || !strings.Contains(err.Error(), "x/v1, Kind=W") || !strings.Contains(err.Error(), "list") {
				t.Fatalf("err = %v, want ErrPatchMeta naming the kind and the field", err)
			}
		})
	}
	base, _ := serveOne(t, kindDoc(`,"x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge"`, 0))
	conv := newConverter(t, newClientOf(t, base))
	if _, err := conv.PatchMeta(context.Background(), wGVK); err != nil {
		t.Fatal(err)
	}
	if _, err := conv.ObjectToTyped(wObject()); err != nil {
		t.Fatal(err)
	}
}

// TestObjectToTypedHostileDocuments (issue 43, finding 3): ObjectToTyped
// over a kind of more properties than the default bound is refused before
// it is parsed (a million took it to 1.7-1.9 GB; openapi3's
// TestMillionPropertiesRefusedBeforeParsing serves those, this one just
// past the bound, to stay quick under the race detector), and over a
// document that fails at its end downloads it once, however often it is
// called (it was 181 times in 10 s).
func TestObjectToTypedHostileDocuments(t *testing.T) {
	t.Run("past the properties bound", func(t *testing.T) {
		base, _ := serveOne(t, kindDoc("", openapi3.DefaultMaxProperties))
		conv := newConverter(t, newClientOf(t, base))
		_, err := conv.ObjectToTyped(wObject())
		var le *openapi3.LimitError
		if !errors.As(err, &le) || le.Limit != "properties" {
			t.Fatalf("err = %v, want the properties bound", err)
		}
	})
	t.Run("failing at its end", func(t *testing.T) {
		doc := append(bytes.Repeat([]byte(" "), 20<<20), kindDoc("", 0)...)
		base, downloads := serveOne(t, append(doc, ']'))
		conv := newConverter(t, newClientOf(t, base))
		for i := range 50 {
			_, err := conv.ObjectToTyped(wObject())
			if !errors.As(err, new(*openapi3.SyntaxError)) || (i > 0) != errors.Is(err, openapi3.ErrRemembered) {
				t.Fatalf("call %d: err = %v", i, err)
			}
		}
		if n := downloads.Load(); n != 1 {
			t.Fatalf("%d downloads, want 1", n)
		}
	})
}

func newClientOf(t testing.TB, base string) *openapi3.Client {
	t.Helper()
	c, err := openapi3.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
