package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

func newClient(t testing.TB, base string, opts ...discovery.Option) *discovery.Client {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shared gives a client made without a Fleet the fleet's table.
func shared(s *surfaces) discovery.Option { return discovery.WithSurfaces(s.table) }

// coldStart is a cold start of c as a fleet's round makes it: the guess
// worked out and offered first (prepare, with like the WithLike cluster's
// client or nil), then the first read.
func coldStart(t *testing.T, s *surfaces, c, like *discovery.Client) *discovery.Snapshot {
	t.Helper()
	return coldStartWithin(t, context.Background(), s, c, like)
}

func coldStartWithin(t *testing.T, ctx context.Context, s *surfaces, c, like *discovery.Client) *discovery.Snapshot {
	t.Helper()
	tell, err := s.prepare(ctx, c, like)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(ctx)
	if tell != nil {
		if err != nil {
			tell(nil)
		} else {
			tell(snap)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func snapshot(t *testing.T, c *discovery.Client) *discovery.Snapshot {
	t.Helper()
	s, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSurfacesShareContent: clusters that serve the same documents share
// one decoded snapshot content (one generation), and a client that starts
// cold on such a cluster has the server confirm the held surface with two
// 304s, no body; a cluster of another surface gets its own content and
// costs what it costs without Surfaces. Like picks the surface to
// offer when the most-read one is not it.
func TestSurfacesShareContent(t *testing.T) {
	surfaces := newSurfaces()
	a1, baseA1 := docserver.Start(t, docserver.WithCRDs(20, 4))
	a2, baseA2 := docserver.Start(t, docserver.WithCRDs(20, 4))
	b1, baseB1 := docserver.Start(t, docserver.WithCRDs(30, 5))
	b2, baseB2 := docserver.Start(t, docserver.WithCRDs(30, 5))
	// The fake builds its OpenAPI root on the first request, which a real
	// server keeps built: so that no size probe times out on that (it did
	// under the race detector on a loaded machine).
	for _, base := range []string{baseA1, baseA2, baseB1, baseB2} {
		warmOpenAPIRoot(t, base)
	}

	first := newClient(t, baseA1, shared(surfaces), discovery.WithJSONOnly())
	s1 := coldStart(t, surfaces, first, nil)
	if got := a1.Statuses(); got["/api"] != http.StatusOK || got["/apis"] != http.StatusOK {
		t.Fatalf("first client: %v, want two 200s", got)
	}

	a2.ResetRequests()
	second := newClient(t, baseA2, shared(surfaces), discovery.WithJSONOnly())
	s2 := coldStart(t, surfaces, second, nil)
	if got := a2.Statuses(); len(got) != 3 || got["/openapi/v3"] != http.StatusPartialContent || got["/api"] != http.StatusNotModified || got["/apis"] != http.StatusNotModified {
		t.Errorf("a cold client on a held surface: %v, want the probe's 206 and two 304s", got)
	}
	if st := second.Stats(); st.SurfaceHits != 1 || st.Requests != 3 || st.Bytes > 1 {
		t.Errorf("second client's stats: %+v, want one surface hit, three requests and no body but the probe's byte", st)
	}
	if s2.Generation() != s1.Generation() || &s2.Groups()[0] != &s1.Groups()[0] {
		t.Errorf("the two clusters' snapshots do not share their content (generations %d, %d)", s1.Generation(), s2.Generation())
	}
	if s2.Fetched().Before(s1.Fetched()) || s2.Err() != nil {
		t.Errorf("second snapshot: fetched %v (first %v), err %v", s2.Fetched(), s1.Fetched(), s2.Err())
	}

	// Another surface: the guess (the most read surface) is wrong for
	// /apis, which comes whole; /api is the same on both.
	b1.ResetRequests()
	third := newClient(t, baseB1, shared(surfaces), discovery.WithJSONOnly())
	s3 := coldStart(t, surfaces, third, nil)
	if got := b1.Statuses(); got["/apis"] != http.StatusOK {
		t.Errorf("a cold client on another surface: %v, want /apis 200", got)
	}
	if s3.Generation() == s1.Generation() || len(s3.Groups()) == len(s1.Groups()) {
		t.Errorf("another surface shares the first's content")
	}
	if got := surfaces.table.Len(); got != 2 {
		t.Errorf("surfaces held: %d, want 2", got)
	}

	// The first surface is the most read (two clients); Like offers
	// the other.
	b2.ResetRequests()
	fourth := newClient(t, baseB2, shared(surfaces), discovery.WithJSONOnly())
	s4 := coldStart(t, surfaces, fourth, third)
	if got := b2.Statuses(); got["/api"] != http.StatusNotModified || got["/apis"] != http.StatusNotModified {
		t.Errorf("Like: %v, want two 304s", got)
	}
	if s4.Generation() != s3.Generation() {
		t.Errorf("Like: not the like cluster's content")
	}
	// A third client of the first surface makes it the most read again
	// (three against two); without Like, the server's fingerprint
	// still names the second.
	coldStart(t, surfaces, newClient(t, baseA2, shared(surfaces), discovery.WithJSONOnly()), nil)
	b2.ResetRequests()
	fifth := newClient(t, baseB2, shared(surfaces), discovery.WithJSONOnly())
	if s5 := coldStart(t, surfaces, fifth, nil); s5.Generation() != s3.Generation() {
		t.Errorf("the fingerprint's surface was not adopted")
	}
	if got := b2.Statuses(); got["/api"] != http.StatusNotModified || got["/apis"] != http.StatusNotModified {
		t.Errorf("without Like, the fingerprint names the surface: %v, want two 304s", got)
	}
	// Behind a proxy that does not answer ranges there is no fingerprint:
	// the surface the most cold starts read (the first, after two more
	// reads) is offered, not the one read last (the table's default: the
	// second, read last here).
	for range 2 {
		coldStart(t, surfaces, newClient(t, baseA2, shared(surfaces), discovery.WithJSONOnly()), nil)
	}
	if s := coldStart(t, surfaces, newClient(t, baseB1, shared(surfaces), discovery.WithJSONOnly()), nil); s.Generation() != s3.Generation() {
		t.Fatalf("a cold start of the second surface read another")
	}
	noRanges := withoutRanges(t, baseB2)
	b2.ResetRequests()
	coldStart(t, surfaces, newClient(t, noRanges, shared(surfaces), discovery.WithJSONOnly()), nil)
	if got := b2.Statuses(); got["/apis"] != http.StatusOK {
		t.Errorf("without a fingerprint the most read surface is offered first: %v, want /apis 200", got)
	}

	// Every client's later refreshes are its own cluster's: a change on
	// a2 reaches second only.
	if err := a2.AddCRD(docserver.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "Thing", Plural: "things"}); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := second.Current().Group("new.example.com"); !ok {
		t.Errorf("the changed cluster's client does not see its change")
	}
	if _, ok := first.Current().Group("new.example.com"); ok {
		t.Errorf("another cluster's client sees the change")
	}
}

// TestSurfacesNeverLendHistory: a cluster whose aggregated API server is
// down (a Stale group-version, no resources) starts cold from a guessed
// surface in which that group-version is served: the snapshot must not
// take the resources from the guess (a cluster's last known resources are
// its own), and the incomplete content is not shared.
func TestSurfacesNeverLendHistory(t *testing.T) {
	surfaces := newSurfaces()
	_, baseA := docserver.Start(t, docserver.WithCRDs(20, 4))
	c, baseC := docserver.Start(t, docserver.WithCRDs(20, 4))
	gv := schema.GroupVersion{Group: "g001.stress.example.com", Version: "v1beta1"}
	if err := c.SetGroupVersion(gv.Group, apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}); err != nil {
		t.Fatal(err)
	}
	held := newClient(t, baseA, shared(surfaces), discovery.WithJSONOnly())
	defer runtime.KeepAlive(held) // Surfaces holds contents weakly
	if v, ok := snapshot(t, held).Version(gv); !ok || len(v.Resources) == 0 {
		t.Fatalf("the guessed surface does not serve %s", gv)
	}
	s, err := newClient(t, baseC, shared(surfaces), discovery.WithJSONOnly()).Snapshot(context.Background())
	var partial *discovery.PartialError
	if s == nil || !errors.As(err, &partial) {
		t.Fatalf("snapshot %v, error %v: want a partial one", s, err)
	}
	v, ok := s.Version(gv)
	if !ok || v.Freshness != surface.FreshnessStale {
		t.Fatalf("%s: %+v, want it listed Stale", gv, v)
	}
	if len(v.Resources) != 0 || v.LastKnown {
		t.Errorf("the Stale group-version took %d resources from another cluster's surface", len(v.Resources))
	}
	if got := surfaces.table.Len(); got != 1 {
		t.Errorf("surfaces held: %d, want only the complete one", got)
	}
	c.ResetRequests()
	if _, err := newClient(t, baseC, shared(surfaces), discovery.WithJSONOnly()).Snapshot(context.Background()); !errors.As(err, &partial) {
		t.Fatal(err)
	}
	if got := c.Statuses(); got["/apis"] != http.StatusOK {
		t.Errorf("an incomplete surface was offered to the server: %v", got)
	}
}

// TestSurfacesForget: a surface no client holds any more is forgotten.
func TestSurfacesForget(t *testing.T) {
	surfaces := newSurfaces()
	_, base := docserver.Start(t, docserver.WithCRDs(5, 1))
	func() {
		c := newClient(t, base, shared(surfaces), discovery.WithJSONOnly())
		snapshot(t, c)
		if got := surfaces.table.Len(); got != 1 {
			t.Fatalf("surfaces held: %d, want 1", got)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for surfaces.table.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a surface no client holds is still held")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestContentCache: clusters of one surface store its documents once in
// the shared content cache, each cluster's own entry holding only its
// ETags; a new process (new clients, a new Surfaces) starts every cluster
// from the disk, decodes the documents once, and revalidates each with
// two 304s.
func TestContentCache(t *testing.T) {
	dir := t.TempDir()
	var bases []string
	var servers []*docserver.Server
	for range 3 {
		srv, base := docserver.Start(t, docserver.WithCRDs(40, 4))
		servers, bases = append(servers, srv), append(bases, base)
	}
	open := func(name string) *diskcache.Cache {
		c, err := diskcache.Open(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	run := func() []*discovery.Client {
		content := open("kubeatlas-content")
		surfaces := newSurfaces()
		var clients []*discovery.Client
		for _, base := range bases {
			c := newClient(t, base, shared(surfaces), discovery.WithJSONOnly(), discovery.WithDiskCache(&contentStore{own: open(base), content: content, stored: &sync.Map{}}))
			snapshot(t, c)
			clients = append(clients, c)
		}
		return clients
	}
	first := run()
	content := open("kubeatlas-content")
	contentBytes, contentEntries := content.Usage()
	if contentEntries != 2 {
		t.Errorf("content cache: %d entries, want the two documents once", contentEntries)
	}
	for _, base := range bases {
		if b, n := open(base).Usage(); n != 1 || b > contentBytes/10 {
			t.Errorf("cluster %s's cache: %d entries, %d bytes (the documents are %d bytes): want one small entry", base, n, b, contentBytes)
		}
	}
	for _, srv := range servers {
		srv.ResetRequests()
	}
	second := run()
	for i, c := range second {
		st := c.Stats()
		if st.DiskLoads != 1 {
			t.Errorf("client %d: %d disk loads, want 1", i, st.DiskLoads)
		}
		if s, err := c.Refresh(context.Background()); err != nil || s.Generation() != second[0].Current().Generation() {
			t.Errorf("client %d: refresh %v, generation %d, want the shared one", i, err, s.Generation())
		}
		if got := servers[i].Statuses(); got["/api"] != http.StatusNotModified || got["/apis"] != http.StatusNotModified {
			t.Errorf("client %d revalidated with %v, want two 304s", i, got)
		}
	}
	if second[0].Current().Generation() == first[0].Current().Generation() {
		t.Errorf("the second run shares the first run's content: it did not read the disk")
	}
}

// TestSurfacesShareOnlyWhatTheETagNames: a cluster that sends documents of
// its own making under another surface's ETag (a compromised or buggy
// server, or a proxy) does not get them shared with the fleet: another
// cluster of that surface still reads its own server's documents.
func TestSurfacesShareOnlyWhatTheETagNames(t *testing.T) {
	surfaces := newSurfaces()
	real, baseReal := docserver.Start(t, docserver.WithCRDs(20, 4))
	_, baseOther := docserver.Start(t, docserver.WithCRDs(5, 1))
	// The real surface's ETag for /apis.
	probe := newClient(t, baseReal, discovery.WithJSONOnly())
	_, realETag := snapshot(t, probe).ETags()
	// The forger serves the other surface's documents under it.
	otherURL, err := url.Parse(baseOther)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(otherURL)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path == "/apis" && resp.Header.Get("ETag") != "" {
			resp.Header.Set("ETag", realETag)
		}
		return nil
	}
	forger := httptest.NewServer(proxy)
	t.Cleanup(forger.Close)
	forged := snapshot(t, newClient(t, forger.URL, shared(surfaces), discovery.WithJSONOnly()))
	if _, e := forged.ETags(); e != realETag {
		t.Fatalf("the forger's ETag: %s", e)
	}
	if got := surfaces.table.Len(); got != 0 {
		t.Errorf("a document that is not the one its ETag names was shared (%d surfaces held)", got)
	}
	real.ResetRequests()
	honest := snapshot(t, newClient(t, baseReal, shared(surfaces), discovery.WithJSONOnly()))
	if len(honest.Groups()) == len(forged.Groups()) {
		t.Errorf("a cluster of the real surface got the forger's documents")
	}
	if got := real.Statuses(); got["/apis"] != http.StatusOK {
		t.Errorf("the real cluster's /apis: %v, want a 200 of its own", got)
	}

}

// TestSurfacesTieGoesToTheLastRead: of surfaces read by as many clients,
// a cold start offers the one read last.
func TestSurfacesTieGoesToTheLastRead(t *testing.T) {
	for range 5 { // map order would pick either, half the time
		surfaces := newSurfaces()
		_, baseA := docserver.Start(t, docserver.WithCRDs(20, 4))
		_, baseB := docserver.Start(t, docserver.WithCRDs(30, 5))
		b2, baseB2 := docserver.Start(t, docserver.WithCRDs(30, 5))
		// No fingerprints: servers whose ranges go unanswered.
		a := newClient(t, withoutRanges(t, baseA), shared(surfaces), discovery.WithJSONOnly())
		b := newClient(t, withoutRanges(t, baseB), shared(surfaces), discovery.WithJSONOnly())
		snapshot(t, a)
		snapshot(t, b)
		b2.ResetRequests()
		snapshot(t, newClient(t, withoutRanges(t, baseB2), shared(surfaces), discovery.WithJSONOnly()))
		if got := b2.Statuses(); got["/apis"] != http.StatusNotModified {
			t.Fatalf("a cold start after two surfaces read once each: %v, want the last read offered (304)", got)
		}
		runtime.KeepAlive([]*discovery.Client{a, b})
	}
}

// withoutRanges puts a proxy in front of base that drops Range headers, as
// some proxies do: the OpenAPI root then comes whole.
func withoutRanges(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Header.Del("Range")
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSurfacesFingerprintRounds: a round of cold starts, all at once, over
// clusters of two surfaces reads each surface's /apis once: the clients
// whose servers have one fingerprint wait for the first of them and then
// have it confirmed with 304s. Behind a proxy that ignores ranges, the
// root is asked for once, not by every client.
func TestSurfacesFingerprintRounds(t *testing.T) {
	surfaces := newSurfaces()
	var servers []*docserver.Server
	var clients []*discovery.Client
	var first string
	for i := range 12 {
		srv, base := docserver.Start(t, docserver.WithCRDs(20+10*(i%2), 4+i%2))
		if i == 0 {
			first = base
		}
		// Slow enough that every client probes before any has read.
		srv.InjectFault("/apis", docserver.Fault{Latency: 200 * time.Millisecond})
		// The fake builds its OpenAPI root on the first request, which a
		// real server keeps built: so that no probe waits for that.
		warmOpenAPIRoot(t, base)
		srv.ResetRequests()
		servers = append(servers, srv)
		clients = append(clients, newClient(t, base, shared(surfaces), discovery.WithJSONOnly()))
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { coldStart(t, surfaces, c, nil) })
	}
	wg.Wait()
	bodies, hits := 0, int64(0)
	for i, srv := range servers {
		if srv.Statuses()["/apis"] == http.StatusOK {
			bodies++
		}
		hits += clients[i].Stats().SurfaceHits
	}
	if bodies != 2 || hits != 10 {
		t.Errorf("12 concurrent cold starts over 2 surfaces: %d /apis bodies, %d surface hits; want 2 and 10", bodies, hits)
	}
	if got := surfaces.table.Len(); got != 2 {
		t.Errorf("surfaces held: %d, want 2", got)
	}

	// One proxy host in front of servers that answer ranges, which it
	// does not pass on: the first probe learns it.
	other := newSurfaces()
	var roots int
	var mu sync.Mutex
	u, _ := url.Parse(first)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Header.Del("Range")
		if r.Out.URL.Path == "/openapi/v3" {
			mu.Lock()
			roots++
			mu.Unlock()
		}
	}}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	for range 3 {
		coldStart(t, other, newClient(t, front.URL, shared(other), discovery.WithJSONOnly()), nil)
	}
	if roots != 1 {
		t.Errorf("a host that ignores ranges had the OpenAPI root asked for %d times, want once", roots)
	}
	runtime.KeepAlive(clients)
}

// warmOpenAPIRoot reads a fake server's OpenAPI root once (the fake builds
// it on the first request; a real server keeps it built).
func warmOpenAPIRoot(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/openapi/v3")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// TestProbeDoesNotHoldAColdStart: a server whose OpenAPI root does not
// answer (one rebuilding it after a CRD change, say) does not hold a cold
// start: the probe gives up, and the cold start goes on without a
// fingerprint.
func TestProbeDoesNotHoldAColdStart(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(5, 1))
	srv.InjectFault("/openapi/v3", docserver.Fault{Latency: time.Minute})
	s := newSurfaces()
	c := newClient(t, base, shared(s), discovery.WithJSONOnly(), discovery.WithRefreshTimeout(20*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	coldStartWithin(t, ctx, s, c, nil) // fails the test if the cold start fails
	if got := srv.Statuses(); got["/api"] != http.StatusOK || got["/apis"] != http.StatusOK {
		t.Errorf("requests %v: want both documents read", got)
	}
}

// TestStatsCountProbes: the size probes' bytes, which go through each
// cluster's connection but no discovery client's Stats.Bytes, are in the
// fleet's Stats.Bytes.
func TestStatsCountProbes(t *testing.T) {
	f, err := New()
	if err != nil {
		t.Fatal(err)
	}
	var clusters []*Cluster
	for i := range 2 {
		_, base := docserver.Start(t, docserver.WithCRDs(5, 1))
		warmOpenAPIRoot(t, base)
		c, err := f.Add(fmt.Sprintf("c%d", i), &rest.Config{Host: base})
		if err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, c)
	}
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range clusters {
		sum += c.Discovery().Stats().Bytes
	}
	probes := f.surfaces.probeBytes.Load()
	if st := f.Stats(); probes <= 0 || st.Bytes != sum+probes {
		t.Errorf("fleet bytes %d, clients' %d, probes' %d: want the probes' counted once, and some", st.Bytes, sum, probes)
	}
}
