package discovery_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// statuses lists the statuses of the discovery requests a server answered
// since its last ResetRequests.
func statuses(srv *discoverytest.Server) map[string]int {
	out := map[string]int{}
	for _, r := range srv.Requests() {
		out[r.Path] = r.Status
	}
	return out
}

func snapshot(t *testing.T, c *discovery.Client) *discovery.Snapshot {
	t.Helper()
	s, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handed is a discovery.Shared that hands out what the test says and
// records what it is called with.
type handed struct {
	guess  *discovery.Snapshot // Guess's answer
	intern *discovery.Snapshot // Intern's answer, when not nil
	held   map[string]*discovery.Snapshot

	mu       sync.Mutex
	interned []*discovery.Snapshot
	done     []*discovery.Snapshot
}

func (h *handed) Guess(context.Context, *discovery.Client) (*discovery.Snapshot, func(*discovery.Snapshot), error) {
	return h.guess, func(read *discovery.Snapshot) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.done = append(h.done, read)
	}, nil
}

func (h *handed) Intern(s *discovery.Snapshot) *discovery.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.interned = append(h.interned, s)
	if h.intern != nil {
		return h.intern
	}
	return s
}

func (h *handed) Lookup(k string) *discovery.Snapshot { return h.held[k] }

// TestSharedChecksWhatItIsHanded: discovery does not take the hook's word
// for what may be shared. A guess whose content could not be shared (here
// read as protobuf, which cannot be checked against its ETag) is not
// offered to the server; a held content that is not the one interned is
// not adopted; a snapshot that is not complete is never handed to Intern.
// The cold start reports what it read to the guess's done, once.
func TestSharedChecksWhatItIsHanded(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	_, otherBase := discoverytest.Start(t, discoverytest.WithCRDs(5, 1))

	unchecked := snapshot(t, newClient(t, base)) // protobuf, no WithShared
	if _, ok := unchecked.ContentKey(); ok {
		t.Fatalf("a protobuf snapshot may be shared")
	}
	other := snapshot(t, newClient(t, otherBase, discovery.WithShared(&handed{}), discovery.WithJSONOnly()))
	if _, ok := other.ContentKey(); !ok {
		t.Fatalf("a complete JSON snapshot read WithShared may not be shared")
	}

	h := &handed{guess: unchecked, intern: other}
	srv.ResetRequests()
	c := newClient(t, base, discovery.WithShared(h), discovery.WithJSONOnly())
	s := snapshot(t, c)
	if got := statuses(srv); got["/api"] != http.StatusOK || got["/apis"] != http.StatusOK {
		t.Errorf("a guess that may not be shared was offered: %v, want two 200s", got)
	}
	if s.Generation() == other.Generation() || len(s.Groups()) == len(other.Groups()) {
		t.Errorf("the client adopted another surface's content that Intern handed back")
	}
	if len(h.done) != 1 || h.done[0] == nil || h.done[0].Generation() != s.Generation() {
		t.Errorf("done called with %v, want once with the snapshot read", h.done)
	}
	if len(h.interned) != 1 {
		t.Fatalf("Intern called %d times, want once", len(h.interned))
	}
	if k, ok := h.interned[0].ContentKey(); !ok || k != mustKey(t, s) {
		t.Errorf("Intern was handed a snapshot of key %q (ok %v), want the one read", k, ok)
	}

	// A Stale group-version: the snapshot is not complete, may not be
	// shared, and is not handed to Intern.
	stale, staleBase := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	if err := stale.SetGroupVersion("g001.stress.example.com", apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Freshness: apidiscoveryv2.DiscoveryFreshnessStale}); err != nil {
		t.Fatal(err)
	}
	h2 := &handed{}
	partial, _ := newClient(t, staleBase, discovery.WithShared(h2), discovery.WithJSONOnly()).Snapshot(context.Background())
	if partial == nil {
		t.Fatal("no snapshot")
	}
	if _, ok := partial.ContentKey(); ok || len(h2.interned) != 0 {
		t.Errorf("an incomplete snapshot may be shared (handed to Intern %d times)", len(h2.interned))
	}
}

func mustKey(t *testing.T, s *discovery.Snapshot) string {
	t.Helper()
	k, ok := s.ContentKey()
	if !ok {
		t.Fatalf("snapshot may not be shared")
	}
	return k
}

// TestSharedPersistsOnlyCheckedDocumentsByETag: with WithShared, a client
// persists each document checked against its ETag as an entry of its own
// under that ETag (which a fleet's store keeps once for all clusters), and
// a document it could not check (protobuf) inside its own entry only: no
// cluster can put a document of its own making under another's ETag. A new
// client whose hook holds the content starts from it without decoding.
func TestSharedPersistsOnlyCheckedDocumentsByETag(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	byETag := func(st *memStore) (n int) {
		for k := range st.m {
			if strings.HasPrefix(k.Name, "kubeatlas/discovery/content/") {
				n++
			}
		}
		return n
	}

	checked := newMemStore()
	s := snapshot(t, newClient(t, base, discovery.WithShared(&handed{}), discovery.WithJSONOnly(), discovery.WithDiskCache(checked)))
	if n := byETag(checked); n != 2 || len(checked.m) != 3 {
		t.Errorf("a JSON client's store: %d entries, %d by ETag; want its entry and the two documents", len(checked.m), n)
	}
	unchecked := newMemStore()
	snapshot(t, newClient(t, base, discovery.WithShared(&handed{}), discovery.WithDiskCache(unchecked)))
	if n := byETag(unchecked); n != 0 || len(unchecked.m) != 1 {
		t.Errorf("a protobuf client's store: %d entries, %d by ETag; want its own entry only", len(unchecked.m), n)
	}

	// A warm start whose hook holds the content takes it as is.
	warm := newClient(t, base, discovery.WithShared(&handed{held: map[string]*discovery.Snapshot{mustKey(t, s): s}}), discovery.WithJSONOnly(), discovery.WithDiskCache(checked))
	ws := snapshot(t, warm)
	if !ws.FromDisk() || ws.Generation() != s.Generation() {
		t.Errorf("warm start: from disk %v, generation %d, want the held content's %d", ws.FromDisk(), ws.Generation(), s.Generation())
	}
}
