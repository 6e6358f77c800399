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

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// hostile serves a root of one group-version, apis/x/v1, whose document is
// what doc says at each moment, at a ?hash= URL of its bytes (so that a
// new body is a new hash), or the status fail says when it is not 0; it
// counts the document's requests.
type hostile struct {
	mu   sync.Mutex
	doc  []byte
	fail int

	requests atomic.Int64
}

func (h *hostile) set(doc []byte, fail int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.doc, h.fail = doc, fail
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	doc, fail := h.doc, h.fail
	h.mu.Unlock()
	hash := fmt.Sprintf("%X", sha512.Sum512(doc))
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/openapi/v3" {
		fmt.Fprintf(w, `{"paths":{"apis/x/v1":{"serverRelativeURL":"/openapi/v3/apis/x/v1?hash=%s"}}}`, hash)
		return
	}
	h.requests.Add(1)
	if fail != 0 {
		http.Error(w, "unavailable", fail)
		return
	}
	w.Header().Set("Cache-Control", "public, immutable")
	w.Header().Set("ETag", `"`+hash+`"`)
	w.Write(doc)
}

func newHostile(t testing.TB, doc []byte) (*hostile, string) {
	h := &hostile{doc: doc}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

// schemaDoc is a document of one schema, Big, of n properties (31 bytes
// each), and of extra more schemas "S<i>".
func schemaDoc(properties, extra int) []byte {
	var b bytes.Buffer
	b.Grow(32*properties + 16*extra + 128)
	b.WriteString(`{"openapi":"3.0.0","components":{"schemas":{"Big":{"type":"object","properties":{`)
	for i := range properties {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"prop%07d":{"type":"string"}`, i)
	}
	b.WriteString(`}}`)
	for i := range extra {
		fmt.Fprintf(&b, `,"S%d":{}`, i)
	}
	b.WriteString(`}}}`)
	return b.Bytes()
}

// TestDocumentLimits: a document over any of its bounds is refused with a
// *DocumentError naming its group-version and URL, wrapping a *LimitError
// that names the bound (ErrTooLarge for its bytes), and one within them is
// read; the bounds are counted as DocumentStats says.
func TestDocumentLimits(t *testing.T) {
	nested := func(depth int) []byte {
		return []byte(`{"components":{"schemas":{"A":` + strings.Repeat(`{"items":`, depth) + `{}` + strings.Repeat(`}`, depth) + `}}}`)
	}
	allOf := func(n int) []byte {
		return []byte(`{"components":{"schemas":{"A":{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{},`, n), ",") + `]}}}}`)
	}
	for _, tc := range []struct {
		name   string
		doc    []byte
		limits openapi3.DocumentLimits
		want   string // the bound passed, "" for none, "bytes" for ErrTooLarge
	}{
		{"within", schemaDoc(10, 10), openapi3.DocumentLimits{Schemas: 11, Properties: 10, Objects: 2 + 1 + 1 + 1 + 10 + 10, Depth: 6}, ""},
		{"schemas", schemaDoc(10, 10), openapi3.DocumentLimits{Schemas: 10}, "schemas"},
		{"properties", schemaDoc(10, 10), openapi3.DocumentLimits{Properties: 9}, "properties"},
		{"objects", allOf(1000), openapi3.DocumentLimits{Objects: 1000}, "objects"},
		{"depth", nested(100), openapi3.DocumentLimits{Depth: 100}, "depth"},
		{"bytes", schemaDoc(100, 0), openapi3.DocumentLimits{Bytes: 1000}, "bytes"}, // the root is 203
		// A property called "properties" is a property, not an object of them.
		{"a property called properties", []byte(`{"components":{"schemas":{"A":{"properties":{"properties":{"type":"string","x":1}}}}}}`), openapi3.DocumentLimits{Properties: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base := newHostile(t, tc.doc)
			c := newClient(t, base, openapi3.WithDocumentLimits(tc.limits))
			d, err := c.Document(context.Background(), "apis/x/v1")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s := d.Stats(); tc.name == "within" && (s != openapi3.DocumentStats{Schemas: 11, Properties: 10, Objects: 25, Depth: 6}) {
					t.Fatalf("stats %+v", s)
				}
				return
			}
			var de *openapi3.DocumentError
			if !errors.As(err, &de) || de.Path != "apis/x/v1" || !strings.HasPrefix(de.URL, "/openapi/v3/apis/x/v1?hash=") {
				t.Fatalf("err = %v, want a DocumentError naming apis/x/v1 and its URL", err)
			}
			if !strings.Contains(err.Error(), "apis/x/v1") || !strings.Contains(err.Error(), de.URL) {
				t.Fatalf("the error does not name the document: %v", err)
			}
			if !errors.Is(err, openapi3.ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			var le *openapi3.LimitError
			if tc.want == "bytes" {
				if errors.As(err, &le) {
					t.Fatalf("err = %v, want the read's ErrTooLarge", err)
				}
				return
			}
			if !errors.As(err, &le) || le.Limit != tc.want {
				t.Fatalf("err = %v, want a LimitError of %s", err, tc.want)
			}
		})
	}
}

// TestWithDocumentLimitsOption: negative bounds and a depth past the
// index's own are refused, and the option may be given once.
func TestWithDocumentLimitsOption(t *testing.T) {
	for _, l := range []openapi3.DocumentLimits{{Bytes: -1}, {Schemas: -1}, {Properties: -1}, {Objects: -1}, {Depth: -1}, {Depth: 1 << 20}} {
		if _, err := openapi3.NewForHTTPClient(nil, "http://127.0.0.1", openapi3.WithDocumentLimits(l)); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	if _, err := openapi3.NewForHTTPClient(nil, "http://127.0.0.1", openapi3.WithDocumentLimits(openapi3.DocumentLimits{}), openapi3.WithDocumentLimits(openapi3.DocumentLimits{})); err == nil {
		t.Error("WithDocumentLimits given twice was accepted")
	}
}

// TestMillionPropertiesRefusedBeforeParsing (issue 43, finding 3): one
// schema of a million properties (31 MB) took ObjectToTyped to 1.7-1.9 GB
// of memory. With the default bounds it is refused while it is indexed:
// what the client allocates is the body as read and the index's, well
// under the 256 MB a hostile document may cost.
func TestMillionPropertiesRefusedBeforeParsing(t *testing.T) {
	doc := schemaDoc(1_000_000, 0)
	if len(doc) < 30<<20 {
		t.Fatalf("the document is %d bytes", len(doc))
	}
	_, base := newHostile(t, doc)
	c := newClient(t, base)
	var err error
	n := allocated(func() { _, err = c.Document(context.Background(), "apis/x/v1") })
	var le *openapi3.LimitError
	if !errors.As(err, &le) || le.Limit != "properties" {
		t.Fatalf("err = %v, want the properties bound", err)
	}
	// The body is read into buffers that double (up to ~2x its size), and
	// the server's side of the test allocates in this process too.
	if n > 160<<20 {
		t.Fatalf("allocated %d MB refusing a %d MB document", n>>20, len(doc)>>20)
	}
	t.Logf("allocated %d MB refusing a %d MB document", n>>20, len(doc)>>20)
}

// TestFailedDocumentIsRemembered (issue 43, finding 3): a 20 MB document
// that fails to parse at its end was downloaded again on every call (181
// downloads in 10 s). Its failure is remembered for its hash: callers,
// concurrent or later, get the error back (ErrRemembered) with no request,
// however much time passes, until the root names a new hash, which is read.
func TestFailedDocumentIsRemembered(t *testing.T) {
	good := schemaDoc(10, 0)
	bad := append(bytes.Repeat([]byte(" "), 20<<20), good...)
	bad = append(bad, '}') // data after the document, at its very end
	h, base := newHostile(t, bad)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newClient(t, base, openapi3.WithClock(clk))
	ctx := context.Background()

	_, err := c.Document(ctx, "apis/x/v1")
	var syntax *openapi3.SyntaxError
	var de *openapi3.DocumentError
	if !errors.As(err, &syntax) || !errors.As(err, &de) || errors.Is(err, openapi3.ErrRemembered) {
		t.Fatalf("first: err = %v, want a DocumentError of a SyntaxError, not remembered", err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := c.Document(ctx, "apis/x/v1"); !errors.Is(err, openapi3.ErrRemembered) || !errors.As(err, new(*openapi3.SyntaxError)) {
				t.Errorf("again: err = %v, want the SyntaxError remembered", err)
			}
		})
	}
	wg.Wait()
	clk.SetTime(clk.Now().Add(time.Hour))
	if _, err := c.Document(ctx, "apis/x/v1"); !errors.Is(err, openapi3.ErrRemembered) {
		t.Fatalf("an hour later: err = %v, want it remembered", err)
	}
	if n := h.requests.Load(); n != 1 {
		t.Fatalf("%d downloads of one hash, want 1", n)
	}

	h.set(good, 0) // a new hash
	if _, err := c.RefreshRoot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Document(ctx, "apis/x/v1"); err != nil {
		t.Fatalf("the new hash: %v", err)
	}
	if n := h.requests.Load(); n != 2 {
		t.Fatalf("%d downloads, want 2", n)
	}
}

// TestFailureRetryAtMostOnceASecond: a failure that may pass (a 503, as an
// aggregated API server answers while it starts) is remembered for a
// second, then for twice as long after each failure again; a new hash is
// tried, but not within a second of the last failure; success forgets.
func TestFailureRetryAtMostOnceASecond(t *testing.T) {
	h, base := newHostile(t, schemaDoc(1, 0))
	h.set(schemaDoc(1, 0), http.StatusServiceUnavailable)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newClient(t, base, openapi3.WithClock(clk), openapi3.WithMaxRetries(0))
	ctx := context.Background()
	step := func(d time.Duration, wantRequests int64, wantRemembered bool) {
		t.Helper()
		clk.SetTime(clk.Now().Add(d))
		_, err := c.Document(ctx, "apis/x/v1")
		if errors.Is(err, openapi3.ErrRemembered) != wantRemembered || err == nil {
			t.Fatalf("after %v: err = %v, remembered: want %v", d, err, wantRemembered)
		}
		if n := h.requests.Load(); n != wantRequests {
			t.Fatalf("after %v: %d requests, want %d", d, n, wantRequests)
		}
	}
	step(0, 1, false)
	step(999*time.Millisecond, 1, true)
	step(time.Millisecond, 2, false) // 1s after the first
	step(time.Second, 2, true)       // the second failure waits 2s
	step(time.Second, 3, false)
	// A new hash within a second of the failure waits out the second.
	h.set(schemaDoc(2, 0), http.StatusServiceUnavailable)
	if _, err := c.RefreshRoot(ctx); err != nil {
		t.Fatal(err)
	}
	step(500*time.Millisecond, 3, true)
	step(500*time.Millisecond, 4, false)
	h.set(schemaDoc(2, 0), 0)
	clk.SetTime(clk.Now().Add(time.Second))
	if _, err := c.Document(ctx, "apis/x/v1"); err != nil {
		t.Fatalf("recovered: %v", err)
	}
}

// TestCallersContextEndIsNotRemembered: a fetch that ends because every
// caller left says nothing of the document: the next call asks again.
func TestCallersContextEndIsNotRemembered(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int64
	doc := schemaDoc(1, 0)
	hash := fmt.Sprintf("%X", sha512.Sum512(doc))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/openapi/v3" {
			fmt.Fprintf(w, `{"paths":{"apis/x/v1":{"serverRelativeURL":"/openapi/v3/apis/x/v1?hash=%s"}}}`, hash)
			return
		}
		if requests.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Write(doc)
	}))
	defer srv.Close()
	defer close(release)
	c := newClient(t, srv.URL)
	if _, err := c.Paths(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Document(ctx, "apis/x/v1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	if _, err := c.Document(context.Background(), "apis/x/v1"); err != nil {
		t.Fatalf("after the caller left: %v", err)
	}
}

// TestSharedDocumentWithinOwnLimits: a document another client read into
// a shared table (WithDocuments) within its bounds is still refused by a
// client whose own bounds it passes, without a request.
func TestSharedDocumentWithinOwnLimits(t *testing.T) {
	h, base := newHostile(t, schemaDoc(10, 0))
	table := openapi3.NewDocuments()
	ctx := context.Background()
	if _, err := newClient(t, base, openapi3.WithDocuments(table)).Document(ctx, "apis/x/v1"); err != nil {
		t.Fatal(err)
	}
	if table.Len() != 1 {
		t.Fatalf("the table holds %d documents", table.Len())
	}
	small := newClient(t, base, openapi3.WithDocuments(table), openapi3.WithDocumentLimits(openapi3.DocumentLimits{Properties: 9}))
	_, err := small.Document(ctx, "apis/x/v1")
	var le *openapi3.LimitError
	var de *openapi3.DocumentError
	if !errors.As(err, &le) || le.Limit != "properties" || !errors.As(err, &de) || de.Path != "apis/x/v1" {
		t.Fatalf("err = %v, want a DocumentError of the properties bound", err)
	}
	if n := h.requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// TestGnosticFailureIsRemembered: a protobuf document that does not decode
// is downloaded once for its hash, as a JSON one that does not parse; the
// JSON form's own fate is its own.
func TestGnosticFailureIsRemembered(t *testing.T) {
	doc := schemaDoc(1, 0)
	hash := fmt.Sprintf("%X", sha512.Sum512(doc))
	var pb, js atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi/v3" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"paths":{"apis/x/v1":{"serverRelativeURL":"/openapi/v3/apis/x/v1?hash=%s"}}}`, hash)
			return
		}
		if strings.Contains(r.Header.Get("Accept"), "protobuf") {
			pb.Add(1)
			w.Header().Set("Content-Type", openapi3.ProtobufType)
			w.Write([]byte{0xff, 0xff, 0xff}) // not protobuf
			return
		}
		js.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	ctx := context.Background()
	for i := range 10 {
		_, err := c.Gnostic(ctx, "apis/x/v1")
		var de *openapi3.DocumentError
		if !errors.As(err, &de) || de.Path != "apis/x/v1" || (i > 0) != errors.Is(err, openapi3.ErrRemembered) {
			t.Fatalf("call %d: err = %v", i, err)
		}
	}
	if _, err := c.Document(ctx, "apis/x/v1"); err != nil {
		t.Fatalf("the JSON form: %v", err)
	}
	if pb.Load() != 1 || js.Load() != 1 {
		t.Fatalf("%d protobuf and %d JSON downloads, want 1 each", pb.Load(), js.Load())
	}
}

