package restmapper_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// legacyHandler serves legacy discovery JSON from docs (path → body); any
// other path, or a nil body, is a 404.
func legacyHandler(docs func(path string) []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := docs(r.URL.Path)
		if body == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}

// TestLegacyNotFoundVersionNotMapped: a legacy group-version that now
// answers 404 is gone: the mapper no longer maps it (as controller-runtime
// and client-go answer NoMatch), rather than keeping its last known
// resources as it keeps a version that failed for another reason.
func TestLegacyNotFoundVersionNotMapped(t *testing.T) {
	var v2Gone atomic.Bool
	srv := httptest.NewServer(legacyHandler(func(path string) []byte {
		switch path {
		case "/apis":
			return []byte(`{"groups":[{"name":"example.com","versions":[{"groupVersion":"example.com/v1","version":"v1"},{"groupVersion":"example.com/v2","version":"v2"}],"preferredVersion":{"groupVersion":"example.com/v2","version":"v2"}}]}`)
		case "/apis/example.com/v1":
			return []byte(`{"groupVersion":"example.com/v1","resources":[{"name":"widgets","namespaced":true,"kind":"Widget","verbs":["get"]}]}`)
		case "/apis/example.com/v2":
			if v2Gone.Load() {
				return nil
			}
			return []byte(`{"groupVersion":"example.com/v2","resources":[{"name":"widgets","namespaced":true,"kind":"Widget","verbs":["get"]}]}`)
		}
		return nil
	}))
	defer srv.Close()
	m, _ := newMapper(t, srv.URL)
	gk := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	if _, err := m.RESTMapping(gk, "v2"); err != nil {
		t.Fatalf("before: %v", err)
	}
	v2Gone.Store(true)
	m.Reset()
	if mapping, err := m.RESTMapping(gk, "v2"); !meta.IsNoMatchError(err) {
		t.Errorf("a version answering 404: mapping %v, error %v; want no match", mapping, err)
	}
	if mapping, err := m.RESTMapping(gk); err != nil || mapping.Resource.Version != "v1" {
		t.Errorf("the version left: %v, %v", mapping, err)
	}
}

// TestKindlessResources: resources a server lists without a kind keep
// their short names and categories, as client-go's expanders see them
// (they were dropped: a kubectl-style "get gz" or "get all" missed them).
func TestKindlessResources(t *testing.T) {
	srv := httptest.NewServer(legacyHandler(func(path string) []byte {
		switch path {
		case "/apis":
			return []byte(`{"groups":[{"name":"example.com","versions":[{"groupVersion":"example.com/v1","version":"v1"}]}]}`)
		case "/apis/example.com/v1":
			return []byte(`{"groupVersion":"example.com/v1","resources":[{"name":"gizmos","namespaced":true,"shortNames":["gz"],"categories":["all"],"verbs":["get"]}]}`)
		}
		return nil
	}))
	defer srv.Close()
	m, _ := newMapper(t, srv.URL)
	gizmos := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}
	if got, err := m.ResourceFor(schema.GroupVersionResource{Resource: "gz"}); err != nil || got != gizmos {
		t.Errorf("ResourceFor(gz) = %v, %v; want %v", got, err, gizmos)
	}
	if got, _ := m.Expand("all"); !slices.Contains(got, gizmos.GroupResource()) {
		t.Errorf("Expand(all) = %v; want %v in it", got, gizmos.GroupResource())
	}
}
