package openapi3_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// cachedClients returns a maker of clients, each as a new process would
// build it, on one disk cache in dir.
func cachedClients(t testing.TB, base, dir string) func() *openapi3.Client {
	return func() *openapi3.Client {
		t.Helper()
		dc, err := diskcache.Open(dir, base)
		if err != nil {
			t.Fatal(err)
		}
		return newClient(t, base, openapi3.WithDiskCache(dc))
	}
}

// TestSchemaChangeFetchesOneDocument: with the disk cache, a new process
// reads the root and nothing else; after one schema change, the root and
// that one document.
func TestSchemaChangeFetchesOneDocument(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	client := cachedClients(t, base, t.TempDir())
	ctx := context.Background()
	docs, err := client().FetchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Requests != len(docs)+1 {
		t.Errorf("cold: %d requests for %d documents", st.Requests, len(docs))
	}
	srv.ResetRequests()
	if _, err := client().FetchAll(ctx); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Requests != 1 {
		t.Errorf("warm: %d requests, want the root only", st.Requests)
	}
	gv := schema.GroupVersion{Group: "g002.stress.example.com", Version: "v1"}
	if err := srv.ChangeSchema(gv); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	if _, err := client().FetchAll(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].Path != "/openapi/v3/"+openapi3.PathFor(gv) {
		t.Errorf("after one change: %+v, want the root and %s", reqs, gv)
	}
}

// TestLongLivedRound: a long-lived client's round after a change (RefreshRoot,
// then FetchAll) asks for the changed document alone, returns it in place
// of the old one, and returns the very documents it kept for the others.
func TestLongLivedRound(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	client := cachedClients(t, base, t.TempDir())()
	ctx := context.Background()
	before, err := client.FetchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "g002.stress.example.com", Version: "v1"}
	if err := srv.ChangeSchema(gv); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	if _, err := client.RefreshRoot(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := client.FetchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[1].Path != "/openapi/v3/"+openapi3.PathFor(gv) {
		t.Errorf("the round asked for %+v, want the root and %s", reqs, gv)
	}
	if len(after) != len(before) {
		t.Fatalf("%d documents after the change, %d before", len(after), len(before))
	}
	paths, err := client.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range after {
		switch {
		case d.Path != before[i].Path:
			t.Fatalf("document %d is %s, was %s", i, d.Path, before[i].Path)
		case d.URL != paths[d.Path]:
			t.Errorf("%s: %s, the root lists %s", d.Path, d.URL, paths[d.Path])
		case d.Path == openapi3.PathFor(gv) && d == before[i]:
			t.Errorf("%s: the document from before the change", d.Path)
		case d.Path != openapi3.PathFor(gv) && d != before[i]:
			t.Errorf("%s: a new document for an unchanged one", d.Path)
		}
	}
}

// TestRedirectElsewhereRefused: a 301 to another host is not followed, so
// credentials never travel there; nor is an endless chain.
func TestRedirectElsewhereRefused(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }))
	defer other.Close()
	var self string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/openapi/v3":
			w.Write([]byte(`{"paths":{"apis/x/v1":{"serverRelativeURL":"/openapi/v3/apis/x/v1?hash=A"},"apis/loop/v1":{"serverRelativeURL":"/openapi/v3/apis/loop/v1?hash=A"}}}`))
		case "/openapi/v3/apis/x/v1":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusMovedPermanently)
		default:
			http.Redirect(w, r, self+r.URL.Path+"?hash=again", http.StatusMovedPermanently)
		}
	}))
	defer ts.Close()
	self = ts.URL
	c := newClient(t, ts.URL)
	if _, err := c.Document(context.Background(), "apis/x/v1"); !errors.Is(err, openapi3.ErrRedirect) {
		t.Errorf("redirect to another host: %v", err)
	}
	if _, err := c.Document(context.Background(), "apis/loop/v1"); !errors.Is(err, openapi3.ErrRedirect) {
		t.Errorf("endless redirects: %v", err)
	}
}

