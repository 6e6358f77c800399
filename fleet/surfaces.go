package fleet

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// surfaces is what the discovery clients of a fleet share, through the
// discovery.Shared hook each cluster is given (share): the decoded content
// of each API surface one of them has read, by its ContentKey (the ETags
// of its /api and /apis documents, which are the SHA-512 the server
// computes of each). Clusters that serve the same documents then hold one
// copy of them (and, through restmapper.Indexes, which shares by
// Snapshot.Generation, one REST mapper index), however many clusters there
// are; and a cluster that starts with nothing asks its server to confirm a
// surface the fleet already holds, with a conditional request, instead of
// having it sent again: two 304s and no body.
//
// A kube-apiserver compares If-None-Match with its current ETag as one
// exact string (a list of ETags is not accepted), so a cold start offers
// one surface: the one of the cluster Like names (a cluster known to be of
// the same kind); else, of the surfaces that servers of the same
// fingerprint turned out to serve, the most read: the fingerprint is the
// size of the server's OpenAPI v3 root (one request answered 206 with one
// byte; see probe.go for what it cannot tell apart); else the surface the
// most clusters have read (of those that tie, the one read last). A wrong
// guess costs what no guess costs: the server sends the documents. Cold
// starts of one fingerprint wait for the first of them, so a round of cold
// starts over many clusters reads each surface's documents about once,
// however many run at a time.
//
// discovery hands it only content it checked against its ETags, and
// checks what it hands back (discovery.Shared says which and why); the
// fleet reads JSON (discovery.WithJSONOnly), which can be checked. A
// surface no client holds any more is forgotten (contents are held
// weakly). It is safe for concurrent use.
type surfaces struct {
	mu      sync.Mutex
	entries map[string]*surfaceEntry // by ContentKey
	seq     uint64                   // orders entries by when they were last read
	// prints maps a cold start's fingerprint of its server (probe.go) to
	// the surfaces servers of that fingerprint turned out to serve; pending
	// holds the fingerprints whose first cold start is under way, which the
	// others of that fingerprint wait for (closed when it ends), so that a
	// cold round over many clusters reads each surface's documents once,
	// not once per concurrent client.
	prints  map[string]map[string]bool
	pending map[string]chan struct{}
	// noRanges holds the hosts (scheme://host) that answered a probe with
	// the whole document: they are not probed again.
	noRanges map[string]bool
	// probeBytes counts the probes' bytes, which no discovery client's
	// Stats counts (Fleet.Stats adds them).
	probeBytes atomic.Int64
}

type surfaceEntry struct {
	snap weak.Pointer[discovery.Snapshot]
	uses int    // clients that read or confirmed it, over time
	last uint64 // surfaces.seq when it was last read or confirmed
}

func newSurfaces() *surfaces {
	return &surfaces{entries: map[string]*surfaceEntry{}, prints: map[string]map[string]bool{}, pending: map[string]chan struct{}{}, noRanges: map[string]bool{}}
}

// surfaceStats says what a surfaces holds.
type surfaceStats struct {
	surfaces int // distinct contents held (and still in use)
	uses     int // times a client read or confirmed one of them
}

func (s *surfaces) stats() surfaceStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st surfaceStats
	for _, e := range s.entries {
		if e.snap.Value() != nil {
			st.surfaces++
			st.uses += e.uses
		}
	}
	return st
}

// share is one cluster's discovery.Shared: the fleet's surfaces, and the
// client of the cluster Like names, if any.
type share struct {
	s    *surfaces
	like *discovery.Client
}

var _ discovery.Shared = share{}

// Intern returns the held snapshot with sn's content, or holds sn and
// returns it.
func (sh share) Intern(sn *discovery.Snapshot) *discovery.Snapshot {
	k, ok := sn.ContentKey()
	if !ok {
		return sn
	}
	s := sh.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if held := s.useLocked(k); held != nil {
		return held
	}
	s.seq++
	s.entries[k] = &surfaceEntry{snap: weak.Make(sn), uses: 1, last: s.seq}
	runtime.AddCleanup(sn, s.forget, k)
	return sn
}

// Lookup finds a held content by its key, counting a use of it.
func (sh share) Lookup(k string) *discovery.Snapshot {
	s := sh.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.useLocked(k)
}

// forget drops an entry whose content is gone.
func (s *surfaces) forget(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[k]; e != nil && e.snap.Value() == nil {
		delete(s.entries, k)
		for p, keys := range s.prints {
			delete(keys, k)
			if len(keys) == 0 {
				delete(s.prints, p)
			}
		}
	}
}

func (s *surfaces) useLocked(k string) *discovery.Snapshot {
	e := s.entries[k]
	if e == nil {
		return nil
	}
	held := e.snap.Value()
	if held != nil {
		s.seq++
		e.uses, e.last = e.uses+1, s.seq
	}
	return held
}

// mostUsedLocked is the held content that the most clients read, among
// the keys of among (all if nil); of those that tie, the one read last.
func (s *surfaces) mostUsedLocked(among map[string]bool) *discovery.Snapshot {
	var best *discovery.Snapshot
	var bestUses int
	var bestLast uint64
	for k, e := range s.entries {
		if among != nil && !among[k] || e.uses < bestUses || e.uses == bestUses && e.last < bestLast {
			continue
		}
		if sn := e.snap.Value(); sn != nil {
			best, bestUses, bestLast = sn, e.uses, e.last
		}
	}
	return best
}

// Guess is the snapshot a cold start of c asks the server to confirm, or
// nil: the Like cluster's, else the one its server's fingerprint
// (probe.go) turned out to be before, else the one the most clients read.
// A client whose fingerprint another cold start is reading waits for it
// first. done records which surface the fingerprint turned out to be and
// lets the clients that waited for it go.
func (sh share) Guess(ctx context.Context, c *discovery.Client) (*discovery.Snapshot, func(*discovery.Snapshot), error) {
	s := sh.s
	if sh.like != nil && sh.like != c {
		if snap := sh.like.Current(); snap != nil {
			if _, ok := snap.ContentKey(); ok {
				return snap, nil, nil
			}
		}
	}
	f, err := s.fingerprint(ctx, c)
	if err != nil || f == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.mostUsedLocked(nil), nil, err
	}
	for {
		s.mu.Lock()
		if among := s.prints[f]; among != nil {
			if held := s.mostUsedLocked(among); held != nil {
				s.mu.Unlock()
				return held, func(read *discovery.Snapshot) { s.tell(f, nil, read) }, nil
			}
		}
		wait := s.pending[f]
		if wait == nil {
			lead := make(chan struct{})
			s.pending[f] = lead
			best := s.mostUsedLocked(nil)
			s.mu.Unlock()
			return best, func(read *discovery.Snapshot) { s.tell(f, lead, read) }, nil
		}
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// tell records which surface a cold start's fingerprint turned out to be
// (read is nil when it failed) and, for the first cold start of the
// fingerprint (lead), lets the clients that waited for it go.
func (s *surfaces) tell(print string, lead chan struct{}, read *discovery.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if read != nil {
		if k, ok := read.ContentKey(); ok && s.entries[k] != nil {
			if s.prints[print] == nil {
				s.prints[print] = map[string]bool{}
			}
			s.prints[print][k] = true
		}
	}
	if lead != nil {
		delete(s.pending, print)
		close(lead)
	}
}
