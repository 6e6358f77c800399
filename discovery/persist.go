package discovery

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/diskcache"
)

// WithDiskCache persists the last aggregated discovery documents, as
// received (protobuf when the server speaks it), with their ETags, in one
// entry of c (a *diskcache.Cache, or any diskcache.Store: an entry that
// does not decode is a miss). A new client starts from it: one file read and decoded, then
// two conditional requests, or none while the snapshot is younger than the
// max age. Legacy discovery (one document per group-version) is not
// persisted. A nil c, or a nil *diskcache.Cache, is no persistence.
// A store other than a *diskcache.Cache (Redis, a fleet's) may be written
// by others, who can file there another cluster's documents with their
// true ETags: what is read back from it is used only once each document's
// ETag is recomputed from it (surface.VerifyAggregated) and the server has
// confirmed those ETags (a 304 to the client's own request conditional on
// them), its last known resources, which no ETag names, are not used, and
// until then the client is cold: the warm start from such a store costs
// two conditional requests (two 304s when nothing changed), and a 200
// instead is read and replaces the entry.
// Default: no persistence.
func WithDiskCache(c diskcache.Store) Option {
	return named("WithDiskCache", func(o *options) error {
		if o.disk = c; diskcache.IsNil(c) {
			o.disk = nil
		}
		return nil
	})
}

// documentKey files a document persisted as an entry of its own (with
// WithSurfaces) under its ETag, whichever cluster served it: a Content key,
// which a store shared by many clusters (fleet's) may keep once for all.
// (A store keeps one value per Name, so the ETag is in the Name too;
// nothing reads it back from there.)
func documentKey(etag string) diskcache.Key {
	return diskcache.Key{Name: "kubeatlas/discovery/document/v2 " + etag, Version: etag, Content: true}
}

// persisted is the header of the entry; the two bodies follow it (unless
// Shared: they are entries of their own, under documentKey), then,
// when LastKnown is not zero, the last known resources of group-versions
// that were not current (an aggregated API server that went away), which
// the bodies no longer hold: an APIGroupDiscoveryList in JSON.
type persisted struct {
	Version   int           `json:"version"`
	Validated time.Time     `json:"validated"`
	Parts     [2]storedPart `json:"parts"` // /api, /apis
	LastKnown int           `json:"lastKnown,omitempty"`
	Shared    bool          `json:"shared,omitempty"`
}

type storedPart struct {
	ETag        string `json:"etag"`
	ContentType string `json:"contentType"`
	Length      int    `json:"length"`
}

const persistVersion = 1

// persistKey names the entry. A diskcache.Cache belongs to one server (its
// directory is named after it), so the key need not name the server; the
// Accept header decides what the documents hold (profile, protobuf).
func (c *Client) persistKey() diskcache.Key {
	return diskcache.Key{Name: "kubeatlas/discovery/v1\n" + c.reader().accept()}
}

// raw is a part's body as received, kept only while persistence needs it.
type raw struct {
	body        []byte
	contentType string
}

// persistState is the client's disk writes. They come after publication
// and off the refresh goroutine: persist queues a published snapshot for
// one writer goroutine, which writes the newest queued (a snapshot
// queued while another is written replaces one still waiting, so a slow
// store is written what is current, not a backlog), and the callers of
// the run that published it wait for that write, or a later one, until
// their context ends. mu guards the fields and is never held across the
// store: a store whose Put hangs holds up its writer alone, never a
// refresh, a publication or a caller past its deadline.
type persistState struct {
	mu      sync.Mutex
	queued  uint64        // the newest run queued or written
	next    *queuedWrite  // waiting for the writer, if any
	writing bool          // the writer goroutine is under way
	last    writtenRecord // what the last write that succeeded (or the warm start) holds
}

type queuedWrite struct {
	snap *Snapshot
	done chan struct{} // closed when it (or a later one that replaced it) is written or has failed
}

type writtenRecord struct {
	content *content
	shared  bool      // its documents are entries of their own (documentKey)
	at      time.Time // its validation time
}

