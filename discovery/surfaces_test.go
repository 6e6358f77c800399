package discovery_test

import (
	"context"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

func snapshotOfNew(t *testing.T, base string, opts ...discovery.Option) (*discovery.Client, *discovery.Snapshot) {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// TestSurfacesShareOnlyCheckedContent: a Surfaces table holds content
// whose documents were checked against their ETags, and nothing else: not
// protobuf (which cannot be checked, so a client given a table reads
// JSON), not a snapshot with a Stale
// group-version (whose last known resources are its own cluster's). A
// cold start offers a held surface to its server (two 304s, no body) and
// shares its content; Offer refuses a snapshot that may not be shared.
func TestSurfacesShareOnlyCheckedContent(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	table := discovery.NewSurfaces()

	_, unchecked := snapshotOfNew(t, base) // protobuf: cannot be checked against its ETag
	// A client given a table reads JSON, which can be checked.
	first, held := snapshotOfNew(t, base, discovery.WithSurfaces(table))
	if src, _ := held.Sources(); src.Protobuf {
		t.Errorf("a client given a table read protobuf")
	}
	if n := table.Len(); n != 1 {
		t.Fatalf("a complete JSON snapshot was not shared (%d surfaces held)", n)
	}

	srv.ResetRequests()
	second, s := snapshotOfNew(t, base, discovery.WithSurfaces(table), discovery.WithJSONOnly())
	if got := srv.Statuses(); got["/api"] != http.StatusNotModified || got["/apis"] != http.StatusNotModified {
		t.Errorf("a cold start with a held surface: %v, want two 304s", got)
	}
	if &s.Groups()[0] != &held.Groups()[0] || s.Generation() != held.Generation() || second.Stats().SurfaceHits != 1 {
		t.Errorf("the second client does not share the held content (surface hits %d)", second.Stats().SurfaceHits)
	}

	// A snapshot that may not be shared is not offered.
	third, err := discovery.NewForHTTPClient(nil, base, discovery.WithSurfaces(table), discovery.WithJSONOnly())
	if err != nil {
		t.Fatal(err)
	}
	if table.Offer(third, unchecked) {
		t.Error("a protobuf snapshot was offered")
	}
	if !table.Offer(third, held) {
		t.Error("a shared snapshot could not be offered")
	}
	if table.Offer(third, nil) {
		t.Error("Offer of nil offered something")
	}

	// A Stale group-version: not shared.
	stale, staleBase := docserver.Start(t, docserver.WithCRDs(20, 4))
	if err := stale.SetGroupVersion("g001.stress.example.com", apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Freshness: apidiscoveryv2.DiscoveryFreshnessStale}); err != nil {
		t.Fatal(err)
	}
	c, err := discovery.NewForHTTPClient(nil, staleBase, discovery.WithSurfaces(table), discovery.WithJSONOnly())
	if err != nil {
		t.Fatal(err)
	}
	if partial, _ := c.Snapshot(context.Background()); partial == nil {
		t.Fatal("no snapshot")
	}
	if n := table.Len(); n != 1 {
		t.Errorf("an incomplete snapshot was shared (%d surfaces held)", n)
	}
	runtime.KeepAlive([]any{first, second, held}) // the table holds surfaces weakly
}

// keyLog is a store that records the keys put in it.
type keyLog struct {
	diskcachetest.Memory
	mu   sync.Mutex
	puts []diskcache.Key
}

func newKeyLog() *keyLog {
	l := &keyLog{}
	l.After = func(op string, k diskcache.Key) {
		if op == "put" {
			l.mu.Lock()
			l.puts = append(l.puts, k)
			l.mu.Unlock()
		}
	}
	return l
}

func (l *keyLog) content() (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.puts {
		if k.Content {
			n++
		}
	}
	return n
}

// TestSurfacesPersistOnlyCheckedDocumentsByETag: with a Surfaces table, a
// client persists each document checked against its ETag as an entry of
// its own, a Content key named by the ETag (which a fleet's store keeps
// once for all clusters), and a client without one (here reading
// protobuf, which cannot be checked) files its documents inside its own
// entry only: no cluster can put a document of its own
// making under another's ETag. A new client whose table holds the content
// starts from it without decoding, once the server confirms it (the store
// is not a *diskcache.Cache).
func TestSurfacesPersistOnlyCheckedDocumentsByETag(t *testing.T) {
	_, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	table := discovery.NewSurfaces()

	checked := newKeyLog()
	_, s := snapshotOfNew(t, base, discovery.WithSurfaces(table), discovery.WithJSONOnly(), discovery.WithDiskCache(checked))
	if n := checked.content(); n != 2 || checked.Len() != 3 {
		t.Errorf("a JSON client's store: %d entries, %d by ETag; want its entry and the two documents", checked.Len(), n)
	}
	unchecked := newKeyLog()
	snapshotOfNew(t, base, discovery.WithDiskCache(unchecked)) // protobuf, no table
	if n := unchecked.content(); n != 0 || unchecked.Len() != 1 {
		t.Errorf("a protobuf client's store: %d entries, %d by ETag; want its own entry only", unchecked.Len(), n)
	}

	// A warm start whose table holds the content takes it as is.
	wc, ws := snapshotOfNew(t, base, discovery.WithSurfaces(table), discovery.WithJSONOnly(), discovery.WithDiskCache(checked))
	if st := wc.Stats(); st.DiskLoads != 1 || st.NotModified != 2 || ws.Generation() != s.Generation() || &ws.Groups()[0] != &s.Groups()[0] {
		t.Errorf("warm start: %+v, generation %d, want the held content's %d, confirmed by two 304s", st, ws.Generation(), s.Generation())
	}
}

// TestColdStartDoesNoOtherWork: a cold start with a Surfaces table sends its
// two requests and nothing else, and waits for nothing but them: whatever
// a fleet works out for it (a probe of the server, other clusters' cold
// starts) is done before, off its refresh. Before, the table was a hook
// that probed the server's OpenAPI root and waited for other cold starts
// on the refresh goroutine.
func TestColdStartDoesNoOtherWork(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(5, 1))
	srv.InjectFault("/openapi/v3", docserver.Fault{Latency: time.Minute})
	table := discovery.NewSurfaces()
	snapshotOfNew(t, base, discovery.WithSurfaces(table), discovery.WithJSONOnly())
	srv.ResetRequests()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := discovery.NewForHTTPClient(nil, base, discovery.WithSurfaces(table), discovery.WithJSONOnly())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if got := srv.Statuses(); len(got) != 2 || got["/api"] != http.StatusNotModified || got["/apis"] != http.StatusNotModified {
		t.Errorf("a cold start's requests: %v, want /api and /apis answered 304, nothing else", got)
	}
}

