package discovery_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestWarmStart: a second client on the same disk cache starts from one
// file: no request while the snapshot is younger than the max age, two
// 304s after, and a full read when the file is damaged.
func TestWarmStart(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(30, 5))
	root := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Now())
	newDisk := func() *diskcache.Cache {
		d, err := diskcache.Open(root, base)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := newClient(t, base, discovery.WithDiskCache(newDisk()), discovery.WithClock(clk), discovery.WithMaxAge(time.Minute))
	want, err := first.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	srv.ResetRequests()
	second := newClient(t, base, discovery.WithDiskCache(newDisk()), discovery.WithClock(clk), discovery.WithMaxAge(time.Minute))
	got, err := second.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Stats().Requests; n != 0 || second.Stats().DiskLoads != 1 {
		t.Errorf("warm start inside the max age: %d requests, %d disk loads", n, second.Stats().DiskLoads)
	}
	if !slices.Equal(flatten(got), flatten(want)) || !sameSources(got, want) {
		t.Errorf("the warm snapshot differs from the one persisted")
	}

	clk.Step(2 * time.Minute)
	third := newClient(t, base, discovery.WithDiskCache(newDisk()), discovery.WithClock(clk), discovery.WithMaxAge(time.Minute))
	srv.ResetRequests()
	if _, err := third.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Requests != 2 || st.NotModified != 2 {
		t.Errorf("warm start past the max age: %+v, want two 304s", st)
	}

	// Damage every file: the next client reads from the server instead.
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && info.Name()[0] != '.' {
			os.WriteFile(p, []byte("garbage"), 0o600)
		}
		return nil
	})
	srv.ResetRequests()
	fourth := newClient(t, base, discovery.WithDiskCache(newDisk()), discovery.WithClock(clk))
	s, err := fourth.Snapshot(context.Background())
	if err != nil || len(s.Groups()) != len(want.Groups()) {
		t.Fatalf("after damage: %v", err)
	}
	if st := srv.Stats(); st.Requests != 2 || st.NotModified != 0 {
		t.Errorf("after damage: %+v, want a full read", st)
	}
}

// warmClients makes clients that share one disk cache directory, as
// processes run one after another do. They send their requests through hc
// (nil: http.DefaultClient).
func warmClients(t *testing.T, hc *http.Client, base string, clk *clocktesting.FakeClock, opts ...discovery.Option) func() *discovery.Client {
	root := t.TempDir()
	return func() *discovery.Client {
		d, err := diskcache.Open(root, base)
		if err != nil {
			t.Fatal(err)
		}
		c, err := discovery.NewForHTTPClient(hc, base, append([]discovery.Option{discovery.WithDiskCache(d), discovery.WithClock(clk), discovery.WithMaxAge(time.Minute)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// TestWarmStartWaitsOnce: a snapshot read from disk past the max age is
// revalidated once before it is answered from; after that revalidation
// (two 304s) Snapshot never waits again, as its doc promises.
func TestWarmStartWaitsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		clk := clocktesting.NewFakeClock(time.Now())
		client := warmClients(t, hc, base, clk, discovery.WithRefreshTimeout(2*time.Second))
		if _, err := client().Snapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
		clk.Step(2 * time.Minute)
		c := client()
		srv.ResetRequests()
		s, err := c.Snapshot(t.Context())
		if err != nil || s.FromDisk() || s.RefreshError() != nil {
			t.Fatalf("after revalidation: %v, from disk %v, refresh error %v", err, s.FromDisk(), s.RefreshError())
		}
		if st := srv.Stats(); st.NotModified != 2 {
			t.Fatalf("revalidation: %+v, want two 304s", st)
		}
		// The server now hangs; a snapshot past the max age is answered at
		// once (no bubble time passes) and revalidated in the background.
		srv.InjectFault("/apis", docserver.Fault{Latency: time.Minute})
		clk.Step(2 * time.Minute)
		start := time.Now()
		for range 3 {
			if got, err := c.Snapshot(t.Context()); err != nil || got.Generation() != s.Generation() || time.Since(start) != 0 {
				t.Fatalf("Snapshot waited %v for the hanging server: %v", time.Since(start), err)
			}
		}
	})
}

// TestWarmStartFailingServer: with a warm cache and a server that fails or
// hangs, the first call waits at most one refresh, then answers with the
// cached snapshot and says why it could not be revalidated; later calls do
// not wait, and do not ask the server again before the max age. In
// synctest bubbles: the hanging server is waited for exactly the refresh
// timeout, and synctest.Wait tells when the background refresh has ended.
func TestWarmStartFailingServer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault docserver.Fault
		wait  time.Duration // of the first call: the refresh timeout, or none
	}{
		{"hanging", docserver.Fault{Latency: time.Minute}, time.Second},
		{"503", docserver.Fault{Status: http.StatusServiceUnavailable}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, hc, base := docserver.StartInProcess(t)
				clk := clocktesting.NewFakeClock(time.Now())
				client := warmClients(t, hc, base, clk, discovery.WithRefreshTimeout(time.Second))
				want, err := client().Snapshot(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				clk.Step(2 * time.Minute)
				srv.InjectFault("/apis", tc.fault)
				c := client()
				start := time.Now()
				s, err := c.Snapshot(t.Context())
				if err != nil || s == nil {
					t.Fatalf("first call: %v", err)
				}
				if d := time.Since(start); d != tc.wait {
					t.Errorf("first call waited %v of bubble time, want %v", d, tc.wait)
				}
				if !s.FromDisk() || s.RefreshError() == nil || !slices.Equal(flatten(s), flatten(want)) {
					t.Fatalf("first call: from disk %v, refresh error %v: want the cached snapshot and why it is not revalidated", s.FromDisk(), s.RefreshError())
				}
				synctest.Wait() // the timed-out /apis handler has ended, and is logged
				srv.ResetRequests()
				start = time.Now()
				for range 5 {
					s, err := c.Snapshot(t.Context())
					if err != nil || s.RefreshError() == nil {
						t.Fatalf("later call: %v / %v", err, s.RefreshError())
					}
				}
				synctest.Wait() // a refresh the later calls started would have ended
				if n := srv.Stats().Requests; n != 0 || time.Since(start) != 0 {
					t.Errorf("%d requests and %v of bubble time from later calls within the max age of the failure, want none", n, time.Since(start))
				}
				// Past the max age, one background refresh tries again, and
				// once the server is back the snapshot is revalidated.
				srv.ClearFaults()
				clk.Step(2 * time.Minute)
				c.Snapshot(t.Context())
				synctest.Wait() // the background refresh has ended
				if s := c.Current(); s.RefreshError() != nil || s.FromDisk() {
					t.Errorf("after the background refresh: refresh error %v, from disk %v; want revalidated", s.RefreshError(), s.FromDisk())
				}
			})
		})
	}
}