// persist queues a snapshot that run seq published for the writer, and
// returns what its callers wait for: a channel closed once it (or a
// later snapshot) is written or has failed. Nil when there is nothing to
// write (no disk cache, or a part of legacy discovery, which is not
// persisted) or a later run's snapshot is queued already.
func (c *Client) persist(s *Snapshot, seq uint64) <-chan struct{} {
	if c.opts.disk == nil || s.core.raw == nil || s.named.raw == nil {
		return nil
	}
	w := &c.disk.written
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq <= w.queued {
		return nil
	}
	w.queued = seq
	if w.next == nil {
		w.next = &queuedWrite{done: make(chan struct{})}
	}
	w.next.snap = s
	if !w.writing {
		w.writing = true
		go c.writeQueued()
	}
	return w.next.done
}

// writeQueued is the writer: it writes what is queued until nothing is.
func (c *Client) writeQueued() {
	w := &c.disk.written
	for {
		w.mu.Lock()
		q, last := w.next, w.last
		w.next = nil
		if q == nil {
			w.writing = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		if rec, ok := c.write(q.snap, last); ok {
			w.mu.Lock()
			w.last = rec
			w.mu.Unlock()
		}
		close(q.done)
	}
}

// write writes s to the disk cache when its content is new to it or the
// validation written (last) is older than half the max age (a
// revalidation is recorded now and then, not on every refresh). ok says
// it wrote.
func (c *Client) write(s *Snapshot, last writtenRecord) (rec writtenRecord, ok bool) {
	if s.content == last.content && s.validated.Sub(last.at) <= c.opts.maxAge/2 {
		return last, false
	}
	h := persisted{Version: persistVersion, Validated: s.validated}
	for i, p := range []*part{&s.core, &s.named} {
		h.Parts[i] = storedPart{ETag: p.etag, ContentType: p.raw.contentType, Length: len(p.raw.body)}
	}
	lastKnown, err := surface.EncodeLastKnown(s.groups)
	if err != nil {
		c.opts.logger.Debug("discovery: could not encode last known resources", "err", err)
		return last, false
	}
	h.LastKnown = len(lastKnown)
	if c.opts.surfaces != nil && s.core.verified && s.named.verified {
		// Only documents checked against their ETags are named by them;
		// the store holds them from the write (or the read) of this
		// content before, if any.
		if s.content != last.content || !last.shared {
			for _, p := range []*part{&s.core, &s.named} {
				if err := c.opts.disk.Put(documentKey(p.etag), p.raw.body); err != nil {
					c.opts.logger.Debug("discovery: could not persist a document", "err", err)
					return last, false
				}
			}
		}
		h.Shared = true
	}
	header, err := json.Marshal(h)
	if err != nil {
		return last, false
	}
	size := 4 + len(header) + len(lastKnown)
	if !h.Shared {
		size += len(s.core.raw.body) + len(s.named.raw.body)
	}
	buf := make([]byte, 4, size)
	binary.LittleEndian.PutUint32(buf, uint32(len(header)))
	buf = append(buf, header...)
	if !h.Shared {
		buf = append(buf, s.core.raw.body...)
		buf = append(buf, s.named.raw.body...)
	}
	buf = append(buf, lastKnown...)
	if err := c.opts.disk.Put(c.persistKey(), buf); err != nil {
		// The cache says once that it cannot write; no need to say it per refresh.
		c.opts.logger.Debug("discovery: could not persist snapshot", "err", err)
		return last, false
	}
	return writtenRecord{content: s.content, shared: h.Shared, at: s.validated}, true
}

// errNotTheETags is why a document filed under an ETag is not loaded: it
// is not the document the ETag names (or, in protobuf, cannot be shown to
// be, and so was never filed by a client that checks).
var errNotTheETags = surface.ErrNotTheETags

// load reads the persisted snapshot, or returns an error saying why not.
func (c *Client) load() (*Snapshot, error) {
	buf, ok := c.opts.disk.Get(c.persistKey())
	if !ok {
		return nil, errors.New("no persisted snapshot")
	}
	if len(buf) < 4 {
		return nil, errors.New("persisted snapshot too short")
	}
	n := int(binary.LittleEndian.Uint32(buf))
	if n > len(buf)-4 {
		return nil, errors.New("persisted snapshot header too long")
	}
	var h persisted
	if err := json.Unmarshal(buf[4:4+n], &h); err != nil || h.Version != persistVersion {
		return nil, fmt.Errorf("persisted snapshot header: version %d, %v", h.Version, err)
	}
	rest := buf[4+n:]
	// A store the process does not own alone (Redis, a fleet's, any Store
	// but a *diskcache.Cache, whose directory Open checked only the user
	// and root can write): whoever else writes it can file a well-formed
	// entry that names this server's real ETags over documents of their
	// own, which the server would then confirm with 304s, or another
	// cluster's true documents and ETags, which the server would not.
	// Its documents are used only once their ETags are recomputed from
	// them (the documents are the ETags') and the server has answered
	// 304 to them (the ETags are the server's: loadDisk keeps the
	// snapshot unpublished for fetch to confirm), its last known
	// resources (which no ETag names) are not used, and a validation
	// time in the future (which would hold off the entry's next write)
	// is none, also for content the Surfaces table holds.
	_, own := c.opts.disk.(*diskcache.Cache)
	if !own && h.Validated.After(c.opts.clock.Now()) {
		h.Validated = time.Time{}
	}
	if s := c.sharedLoad(h, rest); s != nil {
		return s, nil
	}
	var parts [2]part
	for i, sp := range h.Parts {
		if _, err := surface.SourceOf(sp.ContentType); err != nil {
			return nil, fmt.Errorf("persisted snapshot content type %q", sp.ContentType)
		}
		var body []byte
		if h.Shared {
			b, ok := c.opts.disk.Get(documentKey(sp.ETag))
			if !ok || len(b) != sp.Length {
				return nil, fmt.Errorf("persisted document %s is not in the disk cache", sp.ETag)
			}
			body = b
		} else {
			if sp.Length < 0 || sp.Length > len(rest) {
				return nil, errors.New("persisted snapshot body lengths do not add up")
			}
			body = rest[:sp.Length]
			rest = rest[sp.Length:]
		}
		// A document filed under its ETag is in a store that other
		// clients write, in this process or another (a fleet's, for every
		// cluster; perhaps an older build's, which filed documents
		// unchecked): it is used only once its ETag is recomputed from it;
		// so is every document of a store others write (see own).
		mode := verifyNone
		switch {
		case !own:
			mode = verifyAll
		case c.opts.surfaces != nil || h.Shared:
			mode = verifyJSON
		}
		p, keep, err := aggregatedPart(body, sp.ContentType, sp.ETag, mode)
		if errors.Is(err, errNotTheETags) || err == nil && h.Shared && !p.verified {
			// Dropped, so that the next persist files the real one.
			if h.Shared {
				c.opts.disk.Delete(documentKey(sp.ETag))
			} else {
				c.opts.disk.Delete(c.persistKey())
			}
			return nil, fmt.Errorf("persisted document %s: %w", sp.ETag, errNotTheETags)
		}
		if err != nil {
			return nil, err
		}
		p.raw = &raw{body: keep, contentType: sp.ContentType}
		parts[i] = *p
	}
	if h.LastKnown < 0 || h.LastKnown != len(rest) {
		return nil, errors.New("persisted snapshot body lengths do not add up")
	}
	if h.LastKnown > 0 && own {
		groups, _, _, err := surface.DecodeAggregated(rest, surface.Source{Format: surface.FormatAggregatedV2}.MediaType(""), "")
		if err != nil {
			return nil, fmt.Errorf("persisted last known resources: %w", err)
		}
		known := &Snapshot{content: newContent(part{groups: groups}, part{})}
		keepLastKnown(&parts[0], known)
		keepLastKnown(&parts[1], known)
	}
	return c.loaded(c.intern(newContent(parts[0], parts[1])), h), nil
}

// sharedLoad is the persisted snapshot when its surface is one the
// client's Surfaces holds: nothing to read or decode. Nil otherwise.
func (c *Client) sharedLoad(h persisted, rest []byte) *Snapshot {
	if c.opts.surfaces == nil || h.LastKnown != 0 || len(rest) != 0 && h.Shared {
		return nil
	}
	k := surfaceKey{api: h.Parts[0].ETag, apis: h.Parts[1].ETag}
	var err error
	if k.core, err = surface.SourceOf(h.Parts[0].ContentType); err != nil {
		return nil
	}
	if k.named, err = surface.SourceOf(h.Parts[1].ContentType); err != nil {
		return nil
	}
	if held := c.opts.surfaces.lookup(k); held != nil {
		return c.loaded(held, h)
	}
	return nil
}

// loaded is a snapshot read from the disk cache.
func (c *Client) loaded(ct *content, h persisted) *Snapshot {
	s := &Snapshot{content: ct, validated: h.Validated, fetched: h.Validated, odd: &snapshotOdd{fromDisk: true}}
	w := &c.disk.written
	w.mu.Lock()
	if w.queued == 0 {
		// Read back, not written: what the first write compares with.
		w.last = writtenRecord{content: ct, shared: h.Shared, at: h.Validated}
	}
	w.mu.Unlock()
	c.disk.loads.Add(1)
	return s
}

// diskState is what a client with a disk cache keeps of it; a client
// without one holds none of it (a process may hold thousands of clients,
// package shared's identities, few of them with a disk cache).
type diskState struct {
	warm    warmStart    // the disk cache's snapshot, read once
	written persistState // what was last written to the disk cache

	// unconfirmed is what a store others may write (any but a
	// *diskcache.Cache) held at the warm start, until the server confirms
	// it: never published, only what the first read's requests are
	// conditional on (fetch). Nil once a read has published.
	unconfirmed atomic.Pointer[Snapshot]

	loads atomic.Int64 // Stats.DiskLoads: here, not in counters, which every client has
}

// warmStart is the one read of the disk cache at a warm start.
type warmStart struct {
	once sync.Once
	done chan struct{} // closed when the read has ended, or was given up
}

// loadDisk reads the persisted snapshot, once, before the first read of
// the server, and publishes it unless a refresh published first (see
// warmStart, in refresh.go, which calls it with a disk cache); from a
// store others may write, it keeps it unpublished instead, for the first
// read to confirm (diskState.unconfirmed). Callers
// wait for that read until ctx ends (ctx's error), and no longer than the
// refresh timeout: a store that does not answer by then is given up on
// (the server is read instead; should the store answer later, what it
// holds is published only if nothing has been). The subscribers hear of
// it after it is published, like any other snapshot.
func (c *Client) loadDisk(ctx context.Context) error {
	w := &c.disk.warm
	w.once.Do(func() {
		w.done = make(chan struct{})
		end := sync.OnceFunc(func() { close(w.done) })
		giveUp := time.AfterFunc(c.opts.refreshTimeout, func() {
			end()
			c.opts.logger.Warn("discovery: the disk cache did not answer within the refresh timeout; reading the server", "timeout", c.opts.refreshTimeout)
		})
		go func() {
			defer end()
			defer giveUp.Stop()
			if c.current.Load() != nil {
				return
			}
			s, err := c.load()
			if err != nil {
				c.opts.logger.Debug("discovery: no warm start", "err", err)
				return
			}
			if _, own := c.opts.disk.(*diskcache.Cache); !own {
				// Not believed until the server confirms it (fetch);
				// kept only while nothing is published (refresh drops it).
				if c.current.Load() == nil {
					c.disk.unconfirmed.Store(s)
				}
				return
			}
			c.machine.publish(0, s)
		}()
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
