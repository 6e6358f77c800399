package fleet_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/fleet"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestFleetThroughAProxy: clusters exposed by a fleet proxy under
// /k8s/clusters/<id> keep the prefix in every request, and start from a
// surface the fleet holds without a hint; OpenAPI documents
// of one content are fetched once for all of them (their URLs differ by
// the prefix) and stored on disk once.
func TestFleetThroughAProxy(t *testing.T) {
	surfaces, err := discoverytest.DistinctSurfaces(2, 20, 4)
	if err != nil {
		t.Fatal(err)
	}
	ids := discoverytest.ClusterIDs(6)
	proxy, base := discoverytest.StartFleet(t, ids, surfaces)
	// The fake builds each surface's OpenAPI root on the first request,
	// which a real server keeps built: so that no size probe times out on
	// that.
	for _, id := range ids[:2] {
		warmOpenAPIRoot(t, base+discoverytest.ClusterPath(id))
	}
	f := newFleet(t, fleet.WithCacheDir(t.TempDir()))
	for _, id := range ids {
		if _, err := f.Add(id, &rest.Config{Host: base + discoverytest.ClusterPath(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Without a Like hint, each cluster's fingerprint (its OpenAPI root's
	// size, the same for every cluster of a surface whatever the prefix)
	// names its surface: one cold start per surface reads the documents.
	if st := f.Stats(); st.Surfaces != 2 || st.SurfaceHits != 4 {
		t.Errorf("stats %+v, want 2 surfaces and 4 cold starts confirmed by 304s", st)
	}
	var docs []*openapi3.Document
	for _, id := range ids {
		oc, err := must(f.Cluster(id)).OpenAPI()
		if err != nil {
			t.Fatal(err)
		}
		d, err := oc.Document(context.Background(), "apis/apps/v1")
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if !strings.HasPrefix(d.URL, discoverytest.ClusterPath(id)+"/openapi/v3/apis/apps/v1?hash=") {
			t.Errorf("%s: document URL %s lost the prefix", id, d.URL)
		}
		docs = append(docs, d)
	}
	for _, d := range docs[1:] {
		if &d.JSON[0] != &docs[0].JSON[0] {
			t.Errorf("clusters hold copies of one document")
			break
		}
	}
	fetched := 0
	for _, srv := range proxy.Surfaces() { // each logs its clusters' requests
		for _, r := range srv.Requests() {
			if strings.HasSuffix(r.Path, "/openapi/v3/apis/apps/v1") {
				fetched++
			}
		}
	}
	if fetched != 1 {
		t.Errorf("apps/v1's document (the same in both surfaces) fetched %d times for 6 clusters, want once", fetched)
	}
}

// warmOpenAPIRoot reads a fake server's OpenAPI root once (the fake builds
// it on the first request; a real server keeps it built). A copy of
// fleet/surfaces_test.go's.
func warmOpenAPIRoot(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/openapi/v3")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// newFleet is fleet's newFleet (fleet/fleet_test.go), for the tests that
// stay here.
func newFleet(t *testing.T, opts ...fleet.Option) *fleet.Fleet {
	t.Helper()
	f, err := fleet.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
