package fleet

import (
	"bytes"
	"context"
	"crypto/sha512"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// hostileProxy serves what the server at base serves, except that its
// /apis, always a 200, maps Deployment to a resource of its own making
// (a name as long as "deployments", so that the body's length is the
// real one's),
// under the real document's ETag (which is public: the same for every
// cluster of that surface). It returns its URL, and the last forged body
// and Content-Type it served.
func hostileProxy(t *testing.T, base string) (string, func() ([]byte, string)) {
	t.Helper()
	return rewritingProxy(t, base, `"resource":"deployments"`, `"resource":"pwnedthings"`)
}

// rewritingProxy is hostileProxy replacing old with new in /apis.
func rewritingProxy(t *testing.T, base, old, new string) (string, func() ([]byte, string)) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var forged []byte
	var contentType string
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		if r.Out.URL.Path == "/apis" {
			r.Out.Header.Del("If-None-Match")
			r.Out.Header.Del("Accept-Encoding")
		}
	}}
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/apis" || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		b := bytes.ReplaceAll(body, []byte(old), []byte(new))
		if bytes.Equal(b, body) {
			t.Errorf("the hostile cluster found no deployments to rewrite")
		}
		forged, contentType = b, resp.Header.Get("Content-Type")
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL, func() ([]byte, string) { return forged, contentType }
}

// TestDiskContentIsVerified: a hostile cluster of a fleet serves /apis
// under an honest surface's ETag with a body of its own making (Deployment
// mapped to its own resource). The fleet does not file that body under
// the ETag in its disk content cache; and a body filed there by any other
// writer (a build that filed documents unchecked, another program) is not
// loaded: the honest cluster's next process, whose server would confirm
// the ETags with two 304s, recomputes the ETag from the body, drops it,
// reads its own server's documents and maps Deployment to deployments.
func TestDiskContentIsVerified(t *testing.T) {
	dir := t.TempDir()
	honest, baseHonest := docserver.Start(t, docserver.WithCRDs(20, 4))
	_, baseOrigin := docserver.Start(t, docserver.WithCRDs(20, 4))
	baseHostile, forged := hostileProxy(t, baseOrigin)
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	ctx := context.Background()
	resource := func(f *Fleet, id string) string {
		t.Helper()
		c, _ := f.Cluster(id)
		m, err := c.Mapper().RESTMapping(deploy, "v1")
		if err != nil {
			t.Fatal(err)
		}
		return m.Resource.Resource
	}
	run := func(clusters map[string]string) *Fleet {
		t.Helper()
		f, err := New(WithCacheDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"honest", "hostile"} {
			if base, ok := clusters[id]; ok {
				if _, err := f.Add(id, &rest.Config{Host: base}); err != nil {
					t.Fatal(err)
				}
				if err := f.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		return f
	}

	// First process: the honest cluster, then the hostile one, whose
	// forged /apis answers the honest surface's ETag.
	f := run(map[string]string{"honest": baseHonest, "hostile": baseHostile})
	if got := resource(f, "hostile"); got != "pwnedthings" {
		t.Fatalf("the hostile cluster maps Deployment to %q, want its forged resource", got)
	}
	hostileC, _ := f.Cluster("hostile")
	honestC, _ := f.Cluster("honest")
	_, etag := hostileC.Snapshot().ETags()
	if _, honestETag := honestC.Snapshot().ETags(); etag != honestETag {
		t.Fatalf("the hostile cluster's ETag %s is not the honest one's %s", etag, honestETag)
	}
	honest.ResetRequests()
	if got := resource(run(map[string]string{"honest": baseHonest}), "honest"); got != "deployments" {
		t.Fatalf("the fleet filed the hostile cluster's document: the honest cluster maps Deployment to %q", got)
	}

	// Another writer files the forged body under the honest ETag.
	body, _ := forged()
	content, err := diskcache.Open(dir, contentDir)
	if err != nil {
		t.Fatal(err)
	}
	_, key := (&contentStore{}).route(diskcache.Key{Version: etag, Content: true}) // where the fleet files a document named by etag
	if _, ok := content.Get(key); !ok {
		t.Fatalf("no document filed under %s: the test's key is not the fleet's", etag)
	}
	if err := content.Put(key, body); err != nil {
		t.Fatal(err)
	}
	honest.ResetRequests()
	f = run(map[string]string{"honest": baseHonest})
	if got := resource(f, "honest"); got != "deployments" {
		t.Errorf("the honest cluster maps Deployment to %q: a document filed under its ETag was loaded unchecked", got)
	}
	if got := honest.Statuses(); got["/apis"] != http.StatusOK {
		t.Errorf("the honest cluster's /apis after a forged entry: %v, want a 200 of its own", got)
	}
	if b, ok := content.Get(key); !ok || bytes.Equal(b, body) {
		t.Errorf("the forged document is still filed under the ETag (present %v)", ok)
	}
}

// TestDuplicateKeysAreNotKept: a hostile cluster serves /apis with a
// duplicate key in Deployment's entry, its own resource first and the
// honest one last: Go's decoder (the last key wins) reads the honest
// document, whose ETag the body then verifies against. The fleet's
// content store keeps only the canonical encoding that was verified (whose
// SHA-512 is the ETag itself), never the hostile bytes, which a decoder
// that keeps the first key would read as pwnedthings. On c7f0643 the
// hostile body was filed under the honest ETag.
func TestDuplicateKeysAreNotKept(t *testing.T) {
	dir := t.TempDir()
	_, baseOrigin := docserver.Start(t, docserver.WithCRDs(20, 4))
	baseHostile, forged := rewritingProxy(t, baseOrigin, `"resource":"deployments"`, `"resource":"pwnedthings","resource":"deployments"`)
	ctx := context.Background()
	f, err := New(WithCacheDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add("hostile", &rest.Config{Host: baseHostile}); err != nil {
		t.Fatal(err)
	}
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	c, _ := f.Cluster("hostile")
	m, err := c.Mapper().RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1")
	if err != nil || m.Resource.Resource != "deployments" {
		t.Fatalf("Deployment maps to %v (%v), want deployments (Go's decoder keeps the last key)", m, err)
	}
	_, etag := c.Snapshot().ETags()
	body, _ := forged()
	if !bytes.Contains(body, []byte("pwnedthings")) {
		t.Fatal("the proxy forged nothing")
	}
	content, err := diskcache.Open(dir, contentDir)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's entry is written after publication.
	var kept []byte
	_, key := (&contentStore{}).route(diskcache.Key{Version: etag, Content: true}) // where the fleet files a document named by etag
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var ok bool
		if kept, ok = content.Get(key); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing filed under %s", etag)
		}
	}
	if bytes.Contains(kept, []byte("pwnedthings")) {
		t.Errorf("the hostile cluster's bytes are kept under the honest ETag %s", etag)
	}
	if sum := strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(kept))); sum != etag {
		t.Errorf("what is kept under %s hashes to %s: not the canonical encoding", etag, sum)
	}
}
