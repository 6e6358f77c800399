package discovery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// Servers that are not kube-apiserver: hand-written fakes, proxies,
// extension API servers. client-go reads them; so must discovery, while
// staying strict about what is wrong (a document of another type).

// rawServer answers each path with its status, Content-Type (nil: no
// Content-Type header at all) and body; any other path is a 404. It counts
// requests per path.
type rawAnswer struct {
	status      int
	contentType []string
	body        string
}

type rawServer struct {
	mu       sync.Mutex
	answers  map[string][]rawAnswer // consumed in order; the last repeats
	requests map[string]int
}

func startRaw(t *testing.T, answers map[string][]rawAnswer) (*rawServer, string) {
	t.Helper()
	s := &rawServer{answers: answers, requests: map[string]int{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *rawServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := s.requests[r.URL.Path]
	s.requests[r.URL.Path]++
	as, ok := s.answers[r.URL.Path]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	a := as[min(n, len(as)-1)]
	// A nil slice, not a missing key: net/http then sends no
	// Content-Type instead of sniffing one.
	w.Header()["Content-Type"] = a.contentType
	w.WriteHeader(a.status)
	_, _ = w.Write([]byte(a.body))
}

func (s *rawServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

func ok(body string) []rawAnswer {
	return []rawAnswer{{status: 200, contentType: []string{"application/json"}, body: body}}
}

func snapshotOf(t *testing.T, base string) (*discovery.Snapshot, error) {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	return c.Snapshot(context.Background())
}

// kindOf is the kind of gv's resource name in s, "" if not listed.
func kindOf(s *discovery.Snapshot, gv schema.GroupVersion, name string) string {
	if s == nil {
		return ""
	}
	v, found := s.Version(gv)
	if !found {
		return ""
	}
	for _, r := range v.Resources {
		if r.Name == name {
			return r.Kind.Kind
		}
	}
	return ""
}

var widgets = schema.GroupVersion{Group: "example.com", Version: "v1"}

const (
	apisWithoutType    = `{"groups":[{"name":"example.com","versions":[{"groupVersion":"example.com/v1","version":"v1"}]}]}`
	widgetsWithoutType = `{"groupVersion":"example.com/v1","resources":[{"name":"widgets","namespaced":true,"kind":"Widget","verbs":["get"]}]}`
)

// TestDocumentsWithoutTypeMeta: documents without apiVersion and kind are
// read as the type negotiated, legacy and aggregated; a document that
// names another type is still an error.
func TestDocumentsWithoutTypeMeta(t *testing.T) {
	_, base := startRaw(t, map[string][]rawAnswer{
		"/api":                 ok(`{"versions":["v1"]}`),
		"/api/v1":              ok(`{"groupVersion":"v1","resources":[{"name":"pods","namespaced":true,"kind":"Pod","verbs":["get"]}]}`),
		"/apis":                ok(apisWithoutType),
		"/apis/example.com/v1": ok(widgetsWithoutType),
	})
	s, err := snapshotOf(t, base)
	if err != nil || kindOf(s, widgets, "widgets") != "Widget" || kindOf(s, schema.GroupVersion{Version: "v1"}, "pods") != "Pod" {
		t.Fatalf("legacy without TypeMeta: %v", err)
	}

	agg := []rawAnswer{{status: 200, contentType: []string{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
		body: `{"items":[{"metadata":{"name":"example.com"},"versions":[{"version":"v1","resources":[{"resource":"widgets","responseKind":{"group":"example.com","version":"v1","kind":"Widget"},"scope":"Namespaced","verbs":["get"]}]}]}]}`}}
	_, base = startRaw(t, map[string][]rawAnswer{"/api": {{status: 404}}, "/apis": agg})
	if s, err := snapshotOf(t, base); err != nil || kindOf(s, widgets, "widgets") != "Widget" {
		t.Fatalf("aggregated without TypeMeta: %v", err)
	}

	_, base = startRaw(t, map[string][]rawAnswer{
		"/api":  ok(`{"versions":["v1"]}`),
		"/apis": ok(`{"kind":"Status","apiVersion":"v1","status":"Success"}`),
	})
	if _, err := snapshotOf(t, base); err == nil {
		t.Fatal("a Status where an APIGroupList was asked for was accepted")
	}
}

// TestAPINotFound: /api answering 404 (an extension API server built on
// k8s.io/apiserver) is no core group, not a failure of discovery.
func TestAPINotFound(t *testing.T) {
	_, base := startRaw(t, map[string][]rawAnswer{
		"/api":                 {{status: 404}},
		"/apis":                ok(apisWithoutType),
		"/apis/example.com/v1": ok(widgetsWithoutType),
	})
	s, err := snapshotOf(t, base)
	if err != nil || kindOf(s, widgets, "widgets") != "Widget" {
		t.Fatalf("%v", err)
	}
	if _, found := s.Group(""); found {
		t.Error("a core group from a 404")
	}
}

// TestLegacyJSONUnderOtherContentTypes: legacy JSON served as text/json,
// text/plain, text/html or without a Content-Type is decoded, as client-go
// decodes it (its TestDiscoveryContentTypeVersion).
func TestLegacyJSONUnderOtherContentTypes(t *testing.T) {
	for _, ct := range [][]string{{"text/json"}, {"text/json; charset=utf-8"}, {"text/plain; charset=utf-8"}, {"text/html"}, nil} {
		answer := func(body string) []rawAnswer { return []rawAnswer{{status: 200, contentType: ct, body: body}} }
		_, base := startRaw(t, map[string][]rawAnswer{
			"/api":                 {{status: 404}},
			"/apis":                answer(apisWithoutType),
			"/apis/example.com/v1": answer(widgetsWithoutType),
		})
		if s, err := snapshotOf(t, base); err != nil || kindOf(s, widgets, "widgets") != "Widget" {
			t.Errorf("Content-Type %q: %v", ct, err)
		}
	}
}

// TestLegacyTransientFailureRetriedOnce: a group-version that answers 500
// once is read at the second try, as client-go retries it; one that keeps
// failing is asked twice, not more.
func TestLegacyTransientFailureRetriedOnce(t *testing.T) {
	fail := rawAnswer{status: 500, contentType: []string{"text/plain"}, body: "try again"}
	srv, base := startRaw(t, map[string][]rawAnswer{
		"/api":                 {{status: 404}},
		"/apis":                ok(apisWithoutType),
		"/apis/example.com/v1": append([]rawAnswer{fail}, ok(widgetsWithoutType)...),
	})
	if s, err := snapshotOf(t, base); err != nil || kindOf(s, widgets, "widgets") != "Widget" {
		t.Fatalf("after one 500: %v", err)
	}
	if n := srv.count("/apis/example.com/v1"); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}

	srv, base = startRaw(t, map[string][]rawAnswer{
		"/api":                 {{status: 404}},
		"/apis":                ok(apisWithoutType),
		"/apis/example.com/v1": {fail},
	})
	if _, err := snapshotOf(t, base); err == nil {
		t.Error("a group-version that keeps failing is not reported")
	}
	if n := srv.count("/apis/example.com/v1"); n != 2 {
		t.Errorf("%d requests for a group-version that keeps failing, want 2", n)
	}
}
