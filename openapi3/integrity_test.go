package openapi3_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// mangler stands in front of a server and, while set, replaces the body of
// the responses to one path (headers kept: immutable, a year's Expires,
// the ETag), as a broken proxy or a damaged connection could.
type mangler struct {
	next http.Handler
	mu   sync.Mutex
	path string
	body func(real []byte) []byte
	hdr  map[string]string
}

func (m *mangler) set(path string, body func([]byte) []byte, hdr map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.path, m.body, m.hdr = path, body, hdr
}

func (m *mangler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	path, body, hdr := m.path, m.body, m.hdr
	m.mu.Unlock()
	if body == nil || r.URL.Path != path {
		m.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	m.next.ServeHTTP(rec, r)
	b := body(rec.Body.Bytes())
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(rec.Code)
	w.Write(b)
}

func mangled(t *testing.T) (*docserver.Server, *mangler, string) {
	srv, err := docserver.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	m := &mangler{next: srv}
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return srv, m, ts.URL
}

// TestBadDocumentsAreNeitherUsedNorStored: a 200 whose body is garbage,
// empty or cleanly cut short, at a ?hash= URL served as immutable for a
// year, fails the SHA-512 check: it is an error, it is not stored, and once
// the server is right again the document is read by the next process,
// instead of a year of failures. This process remembers the failure for
// that hash (a hostile server must not make it download a document again
// and again), until the root names another.
func TestBadDocumentsAreNeitherUsedNorStored(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func([]byte) []byte
		hdr  map[string]string
	}{
		{"garbage", func([]byte) []byte { return []byte("<html>proxy error</html>") }, nil},
		{"empty", func([]byte) []byte { return nil }, nil},
		{"cut short", func(b []byte) []byte { return b[:len(b)/2] }, nil},
		{"valid JSON, other bytes", func([]byte) []byte { return []byte(`{"openapi":"3.0.0","paths":{},"components":{"schemas":{}}}`) }, nil},
		{"garbage claiming to come from a cache", func([]byte) []byte { return []byte("{}") }, map[string]string{"X-From-Cache": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m, base := mangled(t)
			dir := t.TempDir()
			for _, withCache := range []bool{false, true} {
				var opts []openapi3.Option
				var dc *diskcache.Cache
				if withCache {
					var err error
					if dc, err = diskcache.Open(dir, base); err != nil {
						t.Fatal(err)
					}
					opts = append(opts, openapi3.WithDiskCache(dc))
				}
				m.set("/openapi/v3/apis/apps/v1", tc.body, tc.hdr)
				c := newClient(t, base, opts...)
				ctx := context.Background()
				if _, err := c.Document(ctx, "apis/apps/v1"); !errors.Is(err, openapi3.ErrHashMismatch) {
					t.Fatalf("cache %v: err = %v, want ErrHashMismatch", withCache, err)
				}
				if dc != nil && dc.Stats().Writes != 0 {
					t.Fatalf("a bad document was stored: %+v", dc.Stats())
				}
				m.set("", nil, nil)
				if _, err := c.Document(ctx, "apis/apps/v1"); !errors.Is(err, openapi3.ErrRemembered) || !errors.Is(err, openapi3.ErrHashMismatch) {
					t.Fatalf("cache %v: after the server recovered: err = %v, want the mismatch remembered", withCache, err)
				}
				if _, err := newClient(t, base, opts...).Document(ctx, "apis/apps/v1"); err != nil {
					t.Fatalf("cache %v: a new client, after the server recovered: %v", withCache, err)
				}
				if withCache {
					next := newClient(t, base, openapi3.WithDiskCache(dc))
					if d, err := next.Document(ctx, "apis/apps/v1"); err != nil || d == nil {
						t.Fatalf("the next process: %v", err)
					}
				}
			}
		})
	}
}

// TestBrokenRootIsNotStored: a root sent with an ETag and Last-Modified
// (real servers send neither) but an empty or garbage body is not stored,
// so it cannot be served again on a 304.
func TestBrokenRootIsNotStored(t *testing.T) {
	for _, body := range []string{"", "not json", `{"paths":`} {
		_, m, base := mangled(t)
		dc, err := diskcache.Open(t.TempDir(), base)
		if err != nil {
			t.Fatal(err)
		}
		m.set("/openapi/v3", func([]byte) []byte { return []byte(body) },
			map[string]string{"ETag": `"root"`, "Last-Modified": "Mon, 23 Nov 2026 00:00:00 GMT", "Cache-Control": "public"})
		if _, err := newClient(t, base, openapi3.WithDiskCache(dc)).Paths(context.Background()); err == nil {
			t.Fatalf("root %q: no error", body)
		}
		if st := dc.Stats(); st.Writes != 0 {
			t.Fatalf("root %q was stored: %+v", body, st)
		}
		m.set("", nil, nil)
		paths, err := newClient(t, base, openapi3.WithDiskCache(dc)).Paths(context.Background())
		if err != nil || paths["apis/apps/v1"] == "" {
			t.Fatalf("after the server recovered (root %q): %v", body, err)
		}
	}
}

