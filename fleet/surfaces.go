package fleet

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// surfaces is how a fleet's clusters share discovery. The sharing itself
// is discovery's: every cluster's client is given the fleet's
// discovery.Surfaces table, so clusters that serve the same documents hold
// one decoded copy of them (and, through restmapper.Indexes, which shares
// by Snapshot.Generation, one REST mapper index), and a cluster that
// starts with nothing asks its server to confirm a surface the table holds
// (two 304s, no body) instead of having it sent again.
//
// What is the fleet's is the guess a cold start offers, worked out in the
// fleet's refresh round on the round's goroutine before the cluster's
// refresh (prepare), never on the refresh's: a kube-apiserver compares
// If-None-Match with its current ETag as one exact string, so a cold start
// offers one surface: the one of the cluster WithLike names (a cluster known to
// be of the same kind); else, of the surfaces that servers of the same
// fingerprint turned out to serve, the most read: the fingerprint is the
// size of the server's OpenAPI v3 root (one request answered 206 with one
// byte; see probe.go for what it cannot tell apart); else (no fingerprint)
// the surface the most cold starts of the fleet read. A wrong guess costs what no
// guess costs: the server sends the documents. Cold starts of one
// fingerprint wait for the first of them, so a round of cold starts over
// many clusters reads each surface's documents about once, however many
// run at a time. A cluster whose disk cache (WithCacheDir) holds a
// snapshot starts warm from it, and is offered nothing.
//
// It is safe for concurrent use.
type surfaces struct {
	table *discovery.Surfaces

	mu sync.Mutex
	// prints maps a cold start's fingerprint of its server (probe.go) to
	// the surfaces servers of that fingerprint turned out to serve, by
	// generation (at most maxPrinted each); pending holds the
	// fingerprints whose first cold start is under way, which the others
	// of that fingerprint wait for (closed when it ends), so that a cold
	// round over many clusters reads each surface's documents once, not
	// once per concurrent client.
	prints  map[string]map[uint64]*printed
	pending map[string]chan struct{}
	seq     uint64 // orders printed surfaces by when they were last read
	// noRanges holds the hosts (scheme://host) that answered a probe with
	// the whole document: they are not probed again.
	noRanges map[string]bool
	// probeBytes counts the probes' bytes, which no discovery client's
	// Stats counts (Fleet.Stats adds them).
	probeBytes atomic.Int64
}

// printed is a surface a server of some fingerprint turned out to serve.
// It is held (a snapshot of it) so that it can be offered while no
// cluster holds it; at most maxPrinted per fingerprint.
type printed struct {
	snap *discovery.Snapshot
	uses int
	last uint64
}

// maxPrinted bounds the surfaces remembered per fingerprint: servers of one
// fingerprint serve a few surfaces at most (a patch release apart). Under
// anyPrint, the least read go first, so the most read stays.
const maxPrinted = 4

func newSurfaces() *surfaces {
	return &surfaces{table: discovery.NewSurfaces(), prints: map[string]map[uint64]*printed{}, pending: map[string]chan struct{}{}, noRanges: map[string]bool{}}
}

// prepare works out what a cold start of c offers its server (see
// surfaces) and offers it through the table, before c's refresh; like is
// the client of the cluster WithLike names, or nil. tell, when not nil, is to be called once the cold
// start has ended, with the snapshot read (nil when none was): it records
// which surface the fingerprint turned out to be and lets the cold starts
// that wait for it go. An error (ctx's) ends the cold start.
func (s *surfaces) prepare(ctx context.Context, c, like *discovery.Client) (tell func(read *discovery.Snapshot), err error) {
	if like != nil && like != c && s.table.Offer(c, like.Current()) {
		return nil, nil
	}
	f, err := s.fingerprint(ctx, c)
	if err != nil {
		return nil, err
	}
	if f == "" {
		// No fingerprint: the surface the most cold starts of the fleet
		// read (the table's own default is the one read last).
		s.mu.Lock()
		best := s.mostReadLocked(anyPrint)
		s.mu.Unlock()
		if best != nil {
			s.table.Offer(c, best)
		}
		return func(read *discovery.Snapshot) { s.tell(anyPrint, nil, read) }, nil
	}
	for {
		s.mu.Lock()
		if best := s.mostReadLocked(f); best != nil {
			s.mu.Unlock()
			s.table.Offer(c, best)
			return func(read *discovery.Snapshot) { s.tell(f, nil, read) }, nil
		}
		wait := s.pending[f]
		if wait == nil {
			lead := make(chan struct{})
			s.pending[f] = lead
			s.mu.Unlock()
			return func(read *discovery.Snapshot) { s.tell(f, lead, read) }, nil
		}
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// anyPrint is no fingerprint: under it are the surfaces every cold start
// turned out to serve, whatever its server's fingerprint, which a cold start
// without one is offered.
const anyPrint = ""

// readLocked counts a read of a surface under fingerprint f.
func (s *surfaces) readLocked(f string, read *discovery.Snapshot) {
	seen := s.prints[f]
	if seen == nil {
		seen = map[uint64]*printed{}
		s.prints[f] = seen
	}
	s.seq++
	if p := seen[read.Generation()]; p != nil {
		p.uses, p.last = p.uses+1, s.seq
		return
	}
	if len(seen) >= maxPrinted {
		// Forget the least read (of those that tie, the one read longest
		// ago).
		var least uint64
		var lp *printed
		for g, p := range seen {
			if lp == nil || p.uses < lp.uses || p.uses == lp.uses && p.last < lp.last {
				least, lp = g, p
			}
		}
		delete(seen, least)
	}
	seen[read.Generation()] = &printed{snap: read, uses: 1, last: s.seq}
}

// mostReadLocked is the surface that the most cold starts of fingerprint
// f turned out to serve; of those that tie, the one read last.
func (s *surfaces) mostReadLocked(f string) *discovery.Snapshot {
	var best *printed
	for _, p := range s.prints[f] {
		if best == nil || p.uses > best.uses || p.uses == best.uses && p.last > best.last {
			best = p
		}
	}
	if best == nil {
		return nil
	}
	return best.snap
}

// tell records which surface a cold start's fingerprint turned out to be
// (read is nil when it failed) and, for the first cold start of the
// fingerprint (lead), lets the clients that waited for it go.
func (s *surfaces) tell(f string, lead chan struct{}, read *discovery.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if read != nil && read.Err() == nil {
		s.readLocked(f, read)
		if f != anyPrint {
			s.readLocked(anyPrint, read)
		}
	}
	if lead != nil {
		delete(s.pending, f)
		close(lead)
	}
}