// TestLastKnownResourcesPersist: an aggregated API that went away after it
// was seen is listed with its last known resources by the next process
// too, which starts from the disk cache.
func TestLastKnownResourcesPersist(t *testing.T) {
	srv, base := docserver.Start(t)
	gv := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	live := apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Resources: []apidiscoveryv2.APIResourceDiscovery{{
		Resource: "pods", SingularResource: "pod", ResponseKind: &metav1.GroupVersionKind{Group: "metrics.k8s.io", Version: "v1beta1", Kind: "PodMetrics"},
		Scope: apidiscoveryv2.ScopeNamespace, Verbs: []string{"get", "list"}, ShortNames: []string{"pm"}, Categories: []string{"metrics"},
		Subresources: []apidiscoveryv2.APISubresourceDiscovery{{Subresource: "status", ResponseKind: &metav1.GroupVersionKind{Kind: "PodMetrics"}, Verbs: []string{"get"}}},
	}, {
		Resource: "nodes", ResponseKind: &metav1.GroupVersionKind{Kind: "NodeMetrics"}, Scope: apidiscoveryv2.ScopeCluster, Verbs: []string{"get"},
	}}}
	if err := srv.SetGroupVersion(gv.Group, live); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	client := warmClients(t, nil, base, clk)
	first := client()
	seen, err := first.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetGroupVersion(gv.Group, apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Freshness: apidiscoveryv2.DiscoveryFreshnessStale}); err != nil {
		t.Fatal(err)
	}
	stale, err := first.Refresh(context.Background())
	if !errors.Is(err, discovery.ErrStale) {
		t.Fatalf("refresh: %v, want the stale group-version", err)
	}
	for _, tc := range []struct {
		name string
		c    *discovery.Client
		step time.Duration
	}{{"within the max age, from disk", client(), 0}, {"past it, after two 304s", client(), 2 * time.Minute}} {
		clk.Step(tc.step)
		s, err := tc.c.Snapshot(context.Background())
		if !errors.Is(err, discovery.ErrStale) {
			t.Fatalf("%s: %v, want the stale group-version", tc.name, err)
		}
		v, ok := s.Version(gv)
		if !ok || !v.LastKnown || v.Freshness != surface.FreshnessStale {
			t.Fatalf("%s: %+v, want Stale with last known resources", tc.name, v)
		}
		if !slices.Equal(flatten(s), flatten(stale)) || !slices.Equal(flatten(s), flatten(seen)) {
			t.Errorf("%s: resources differ from those last seen:\n%v\n%v", tc.name, flatten(s), flatten(seen))
		}
	}
}

// sameSources reports whether a and b were read in the same forms.
func sameSources(a, b *discovery.Snapshot) bool {
	ac, an := a.Sources()
	bc, bn := b.Sources()
	return ac == bc && an == bn
}