// TestCorruptCacheRefetches: damaged cache files are misses, fetched anew.
func TestCorruptCacheRefetches(t *testing.T) {
	srv, base := docserver.Start(t)
	root := t.TempDir()
	dc, _ := diskcache.Open(root, base)
	docs, err := newClient(t, base, openapi3.WithDiskCache(dc)).FetchAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
			os.WriteFile(p, []byte("torn"), 0o600)
		}
		return nil
	})
	srv.ResetRequests()
	dc2, _ := diskcache.Open(root, base)
	again, err := newClient(t, base, openapi3.WithDiskCache(dc2)).FetchAll(context.Background())
	if err != nil || len(again) != len(docs) {
		t.Fatalf("after corruption: %v", err)
	}
	if n := srv.Stats().Requests; n != len(docs)+1 {
		t.Errorf("%d requests after corruption, want every document again", n)
	}
	if dc2.Stats().Corrupt == 0 {
		t.Errorf("no corrupt entry noticed")
	}
}

// aggregate merges docs, and checks that kube-openapi parses the result and
// that gnostic finds it valid against the OpenAPI v3 specification.
func aggregate(t *testing.T, docs []*openapi3.Document) (*openapi3.Document, *spec3.OpenAPI) {
	t.Helper()
	agg, err := openapi3.Aggregate(docs)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := agg.OpenAPI()
	if err != nil {
		t.Fatalf("the aggregated document does not parse: %v", err)
	}
	if _, err := openapi_v3.ParseDocument(agg.JSON); err != nil {
		t.Errorf("the aggregated document is not valid OpenAPI v3 (gnostic): %v", err)
	}
	return agg, merged
}

// TestContextErrorsAreNotKept: a document fetch that callers give up on
// does not poison the next call: a caller that leaves gets its context's
// error at once, another caller of the same fetch still gets the document,
// a fetch every caller left is cancelled, and the next call fetches anew.
// In a synctest bubble (docserver.StartInProcess), with the root read
// first so that every call reaches the document fetch, and the document
// held for 10s of bubble time by a Fault.Latency while callers come and go.
func TestContextErrorsAreNotKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const latency = 10 * time.Second
		srv, hc, base := docserver.StartInProcess(t)
		c, err := openapi3.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Paths(t.Context()); err != nil {
			t.Fatal(err)
		}
		type result struct {
			d     *openapi3.Document
			err   error
			after time.Duration // of bubble time since the callers started
		}
		var start time.Time
		document := func(ctx context.Context, path string) <-chan result {
			out := make(chan result, 1)
			go func() {
				d, err := c.Document(ctx, path)
				out <- result{d, err, time.Since(start)}
			}()
			return out
		}
		fetches := func(path string) int {
			n := 0
			for _, r := range srv.Requests() {
				if r.Path == "/openapi/v3/"+path {
					n++
				}
			}
			return n
		}

		// Already cancelled: the root is known, so this is the document
		// fetch's own caller leaving (the latency keeps the fetch from
		// ending first).
		srv.InjectFault("/openapi/v3/apis/apps/v1", docserver.Fault{Latency: latency})
		cancelled, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := c.Document(cancelled, "apis/apps/v1"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
		synctest.Wait()
		srv.ClearFaults()

		// One of two callers of a held fetch leaves.
		srv.ResetRequests()
		srv.InjectFault("/openapi/v3/apis/apps/v1", docserver.Fault{Latency: latency, Times: 1})
		start = time.Now()
		ctxA, cancelA := context.WithCancel(t.Context())
		defer cancelA()
		resA := document(ctxA, "apis/apps/v1")
		synctest.Wait() // A started the fetch, held by the latency
		resB := document(t.Context(), "apis/apps/v1")
		synctest.Wait() // B joined it
		cancelA()
		if a := <-resA; !errors.Is(a.err, context.Canceled) || a.after != 0 {
			t.Errorf("the caller that left: %v after %v; want context.Canceled at once", a.err, a.after)
		}
		synctest.Wait()
		select {
		case b := <-resB:
			t.Fatalf("the caller that stayed returned when the other left: %v after %v", b.err, b.after)
		default:
		}
		if b := <-resB; b.err != nil || b.d == nil || b.d.Path != "apis/apps/v1" || b.after != latency {
			t.Fatalf("the caller that stayed: %v after %v; want the document after %v", b.err, b.after, latency)
		}
		if n := fetches("apis/apps/v1"); n != 1 {
			t.Errorf("%d fetches of apis/apps/v1, want one shared by both callers", n)
		}

		// The only caller of a held fetch leaves: the fetch is cancelled,
		// and the next call fetches anew.
		srv.ResetRequests()
		srv.InjectFault("/openapi/v3/apis/batch/v1", docserver.Fault{Latency: latency, Times: 1})
		start = time.Now()
		ctxC, cancelC := context.WithCancel(t.Context())
		defer cancelC()
		resC := document(ctxC, "apis/batch/v1")
		synctest.Wait()
		cancelC()
		if r := <-resC; !errors.Is(r.err, context.Canceled) || r.after != 0 {
			t.Errorf("the caller that left: %v after %v; want context.Canceled at once", r.err, r.after)
		}
		synctest.Wait() // the abandoned fetch has ended, if it is going to
		if n := fetches("apis/batch/v1"); n != 1 {
			t.Fatalf("the fetch everyone left is still running: its request has not ended")
		}
		for _, path := range []string{"apis/apps/v1", "apis/batch/v1"} {
			if d, err := c.Document(t.Context(), path); err != nil || d == nil {
				t.Errorf("%s after cancelled calls: %v", path, err)
			}
		}
		if n := fetches("apis/batch/v1"); n != 2 {
			t.Errorf("%d fetches of apis/batch/v1, want the abandoned one and a new one", n)
		}
		if time.Since(start) != 0 {
			t.Errorf("%v of bubble time passed, want none: the abandoned fetch's latency was not waited out", time.Since(start))
		}
	})
}

