package discovery

import (
	"context"
	"runtime"
	"sync"
	"weak"
)

// Surfaces is what the discovery clients of a fleet share (WithSurfaces):
// the decoded content of each API surface one of them has read, by the
// ETags of its /api and /apis documents, which are the SHA-512 the server
// computes of each. Clusters that serve the same documents then hold one
// copy of them (and, through restmapper.Indexes, which shares by
// Snapshot.Generation, one REST mapper index), however many clusters there
// are; and a client
// that starts with nothing asks its server to confirm a surface the fleet
// already holds, with a conditional request, instead of having it sent
// again: two 304s and no body.
//
// A kube-apiserver compares If-None-Match with its current ETag as one
// exact string (a list of ETags is not accepted), so a cold start offers
// one surface: the one of the client WithLike names (a cluster known to be
// of the same kind); else, of the surfaces that servers of the same
// fingerprint turned out to serve, the most read: the fingerprint is the
// size of the server's OpenAPI v3 root (one request answered 206 with one
// byte; see probe.go for what it cannot tell apart); else the surface the
// most clients have read (of those that tie, the one read last). A wrong guess costs what no guess costs: the server
// sends the documents. Cold starts of one fingerprint wait for the first
// of them, so a round of cold starts over many clusters reads each
// surface's documents about once, however many run at a time.
//
// Only complete contents whose documents are the ones their ETags name are
// shared: one with a Stale or failed group-version may carry resources its
// own cluster last knew, which are not the documents' to give another; and
// a cluster must not hand the others documents of its own making under
// another surface's ETag. kube-apiserver's ETag is the SHA-512 of the
// document's JSON, which the client checks; a protobuf document cannot be
// checked, so clients that share a Surfaces should read JSON
// (WithJSONOnly): the documents cost more once per surface, and nothing
// per cluster that the fleet holds. A surface no client holds any more
// is forgotten (Surfaces holds contents weakly). The zero value is not
// usable; use NewSurfaces. It is safe for concurrent use.
type Surfaces struct {
	mu      sync.Mutex
	entries map[surfaceKey]*surfaceEntry
	seq     uint64 // orders entries by when they were last read
	// prints maps a cold start's fingerprint of its server (probe.go) to
	// the surfaces servers of that fingerprint turned out to serve; pending holds the
	// fingerprints whose first cold start is under way, which the others
	// of that fingerprint wait for (closed when it ends), so that a cold
	// round over many clusters reads each surface's documents once, not
	// once per concurrent client.
	prints  map[printKey]map[surfaceKey]bool
	pending map[printKey]chan struct{}
	// noRanges holds the hosts (scheme://host) that answered a probe with
	// the whole document: they are not probed again.
	noRanges map[string]bool
}

type printKey struct{ accept, print string }

// surfaceKey names a content: its documents (by their ETags) as one
// request form (Accept) reads them, in the form the server answered in.
type surfaceKey struct {
	accept      string
	api, apis   string
	core, named Source
}

type surfaceEntry struct {
	content weak.Pointer[content]
	uses    int    // clients that read or confirmed it, over time
	last    uint64 // Surfaces.seq when it was last read or confirmed
}

// NewSurfaces returns an empty table.
func NewSurfaces() *Surfaces {
	return &Surfaces{entries: map[surfaceKey]*surfaceEntry{}, prints: map[printKey]map[surfaceKey]bool{}, pending: map[printKey]chan struct{}{}, noRanges: map[string]bool{}}
}

// SurfaceStats says what a Surfaces holds.
type SurfaceStats struct {
	Surfaces int // distinct contents held (and still in use)
	Uses     int // times a client read or confirmed one of them
}

// Stats counts the surfaces held now.
func (s *Surfaces) Stats() SurfaceStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st SurfaceStats
	for _, e := range s.entries {
		if e.content.Value() != nil {
			st.Surfaces++
			st.Uses += e.uses
		}
	}
	return st
}

func keyOf(accept string, c *content) (surfaceKey, bool) {
	k := surfaceKey{accept: accept, api: c.core.etag, apis: c.named.etag, core: c.core.source, named: c.named.source}
	return k, c.err == nil && c.core.verified && c.named.verified
}