// TestRawJSONWithinLimits: Raw, which openapi3/clientgo's callers and
// others hand on to parsers of their own, passed a JSON document on
// unchecked and asked for it again on every call. It now reads it as
// DocumentAt does: refused over its bounds with the same *DocumentError,
// remembered for its hash, Document and Raw alike, downloaded once.
func TestRawJSONWithinLimits(t *testing.T) {
	h, base := newHostile(t, schemaDoc(20, 0))
	c := newClient(t, base, openapi3.WithDocumentLimits(openapi3.DocumentLimits{Properties: 10}))
	ctx := context.Background()
	root, err := c.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u := root["apis/x/v1"]
	_, err = c.Raw(ctx, u, "application/json")
	var le *openapi3.LimitError
	var de *openapi3.DocumentError
	if !errors.As(err, &le) || le.Limit != "properties" || !errors.As(err, &de) || de.Path != "apis/x/v1" || de.URL != u {
		t.Fatalf("err = %v, want a DocumentError of apis/x/v1 over its properties bound", err)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := c.Raw(ctx, u, "application/json"); !errors.Is(err, openapi3.ErrRemembered) {
				t.Errorf("Raw again: err = %v, want it remembered", err)
			}
		})
	}
	wg.Wait()
	if _, err := c.Document(ctx, "apis/x/v1"); !errors.Is(err, openapi3.ErrRemembered) {
		t.Fatalf("Document: err = %v, want Raw's failure remembered", err)
	}
	if n := h.requests.Load(); n != 1 {
		t.Fatalf("%d downloads of one hash, want 1", n)
	}

	// Within the bounds, Raw's bytes are the document Document keeps.
	h.set(schemaDoc(10, 0), 0)
	c = newClient(t, base, openapi3.WithDocumentLimits(openapi3.DocumentLimits{Properties: 10}))
	if root, err = c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	body, err := c.Raw(ctx, root["apis/x/v1"], "application/json")
	if err != nil || !bytes.Equal(body, schemaDoc(10, 0)) {
		t.Fatalf("Raw: %v", err)
	}
	if d, err := c.Document(ctx, "apis/x/v1"); err != nil || &d.JSON[0] != &body[0] {
		t.Fatalf("Document after Raw: %v (the same bytes: %v)", err, err == nil && &d.JSON[0] == &body[0])
	}
	if n := h.requests.Load(); n != 2 {
		t.Fatalf("%d downloads, want 2", n)
	}
}

