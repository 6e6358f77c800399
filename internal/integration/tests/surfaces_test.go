package tests

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/fleet"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// statusRecorder records "PATH STATUS" for every response.
type statusRecorder struct {
	next http.RoundTripper
	mu   *sync.Mutex
	got  *[]string
}

func (s statusRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	if err == nil {
		s.mu.Lock()
		*s.got = append(*s.got, fmt.Sprintf("%s %d", r.URL.Path, resp.StatusCode))
		s.mu.Unlock()
	}
	return resp, err
}

// TestSurfacesOnRealServer: kube-apiserver answers a cold start's probe of
// its OpenAPI v3 root with a byte range (206, one byte: it serves the root
// with http.ServeContent), so a cluster of a fleet that has no hint
// has the surface the fleet holds confirmed: the probe and two 304s, no
// discovery body. A CRD changes the fingerprint: the next cold client reads
// the new documents, and the one after it has them confirmed.
func TestSurfacesOnRealServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	f, err := fleet.New()
	if err != nil {
		t.Fatal(err)
	}
	cold := func() (*discovery.Snapshot, []string, discovery.Stats) {
		t.Helper()
		var mu sync.Mutex
		var got []string
		cfg := rest.CopyConfig(c.config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return statusRecorder{rt, &mu, &got} }
		cluster, err := f.Add(fmt.Sprintf("cluster-%d", f.Stats().Clusters), cfg)
		if err != nil {
			t.Fatal(err)
		}
		// A Refresh round reads the new, cold cluster (the others only
		// revalidate): the round works out what its cold start offers,
		// probing the server, before the cluster's refresh.
		if err := f.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		dc := cluster.Discovery()
		s := cluster.Snapshot()
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(got)
		return s, got, dc.Stats()
	}
	confirmed := []string{"/api 304", "/apis 304", "/openapi/v3 206"}

	first, got, _ := cold()
	if !slices.Equal(got, []string{"/api 200", "/apis 200", "/openapi/v3 206"}) {
		t.Errorf("first cold start: %v, want the probe answered with ranges and both documents", got)
	}
	second, got, st := cold()
	if !slices.Equal(got, confirmed) || st.SurfaceHits != 1 || st.Bytes > 1 {
		t.Errorf("second cold start: %v, %d bytes, %d surface hits; want %v and the probe's one byte", got, st.Bytes, st.SurfaceHits, confirmed)
	}
	if second.Generation() != first.Generation() {
		t.Errorf("the second client does not share the first's snapshot")
	}

	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd("Namespaced", "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The fingerprint is the OpenAPI root's: wait until both it and
	// discovery list the CRD (they are updated by separate controllers).
	oc, err := openapi3.New(c.config)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CRD is in discovery and OpenAPI", 30*time.Second, func() (bool, string) {
		paths, err := oc.RefreshRoot(ctx)
		if err != nil {
			return false, err.Error()
		}
		dc, err := discovery.New(c.config)
		if err != nil {
			return false, err.Error()
		}
		s, err := dc.Snapshot(ctx)
		if err != nil {
			return false, err.Error()
		}
		_, inDiscovery := s.Group(group)
		_, inOpenAPI := paths["apis/"+group+"/v1"]
		return inDiscovery && inOpenAPI, fmt.Sprintf("discovery %v, OpenAPI %v", inDiscovery, inOpenAPI)
	})
	// The clusters that started before the CRD leave the fleet: a round
	// revalidates them beside the next cold start, and one that reads the
	// new surface before that start asks for it makes it the surface read
	// last, which the table offers a fingerprint it has not seen (a 304,
	// right, but not the read this test is after; it failed so under load).
	// The fleet still holds the old surface for its fingerprint.
	for _, id := range f.IDs() {
		f.Remove(id)
	}
	third, got, _ := cold()
	if i := slices.Index(got, "/apis 200"); i < 0 {
		t.Errorf("a cold start after a CRD: %v, want /apis read", got)
	}
	if _, ok := third.Group(group); !ok {
		t.Fatalf("the new CRD's group is not in the new snapshot")
	}
	fourth, got, _ := cold()
	if !slices.Equal(got, confirmed) || fourth.Generation() != third.Generation() {
		t.Errorf("the cold start after that: %v, want %v and the new surface", got, confirmed)
	}
	runtime.KeepAlive(f) // the fleet holds surfaces weakly
}