// TestAbandonedFetchIsCancelled: a document fetch every caller has given up
// on is cancelled, not left running to its timeout; the next call starts
// afresh. In a synctest bubble: once it settles, the fetch has ended or is
// stuck.
func TestAbandonedFetchIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		c, err := openapi3.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Paths(t.Context()); err != nil {
			t.Fatal(err)
		}
		srv.InjectFault("/openapi/v3/apis/apps/v1", docserver.Fault{Latency: time.Minute})
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := c.Document(ctx, "apis/apps/v1"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("document: %v", err)
		}
		// The server's handler ends when its request is cancelled (and is
		// logged then); it would wait a minute otherwise.
		synctest.Wait()
		if !slices.ContainsFunc(srv.Requests(), func(r docserver.Request) bool { return r.Path == "/openapi/v3/apis/apps/v1" }) {
			t.Fatal("the abandoned fetch is still running")
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("the abandoned fetch ended after %v of bubble time, want the caller's 50ms", d)
		}
		srv.ClearFaults()
		if _, err := c.Document(t.Context(), "apis/apps/v1"); err != nil {
			t.Errorf("the next call inherited the cancelled fetch: %v", err)
		}
	})
}

func rootReads(srv *docserver.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Path == "/openapi/v3" {
			n++
		}
	}
	return n
}

// TestRootMaxAge: a root older than the max age is answered from at once
// and read again in the background, so a long-lived client sees a changed
// schema's new hash; a failing read is not retried on every call. In a
// synctest bubble, so that synctest.Wait tells when a background read has
// ended.
func TestRootMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		clk := clocktesting.NewFakePassiveClock(time.Now())
		c, err := openapi3.NewForHTTPClient(hc, base, openapi3.WithClock(clk), openapi3.WithMaxAge(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		first, err := c.Paths(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Paths(ctx); err != nil || rootReads(srv) != 1 {
			t.Fatalf("within the max age: %d root reads, %v", rootReads(srv), err)
		}
		apps := schema.GroupVersion{Group: "apps", Version: "v1"}
		if err := srv.ChangeSchema(apps); err != nil {
			t.Fatal(err)
		}
		clk.SetTime(clk.Now().Add(31 * time.Second))
		stale, err := c.Paths(ctx)
		if err != nil || stale[openapi3.PathFor(apps)] != first[openapi3.PathFor(apps)] {
			t.Fatalf("an old root is answered from at once: %v", err)
		}
		synctest.Wait() // the background read has ended
		if n := rootReads(srv); n != 2 {
			t.Fatalf("%d root reads, want the background one", n)
		}
		if fresh, _ := c.Paths(ctx); fresh[openapi3.PathFor(apps)] == first[openapi3.PathFor(apps)] {
			t.Fatal("the background read did not bring the new hash")
		}

		srv.InjectFault("/openapi/v3", docserver.Fault{Status: http.StatusServiceUnavailable})
		clk.SetTime(clk.Now().Add(31 * time.Second))
		if _, err := c.Paths(ctx); err != nil {
			t.Fatalf("a failing background read fails the caller: %v", err)
		}
		synctest.Wait()
		if n := rootReads(srv); n != 3 {
			t.Fatalf("%d root reads, want the failed background one", n)
		}
		for range 10 {
			c.Paths(ctx)
		}
		if _, err := c.Document(ctx, "apis/apps/v1"); err != nil {
			t.Errorf("documents while the root fails: %v", err)
		}
		synctest.Wait()
		if n := rootReads(srv); n != 3 {
			t.Errorf("%d root reads after one failure, want no more within the max age", n)
		}
	})
}