// intern returns the held content with c's documents, or holds c and
// returns it.
func (s *Surfaces) intern(accept string, c *content) *content {
	k, ok := keyOf(accept, c)
	if !ok {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if held := s.useLocked(k); held != nil {
		return held
	}
	s.seq++
	s.entries[k] = &surfaceEntry{content: weak.Make(c), uses: 1, last: s.seq}
	runtime.AddCleanup(c, s.forget, k)
	return c
}

// forget drops an entry whose content is gone.
func (s *Surfaces) forget(k surfaceKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[k]; e != nil && e.content.Value() == nil {
		delete(s.entries, k)
		for p, keys := range s.prints {
			delete(keys, k)
			if len(keys) == 0 {
				delete(s.prints, p)
			}
		}
	}
}

// use finds a held content by its documents, counting a use of it.
func (s *Surfaces) use(k surfaceKey) *content {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.useLocked(k)
}

func (s *Surfaces) useLocked(k surfaceKey) *content {
	e := s.entries[k]
	if e == nil {
		return nil
	}
	held := e.content.Value()
	if held != nil {
		s.seq++
		e.uses, e.last = e.uses+1, s.seq
	}
	return held
}

// mostUsed is the held content for accept that the most clients read;
// of those that tie, the one read last.
func (s *Surfaces) mostUsed(accept string) *content {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mostUsedLocked(nil, accept)
}

// mostUsedLocked is mostUsed among the keys of among (all if nil).
func (s *Surfaces) mostUsedLocked(among map[surfaceKey]bool, accept string) *content {
	var best *content
	var bestUses int
	var bestLast uint64
	for k, e := range s.entries {
		if among != nil && !among[k] || k.accept != accept || e.uses < bestUses || e.uses == bestUses && e.last < bestLast {
			continue
		}
		if c := e.content.Value(); c != nil {
			best, bestUses, bestLast = c, e.uses, e.last
		}
	}
	return best
}

// WithSurfaces makes the client share decoded discovery with the other
// clients given the same table, and start cold from a surface it holds
// (see Surfaces). Default: none, every client holds its own.
func WithSurfaces(s *Surfaces) Option {
	return func(o *options) error { o.surfaces = s; return nil }
}

// WithLike names a client of a cluster expected to serve the same API
// surface (the same Kubernetes version and add-ons): a cold start offers
// its surface to the server first. It needs WithSurfaces (the same table
// for both clients). Default: the surface the most clients of the table
// read.
func WithLike(other *Client) Option {
	return func(o *options) error { o.like = other; return nil }
}

// coldStart is what a cold start guessed, for tell to report back.
type coldStart struct {
	print printKey
	lead  chan struct{} // this client is the first of its fingerprint
}

// guess is the content a cold start asks the server to confirm, or nil:
// the WithLike client's, else the one its server's fingerprint (probe.go)
// turned out to be before, else the one the most clients read. A client
// whose fingerprint another cold start is reading waits for it first.
// The caller passes what it read to tell, whatever happened.
func (c *Client) guess(ctx context.Context) (*content, *coldStart, error) {
	s := c.opts.surfaces
	if s == nil {
		return nil, nil, nil
	}
	accept := c.accept()
	if like := c.opts.like; like != nil && like != c && like.accept() == accept {
		if snap := like.current.Load(); snap != nil {
			if _, ok := keyOf(accept, snap.content); ok {
				return snap.content, nil, nil
			}
		}
	}
	f, err := c.fingerprint(ctx)
	if err != nil || f == "" {
		return s.mostUsed(accept), nil, err
	}
	pk := printKey{accept: accept, print: f}
	for {
		s.mu.Lock()
		if among := s.prints[pk]; among != nil {
			if held := s.mostUsedLocked(among, accept); held != nil {
				s.mu.Unlock()
				return held, &coldStart{print: pk}, nil
			}
		}
		wait := s.pending[pk]
		if wait == nil {
			lead := make(chan struct{})
			s.pending[pk] = lead
			best := s.mostUsedLocked(nil, accept)
			s.mu.Unlock()
			return best, &coldStart{print: pk, lead: lead}, nil
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
// (read is nil when it failed) and lets the clients that waited for it go.
func (s *Surfaces) tell(cs *coldStart, accept string, read *content) {
	if cs == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if read != nil {
		if k, ok := keyOf(accept, read); ok && s.entries[k] != nil {
			if s.prints[cs.print] == nil {
				s.prints[cs.print] = map[surfaceKey]bool{}
			}
			s.prints[cs.print][k] = true
		}
	}
	if cs.lead != nil {
		delete(s.pending, cs.print)
		close(cs.lead)
	}
}