// TestBadProtobufIsNotStored: the protobuf form has no hash to check, so
// it is stored only once it decodes. The client that read the garbage
// remembers it for that hash (as a JSON document that does not parse); a
// new one reads the good document and stores it.
func TestBadProtobufIsNotStored(t *testing.T) {
	_, m, base := mangled(t)
	dc, err := diskcache.Open(t.TempDir(), base)
	if err != nil {
		t.Fatal(err)
	}
	m.set("/openapi/v3/apis/apps/v1", func([]byte) []byte { return []byte("\xff\xff\xff garbage") }, nil)
	c := newClient(t, base, openapi3.WithDiskCache(dc))
	if _, err := c.Gnostic(context.Background(), "apis/apps/v1"); err == nil {
		t.Fatal("garbage protobuf decoded")
	}
	if st := dc.Stats(); st.Writes != 0 {
		t.Fatalf("garbage protobuf stored: %+v", st)
	}
	m.set("", nil, nil)
	if _, err := c.Gnostic(context.Background(), "apis/apps/v1"); !errors.Is(err, openapi3.ErrRemembered) {
		t.Fatalf("the same client, after the server recovered: err = %v, want the failure remembered", err)
	}
	if _, err := newClient(t, base, openapi3.WithDiskCache(dc)).Gnostic(context.Background(), "apis/apps/v1"); err != nil {
		t.Fatal(err)
	}
	if dc.Stats().Writes == 0 {
		t.Error("a good protobuf document was not stored")
	}
}

// keyRecorder is a Store that records the keys it was given to keep.
type keyRecorder struct {
	diskcache.Store
	mu   sync.Mutex
	puts []diskcache.Key
}

func (r *keyRecorder) Put(k diskcache.Key, v []byte) error {
	r.mu.Lock()
	r.puts = append(r.puts, k)
	r.mu.Unlock()
	return r.Store.Put(k, v)
}

// TestOneDocumentPerGroupVersionStored: openapi3 names a document in the
// store by its path and Accept, with its ?hash= as the Version, so that
// after schema churn, whether one process saw every hash or each round was
// a new process, the store holds one document per group-version and
// Accept, the live one; a JSON document, verified against its hash, is
// Content. (The recorder is not a *diskcache.Cache, so a protobuf
// document, which no hash can check, is not kept in it at all.)
func TestOneDocumentPerGroupVersionStored(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	ctx := context.Background()
	dir := t.TempDir()
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	var rec *keyRecorder
	round := func() (*diskcache.Cache, int) {
		dc, err := diskcache.Open(dir, base)
		if err != nil {
			t.Fatal(err)
		}
		rec = &keyRecorder{Store: dc}
		c := newClient(t, base, openapi3.WithDiskCache(rec))
		docs, err := c.FetchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Gnostic(ctx, openapi3.PathFor(apps)); err != nil {
			t.Fatal(err)
		}
		return dc, len(docs)
	}
	for i := range 4 {
		dc, n := round()
		if _, entries := dc.Usage(); entries != n {
			t.Errorf("round %d: %d entries for %d JSON documents (and one protobuf, not kept)", i, entries, n)
		}
		if err := srv.ChangeSchema(apps); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := newClient(t, base).Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	round()
	live, _ := url.Parse(paths[openapi3.PathFor(apps)])
	for _, k := range rec.puts {
		if wantContent := strings.HasSuffix(k.Name, "\napplication/json"); k.Version != live.Query().Get("hash") || !strings.HasPrefix(k.Name, live.Path+"\n") || k.Content != wantContent {
			t.Errorf("stored under %+v, want the Name %s and its Accept, the Version %s, Content %v", k, live.Path, live.Query().Get("hash"), wantContent)
		}
	}
	if len(rec.puts) != 1 {
		t.Errorf("after one change, %d documents stored, want apps/v1's JSON", len(rec.puts))
	}
}

// TestOtherContentTypesAreNotStored: a document at a ?hash= URL (served
// as immutable for a year) in a content type other than the one asked
// for, its bytes the real document's, is refused and not stored, so that
// once the server is right again the next process reads it instead of a
// year of failures: text/plain, octet-stream and HTML, for JSON and for
// protobuf, and JSON for protobuf (whose bytes no hash check of a
// protobuf request covers).
func TestOtherContentTypesAreNotStored(t *testing.T) {
	const path = "apis/apps/v1"
	_, _, probeBase := mangled(t)
	jsonDoc, err := newClient(t, probeBase).Document(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	asks := map[string]func(*openapi3.Client) error{
		"JSON": func(c *openapi3.Client) error {
			_, err := c.Document(context.Background(), path)
			return err
		},
		"protobuf": func(c *openapi3.Client) error {
			_, err := c.Gnostic(context.Background(), path)
			return err
		},
	}
	for _, tc := range []struct {
		ask, contentType string
		body             func([]byte) []byte
	}{
		{"JSON", "text/plain; charset=utf-8", nil},
		{"JSON", "application/octet-stream", nil},
		{"JSON", "text/html", nil},
		{"protobuf", "text/plain; charset=utf-8", nil},
		{"protobuf", "application/octet-stream", nil},
		{"protobuf", "text/html", nil},
		{"protobuf", "application/json", func([]byte) []byte { return jsonDoc.JSON }},
	} {
		t.Run(tc.ask+" as "+tc.contentType, func(t *testing.T) {
			_, m, base := mangled(t)
			dc, err := diskcache.Open(t.TempDir(), base)
			if err != nil {
				t.Fatal(err)
			}
			body := tc.body
			if body == nil {
				body = func(b []byte) []byte { return b }
			}
			m.set("/openapi/v3/"+path, body, map[string]string{"Content-Type": tc.contentType})
			if err := asks[tc.ask](newClient(t, base, openapi3.WithDiskCache(dc))); !errors.Is(err, openapi3.ErrContentType) {
				t.Fatalf("err = %v, want ErrContentType", err)
			}
			if st := dc.Stats(); st.Writes != 0 {
				t.Fatalf("a %s answer to a request for %s was stored: %+v", tc.contentType, tc.ask, st)
			}
			m.set("", nil, nil)
			if err := asks[tc.ask](newClient(t, base, openapi3.WithDiskCache(dc))); err != nil {
				t.Fatalf("the next process, once the server is right: %v", err)
			}
		})
	}
}