// TestNewGroupVersionFound: a kind of a group-version added since the root
// was read is found without RefreshRoot; asking again and again for one
// that does not exist costs at most a root read a second.
func TestNewGroupVersionFound(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newClient(t, base, openapi3.WithClock(clk))
	ctx := context.Background()
	if _, err := c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddCRD(docserver.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}); err != nil {
		t.Fatal(err)
	}
	late := schema.GroupVersionKind{Group: "late.example.com", Version: "v1", Kind: "Late"}
	for range 5 {
		if _, err := c.Kind(ctx, late); !errors.Is(err, openapi3.ErrNotFound) {
			t.Fatalf("within a second of the root read: %v", err)
		}
	}
	if n := rootReads(srv); n != 1 {
		t.Errorf("%d root reads for misses within a second", n)
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if _, err := c.Kind(ctx, late); err != nil {
		t.Errorf("the new kind: %v", err)
	}
	if n := rootReads(srv); n != 2 {
		t.Errorf("%d root reads, want one more", n)
	}

	// A kind added to a group-version whose document the client holds.
	if err := srv.AddCRD(docserver.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Later"}); err != nil {
		t.Fatal(err)
	}
	later := schema.GroupVersionKind{Group: "late.example.com", Version: "v1", Kind: "Later"}
	if _, err := c.Kind(ctx, later); !errors.Is(err, openapi3.ErrNotFound) {
		t.Fatalf("within a second of the root read: %v", err)
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if _, err := c.Kind(ctx, later); err != nil {
		t.Errorf("the kind the group-version gained: %v", err)
	}
	if _, err := c.Kind(ctx, late); err != nil {
		t.Errorf("the first kind, after: %v", err)
	}
}

// TestKindMissTellsWhyTheRootWasNotRead: a kind missing from a document
// the client holds makes it read the root again; when that read fails, the
// caller learns it (beside ErrNotFound), instead of a bare "not found" that
// says the kind does not exist when the client could not look.
func TestKindMissTellsWhyTheRootWasNotRead(t *testing.T) {
	srv, m, base := mangled(t)
	if err := srv.AddCRD(docserver.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newClient(t, base, openapi3.WithClock(clk))
	ctx := context.Background()
	if _, err := c.DocumentOf(ctx, schema.GroupVersionKind{Group: "late.example.com", Version: "v1", Kind: "Late"}); err != nil {
		t.Fatal(err)
	}
	m.set("/openapi/v3", func([]byte) []byte { return []byte("{not json") }, nil)
	clk.SetTime(clk.Now().Add(2 * time.Second))
	_, err := c.DocumentOf(ctx, schema.GroupVersionKind{Group: "late.example.com", Version: "v1", Kind: "Later"})
	if !errors.Is(err, openapi3.ErrNotFound) {
		t.Fatalf("a kind the held document lacks: %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "reading the OpenAPI root again") {
		t.Errorf("the root read failed, but the error does not say so: %v", err)
	}

	// Once the root reads again, the miss is a plain ErrNotFound.
	m.set("", nil, nil)
	clk.SetTime(clk.Now().Add(2 * time.Second))
	_, err = c.DocumentOf(ctx, schema.GroupVersionKind{Group: "late.example.com", Version: "v1", Kind: "Later"})
	if !errors.Is(err, openapi3.ErrNotFound) || strings.Contains(err.Error(), "root again") {
		t.Errorf("after the root is readable: %v, want a plain ErrNotFound", err)
	}
}

// TestMaxDocuments: beyond the bound the least recently used document is
// dropped, and read again when next asked for.
func TestMaxDocuments(t *testing.T) {
	srv, base := docserver.Start(t)
	c := newClient(t, base, openapi3.WithMaxDocuments(2))
	ctx := context.Background()
	get := func(path string) int {
		t.Helper()
		srv.ResetRequests()
		if _, err := c.Document(ctx, path); err != nil {
			t.Fatal(err)
		}
		return srv.Stats().Requests
	}
	if _, err := c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	get("apis/apps/v1")
	get("apis/batch/v1")
	if n := get("apis/apps/v1"); n != 0 {
		t.Errorf("a kept document cost %d requests", n)
	}
	get("api/v1") // drops batch/v1, the least recently used
	if n := get("apis/apps/v1"); n != 0 {
		t.Errorf("the recently used document was dropped (%d requests)", n)
	}
	if n := get("apis/batch/v1"); n != 1 {
		t.Errorf("the least recently used document: %d requests, want it read again", n)
	}
}

// TestFieldThroughMapValues: as kubectl explain walks a path, a map's
// fields are its values' (spec.parts.kind, where parts maps names to
// objects), also below a list of maps.
func TestFieldThroughMapValues(t *testing.T) {
	part := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"},
		Properties: map[string]spec.Schema{"kind": {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, Description: "What the part is."}}}}}
	parts := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, AdditionalProperties: &spec.SchemaOrBool{Allows: true, Schema: &part}}}
	listOfMaps := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"array"}, Items: &spec.SchemaOrArray{Schema: &parts}}}
	s := &openapi3.Schema{Name: "Widget", Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Properties: map[string]spec.Schema{
		"spec": {SchemaProps: spec.SchemaProps{Properties: map[string]spec.Schema{"parts": parts, "batches": listOfMaps}}},
	}}}}
	for _, path := range [][]string{{"spec", "parts", "kind"}, {"spec", "batches", "kind"}} {
		f, description, err := s.Field(path...)
		if err != nil || !f.Type.Contains("string") || description != "What the part is." {
			t.Errorf("%v: %v %q %v", path, f, description, err)
		}
	}
	if _, _, err := s.Field("spec", "parts", "nope"); !errors.Is(err, openapi3.ErrNotFound) {
		t.Errorf("missing field of a map's values: %v", err)
	}
}

