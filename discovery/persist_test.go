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
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
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

// TestSharedStoreEntryNeedsTheServer: what a store other than a
// *diskcache.Cache (here diskcachetest.Memory: Redis, any Store) holds for
// the server is used only once the server has answered 304 to the
// client's own requests conditional on its ETags; until then the client
// is cold. Another cluster's entry under this server's key (self-consistent:
// its documents are the ones its ETags name) is never answered, however
// fresh, also when it names a surface the client's Surfaces table holds
// (nothing read, nothing decoded), and is replaced by what the server
// sends; the server's own entry
// costs two conditional requests (two 304s) before the first answer; a part
// that changed is read, the other confirmed; a server that cannot be read
// leaves the client with nothing, as a cold start. (TestWarmStart pins that
// the user's own *diskcache.Cache still answers with no request.) Before,
// the other cluster's entry was answered with no request until the max age.
func TestSharedStoreEntryNeedsTheServer(t *testing.T) {
	// written is a store holding the entry a client of base wrote, and
	// that client's snapshot.
	written := func(t *testing.T, base string) (*diskcachetest.Memory, *discovery.Snapshot) {
		t.Helper()
		store := &diskcachetest.Memory{}
		s, err := newClient(t, base, discovery.WithDiskCache(store)).Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return store, s
	}
	statuses := func(srv *docserver.Server) map[string]int {
		got := srv.Statuses()
		if n := len(srv.Requests()); n != len(got) {
			got["(requests)"] = n
		}
		return got
	}
	t.Run("another cluster's entry", func(t *testing.T) {
		_, other := docserver.Start(t, docserver.WithCRDs(3, 1))
		srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
		truth, err := newClient(t, base).Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		store, hijack := written(t, other)
		if slices.Equal(flatten(hijack), flatten(truth)) {
			t.Fatal("the two servers serve the same discovery")
		}
		srv.ResetRequests()
		c := newClient(t, base, discovery.WithDiskCache(store), discovery.WithMaxAge(time.Hour))
		if s, err := c.Load(t.Context()); s != nil || err != nil || c.Current() != nil {
			t.Errorf("Load: %v, %v; want the entry kept unpublished", s, err)
		}
		got, err := c.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(flatten(got), flatten(truth)) {
			t.Fatalf("answered %d resources, want the server's %d: the other cluster's entry was used", len(flatten(got)), len(flatten(truth)))
		}
		// Both servers serve the same /api (confirmed, so used); /apis
		// is read.
		api, apis := hijack.ETags()
		for _, r := range srv.Requests() {
			want := map[string]struct {
				etag   string
				status int
			}{"/api": {api, http.StatusNotModified}, "/apis": {apis, http.StatusOK}}[r.Path]
			if r.IfNoneMatch != want.etag || r.Status != want.status {
				t.Errorf("%s: If-None-Match %q, status %d; want the entry's ETag %q answered %d", r.Path, r.IfNoneMatch, r.Status, want.etag, want.status)
			}
		}
		if got := statuses(srv); len(got) != 2 {
			t.Errorf("requests %v, want /api and /apis once", got)
		}
		// The entry now holds the server's: the next client's two
		// requests are answered 304.
		srv.ResetRequests()
		next, err := newClient(t, base, discovery.WithDiskCache(store)).Snapshot(t.Context())
		if got := statuses(srv); err != nil || got["/api"] != http.StatusNotModified || got["/apis"] != http.StatusNotModified || len(got) != 2 || !slices.Equal(flatten(next), flatten(truth)) {
			t.Errorf("after the entry was replaced: %v, %v; want two 304s and the server's discovery", got, err)
		}
	})
	t.Run("another cluster's surface, held in memory", func(t *testing.T) {
		// The entry names the ETags of a surface the Surfaces table
		// holds (read from another cluster in this process): nothing to
		// read or decode, but still not this server's until it says so.
		table := discovery.NewSurfaces()
		_, other := docserver.Start(t, docserver.WithCRDs(3, 1))
		srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
		store := &diskcachetest.Memory{}
		hijack, err := newClient(t, other, discovery.WithSurfaces(table), discovery.WithDiskCache(store)).Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		truth, err := newClient(t, base, discovery.WithSurfaces(table)).Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		srv.ResetRequests()
		c := newClient(t, base, discovery.WithSurfaces(table), discovery.WithDiskCache(store), discovery.WithMaxAge(time.Hour))
		got, err := c.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation() == hijack.Generation() || !slices.Equal(flatten(got), flatten(truth)) {
			t.Errorf("answered the other cluster's held surface (%d resources, want the server's %d) after %d requests", len(flatten(got)), len(flatten(truth)), len(srv.Requests()))
		}
		if st := statuses(srv); st["/apis"] != http.StatusOK || len(st) != 2 {
			t.Errorf("requests %v, want /api and /apis once, /apis read", st)
		}
	})
	t.Run("the server's own entry", func(t *testing.T) {
		srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
		store, want := written(t, base)
		srv.ResetRequests()
		c := newClient(t, base, discovery.WithDiskCache(store), discovery.WithMaxAge(time.Hour))
		got, err := c.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st := statuses(srv); st["/api"] != http.StatusNotModified || st["/apis"] != http.StatusNotModified || len(st) != 2 {
			t.Errorf("warm start from a shared store: %v, want exactly /api and /apis answered 304", st)
		}
		if st := c.Stats(); st.DiskLoads != 1 || got.FromDisk() || !slices.Equal(flatten(got), flatten(want)) {
			t.Errorf("%+v, from disk %v; want the stored entry, confirmed", st, got.FromDisk())
		}
		srv.ResetRequests()
		if _, err := c.Snapshot(t.Context()); err != nil || len(srv.Requests()) != 0 {
			t.Errorf("the next Snapshot inside the max age: %v, %d requests; want none", err, len(srv.Requests()))
		}
	})
	t.Run("one part changed", func(t *testing.T) {
		srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
		store, _ := written(t, base)
		if err := srv.AddCRD(docserver.CRD{Group: "later.example.com", Versions: []string{"v1"}, Kind: "Later"}); err != nil {
			t.Fatal(err)
		}
		srv.ResetRequests()
		got, err := newClient(t, base, discovery.WithDiskCache(store)).Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st := statuses(srv); st["/api"] != http.StatusNotModified || st["/apis"] != http.StatusOK || len(st) != 2 {
			t.Errorf("requests %v, want /api confirmed and /apis read", st)
		}
		if _, ok := got.Group("later.example.com"); !ok {
			t.Errorf("the group added after the entry was written is missing")
		}
	})
	t.Run("server unavailable", func(t *testing.T) {
		srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
		store, _ := written(t, base)
		srv.InjectFault("/apis", docserver.Fault{Status: http.StatusServiceUnavailable})
		c := newClient(t, base, discovery.WithDiskCache(store), discovery.WithMaxRetries(0))
		if s, err := c.Snapshot(t.Context()); s != nil || err == nil || c.Current() != nil {
			t.Errorf("Snapshot while the server fails: %v, %v; want no snapshot and the failure, as a cold start", s, err)
		}
	})
}