// rootOf is a root of n group-versions at ?hash= URLs, as kube-apiserver
// lists them.
func rootOf(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"paths":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"apis/g%05d.example.com/v1":{"serverRelativeURL":"/openapi/v3/apis/g%05d.example.com/v1?hash=%0128X"}`, i, i, i)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// TestRootPathsLimit: the root was bounded in bytes only: 64 MiB of empty
// paths is millions of them, each a map entry of the client's (and of
// client-go's, through openapi3/clientgo). A root over DocumentLimits.Paths
// is refused with a *LimitError naming the root, by Paths and Raw; the
// default bound takes a root of DefaultMaxPaths group-versions, 4.5 MB.
func TestRootPathsLimit(t *testing.T) {
	var served atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(*served.Load())
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		root   []byte
		limits openapi3.DocumentLimits
		over   bool
	}{
		{"within", rootOf(10), openapi3.DocumentLimits{Paths: 10}, false},
		{"over", rootOf(11), openapi3.DocumentLimits{Paths: 10}, true},
		// Paths without a URL count: each is a member the client reads.
		{"over, no URLs", []byte(`{"paths":{"a":{},"b":{},"c":{}}}`), openapi3.DocumentLimits{Paths: 2}, true},
		{"the default bound", rootOf(openapi3.DefaultMaxPaths), openapi3.DocumentLimits{}, false},
		{"past the default bound", rootOf(openapi3.DefaultMaxPaths + 1), openapi3.DocumentLimits{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served.Store(&tc.root)
			c := newClient(t, srv.URL, openapi3.WithDocumentLimits(tc.limits))
			root, err := c.Paths(ctx)
			_, rawErr := c.Raw(ctx, "/openapi/v3", "application/json")
			if !tc.over {
				if err != nil || rawErr != nil {
					t.Fatalf("Paths: %v; Raw: %v", err, rawErr)
				}
				if tc.name == "the default bound" {
					if len(root) != openapi3.DefaultMaxPaths || len(tc.root) > 5<<20 {
						t.Fatalf("%d paths in %d bytes", len(root), len(tc.root))
					}
					t.Logf("a root of %d paths: %d bytes", len(root), len(tc.root))
				}
				return
			}
			for name, err := range map[string]error{"Paths": err, "Raw": rawErr} {
				var le *openapi3.LimitError
				if !errors.As(err, &le) || le.Limit != "paths" || !errors.Is(err, openapi3.ErrTooLarge) {
					t.Fatalf("%s: err = %v, want a LimitError of paths", name, err)
				}
				if !strings.Contains(err.Error(), srv.URL+"/openapi/v3") {
					t.Fatalf("%s: the error does not name the root: %v", name, err)
				}
			}
		})
	}
}

// TestRootFailureIsRemembered: a client without a root read the root again
// on every call, so a root over its bounds (up to 64 MiB) was downloaded
// by every Paths, Document or Kind. Its failure is now remembered: asked
// again after 1s, then 2s, ... (a root has no hash to wait for a new one
// of); RefreshRoot reads it at once; a root read forgets it.
func TestRootFailureIsRemembered(t *testing.T) {
	var roots atomic.Int64
	var served atomic.Pointer[[]byte]
	over := rootOf(11)
	served.Store(&over)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		roots.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(*served.Load())
	}))
	defer srv.Close()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newClient(t, srv.URL, openapi3.WithClock(clk), openapi3.WithDocumentLimits(openapi3.DocumentLimits{Paths: 10}))
	ctx := context.Background()
	step := func(d time.Duration, wantRoots int64, wantRemembered bool) {
		t.Helper()
		clk.SetTime(clk.Now().Add(d))
		_, err := c.Document(ctx, "apis/g00000.example.com/v1")
		if !errors.As(err, new(*openapi3.LimitError)) || errors.Is(err, openapi3.ErrRemembered) != wantRemembered {
			t.Fatalf("after %v: err = %v, want the paths bound, remembered: %v", d, err, wantRemembered)
		}
		if n := roots.Load(); n != wantRoots {
			t.Fatalf("after %v: %d reads of the root, want %d", d, n, wantRoots)
		}
	}
	step(0, 1, false)
	for range 10 {
		step(0, 1, true)
	}
	step(999*time.Millisecond, 1, true)
	step(time.Millisecond, 2, false)
	step(time.Second, 2, true) // the second failure waits 2s
	step(time.Second, 3, false)
	if _, err := c.RefreshRoot(ctx); errors.Is(err, openapi3.ErrRemembered) || roots.Load() != 4 {
		t.Fatalf("RefreshRoot: %v after %d reads, want the root read", err, roots.Load())
	}
	within := rootOf(10)
	served.Store(&within)
	clk.SetTime(clk.Now().Add(5 * time.Minute))
	if _, err := c.Paths(ctx); err != nil {
		t.Fatalf("the server mended: %v", err)
	}
}

// TestRawPathFromTheRoot: Raw knows a document by the path the root lists
// at its URL, whatever the URL looks like, so that its failure is the
// group-version's, remembered for Document too.
func TestRawPathFromTheRoot(t *testing.T) {
	doc := schemaDoc(20, 0)
	hash := fmt.Sprintf("%X", sha512.Sum512(doc))
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/openapi/v3" {
			fmt.Fprintf(w, `{"paths":{"apis/x/v1":{"serverRelativeURL":"/openapi/v3/elsewhere?hash=%s"}}}`, hash)
			return
		}
		requests.Add(1)
		w.Write(doc)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, openapi3.WithDocumentLimits(openapi3.DocumentLimits{Properties: 10}))
	ctx := context.Background()
	root, err := c.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Raw(ctx, root["apis/x/v1"], "application/json")
	var de *openapi3.DocumentError
	if !errors.As(err, &de) || de.Path != "apis/x/v1" {
		t.Fatalf("err = %v, want a DocumentError of apis/x/v1", err)
	}
	if _, err := c.Document(ctx, "apis/x/v1"); !errors.Is(err, openapi3.ErrRemembered) || requests.Load() != 1 {
		t.Fatalf("Document: %v after %d requests, want Raw's failure remembered", err, requests.Load())
	}
}