// TestLoadSendsNoRequest: Load reads the disk cache's snapshot without a
// request, and says so when there is none. What a store other than a
// *diskcache.Cache holds it does not publish: the server has not
// confirmed it.
func TestLoadSendsNoRequest(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(5, 1))
	disk, err := diskcache.Open(t.TempDir(), base)
	if err != nil {
		t.Fatal(err)
	}
	shared := &diskcachetest.Memory{}
	for name, store := range map[string]diskcache.Store{"own": disk, "shared": shared} {
		c, err := discovery.NewForHTTPClient(nil, base, discovery.WithDiskCache(store))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := c.Load(context.Background()); s != nil || err != nil {
			t.Fatalf("%s: Load of an empty disk cache: %v, %v; want nothing", name, s, err)
		}
		if _, err := c.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	srv.ResetRequests()
	warm, err := discovery.NewForHTTPClient(nil, base, discovery.WithDiskCache(disk))
	if err != nil {
		t.Fatal(err)
	}
	s, err := warm.Load(context.Background())
	if err != nil || s == nil || !s.FromDisk() {
		t.Fatalf("Load of a warm disk cache: %v; want its snapshot", err)
	}
	unconfirmed, err := discovery.NewForHTTPClient(nil, base, discovery.WithDiskCache(shared))
	if err != nil {
		t.Fatal(err)
	}
	s, err = unconfirmed.Load(context.Background())
	if err != nil || s != nil || unconfirmed.Current() != nil || unconfirmed.Stats().DiskLoads != 1 {
		t.Fatalf("Load of a warm shared store: %v, %v, %d disk loads; want it read and nothing published", s, err, unconfirmed.Stats().DiskLoads)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("Load sent %d requests, want none", n)
	}
}

// TestSurfacesGuessTheSurfaceReadLast: a cold start that nothing was
// offered to asks its server to confirm the surface a client read or
// confirmed last, however often others were read: clients of one server
// (package shared's) come one after another, and a fleet offers its own
// guesses (Offer).
func TestSurfacesGuessTheSurfaceReadLast(t *testing.T) {
	_, baseA := docserver.Start(t, docserver.WithCRDs(20, 4))
	b, baseB := docserver.Start(t, docserver.WithCRDs(30, 5))
	table := discovery.NewSurfaces()
	snapshotOfNew(t, baseA, discovery.WithSurfaces(table))
	snapshotOfNew(t, baseA, discovery.WithSurfaces(table)) // A read twice
	_, sb := snapshotOfNew(t, baseB, discovery.WithSurfaces(table))
	b.ResetRequests()
	c, s := snapshotOfNew(t, baseB, discovery.WithSurfaces(table))
	if got := b.Statuses(); got["/api"] != http.StatusNotModified || got["/apis"] != http.StatusNotModified {
		t.Errorf("a cold start after a read of B: %v, want two 304s (B guessed)", got)
	}
	if c.Stats().SurfaceHits != 1 || s.Generation() != sb.Generation() {
		t.Errorf("surface hits %d, generation %d (B's %d)", c.Stats().SurfaceHits, s.Generation(), sb.Generation())
	}
}
