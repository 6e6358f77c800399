package discoverytest_test

import (
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

var extra = discoverytest.CRD{Group: "only-one.example.com", Versions: []string{"v1"}, Kind: "Lonely"}

// TestHARoundRobin: backends with different content behind one URL answer
// in turn, so a client sees discovery flip between them.
func TestHARoundRobin(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(3, discoverytest.RoundRobin))
	if err := srv.Backends()[1].AddCRD(extra); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	var etags []string
	for range 6 {
		_, resp := aggregatedGroups(t, base, acceptV2JSON)
		etags = append(etags, resp.Header.Get("ETag"))
	}
	for i, e := range etags {
		if differs := e != etags[0]; differs != (i%3 == 1) {
			t.Errorf("request %d ETag %s: want only backend 1's to differ (%v)", i, e, etags)
		}
	}
	for i, r := range srv.Requests() {
		if want := srv.Backends()[i%3].ID(); r.Backend != want {
			t.Errorf("request %d served by %q, want %q", i, r.Backend, want)
		}
	}
}

// TestHASticky: one client connection stays on one backend; the request log
// tells which.
func TestHASticky(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(4, discoverytest.Sticky))
	for _, b := range srv.Backends() {
		if err := b.AddCRD(discoverytest.CRD{Group: b.ID() + ".example.com", Versions: []string{"v1"}, Kind: "Mine"}); err != nil {
			t.Fatal(err)
		}
	}
	served := map[string]bool{}
	for range 5 {
		// A fresh transport per round is a fresh connection.
		c := &http.Client{Transport: &http.Transport{}}
		srv.ResetRequests()
		for range 4 {
			do(t, c, http.MethodGet, base+"/apis", "Accept", acceptV2JSON)
		}
		reqs := srv.Requests()
		for _, r := range reqs {
			if r.Backend != reqs[0].Backend {
				t.Fatalf("one connection was served by %s and %s", reqs[0].Backend, r.Backend)
			}
		}
		served[reqs[0].Backend] = true
		c.CloseIdleConnections()
	}
	if len(served) == 0 {
		t.Fatal("no backend recorded")
	}
}

// TestPeerAggregated: with KEP-4020 peer aggregation every backend serves the
// merged discovery, and profile=nopeer asks for its own view.
func TestPeerAggregated(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin), discoverytest.WithPeerAggregation())
	if err := srv.Backends()[1].AddCRD(extra); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: extra.Group, Version: "v1"}
	srv.ResetRequests()
	for i := range 2 {
		list, _ := aggregatedGroups(t, base, acceptV2JSON)
		if findVersion(list, gv) == nil {
			t.Errorf("merged view from backend %d lacks the peer's group", i)
		}
	}
	for i := range 2 {
		list, _ := aggregatedGroups(t, base, acceptV2JSON+";profile=nopeer")
		if has := findVersion(list, gv) != nil; has != (i == 1) {
			t.Errorf("nopeer view from backend %d: has the group=%v, want %v", i, has, i == 1)
		}
	}
	// A change on one backend reaches the other's merged view.
	if err := srv.Backends()[1].RemoveCRD(extra.Group, "lonelys"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		list, _ := aggregatedGroups(t, base, acceptV2JSON)
		if findVersion(list, gv) != nil {
			t.Errorf("backend %d still merges a removed peer group", i)
		}
	}
}

// TestNoPeerOnSingleServer: as the fixture probes show, a single server
// answers profile=nopeer with the same document and ETag.
func TestNoPeerOnSingleServer(t *testing.T) {
	_, base := discoverytest.Start(t)
	a, _ := get(t, base+"/apis", "Accept", acceptV2JSON)
	b, _ := get(t, base+"/apis", "Accept", acceptV2JSON+";profile=nopeer")
	if a.Header.Get("ETag") != b.Header.Get("ETag") {
		t.Errorf("nopeer ETag %s differs from %s", b.Header.Get("ETag"), a.Header.Get("ETag"))
	}
}