// TestNewFromRESTConfig: a client built from a client-go config sends the
// config's credentials and kubeatlas's User-Agent, and keeps a path prefix
// in the host URL (a proxy's /k8s/clusters/<id>), also for documents whose
// URL the proxy already rewrote to carry it.
func TestNewFromRESTConfig(t *testing.T) {
	srv, err := docserver.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	rewrite := false
	ts := httptest.NewServer(http.StripPrefix("/k8s/clusters/c-1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen["auth"], seen["ua"] = r.Header.Get("Authorization"), r.Header.Get("User-Agent")
		rw := rewrite
		mu.Unlock()
		if rw && r.URL.Path == "/openapi/v3" {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.Write([]byte(strings.ReplaceAll(rec.Body.String(), `"/openapi/v3/`, `"/k8s/clusters/c-1/openapi/v3/`)))
			return
		}
		srv.ServeHTTP(w, r)
	})))
	defer ts.Close()
	for _, rw := range []bool{false, true} {
		mu.Lock()
		rewrite = rw
		mu.Unlock()
		c, err := openapi3.New(&rest.Config{Host: ts.URL + "/k8s/clusters/c-1", BearerToken: "s3cret"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Document(context.Background(), "apis/apps/v1"); err != nil {
			t.Fatalf("document through the prefix (URLs rewritten by the proxy: %v): %v", rw, err)
		}
		if seen["auth"] != "Bearer s3cret" || !strings.HasPrefix(seen["ua"], "kubeatlas") {
			t.Errorf("headers sent: %v", seen)
		}
	}
}

// TestHangingRootErrorNamesURL: a root that never answers, or stops
// halfway, fails within the caller's context with an error that says
// where (explain printed a bare "context deadline exceeded").
func TestHangingRootErrorNamesURL(t *testing.T) {
	for _, halfway := range []bool{false, true} {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if halfway {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "1000")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(`{"paths":`))
				w.(http.Flusher).Flush()
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		c, err := openapi3.NewForHTTPClient(nil, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err = c.Paths(ctx)
		cancel()
		close(release)
		srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("halfway=%v: %v; want the deadline, naming %s", halfway, err, srv.URL)
		}
	}
}
