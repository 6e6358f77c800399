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

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// WithDiskCache persists the last aggregated discovery documents, as
// received (protobuf when the server speaks it), with their ETags, in one
// entry of c (a *diskcache.Cache, or any diskcache.Store: an entry that
// does not decode is a miss). A new client starts from it: one file read and decoded, then
// two conditional requests, or none while the snapshot is younger than the
// max age. Legacy discovery (one document per group-version) is not
// persisted. A nil c, or a nil *diskcache.Cache, is no persistence.
// A store other than a *diskcache.Cache (Redis, a fleet's) may be written
// by others: what is read back from it is used only once each document's
// ETag is recomputed from it (surface.VerifyAggregated), and its last
// known resources, which no ETag names, are not used.
// Default: no persistence.
func WithDiskCache(c diskcache.Store) Option {
	return func(o *options) error {
		if o.disk = c; diskcache.IsNil(c) {
			o.disk = nil
		}
		return nil
	}
}

// contentKey names a document persisted as an entry of its own (with
// WithShared): its ETag and content type, whichever cluster served it.
// fleet's store keeps entries under this prefix once for all clusters.
func contentKey(etag, contentType string) diskcache.Key {
	return diskcache.Key{Name: "kubeatlas/discovery/content/v1\n" + etag + "\n" + contentType}
}

// persisted is the header of the entry; the two bodies follow it (unless
// Shared: they are entries of their own, under contentKey), then,
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
	return diskcache.Key{Name: "kubeatlas/discovery/v1\n" + c.read.accept()}
}

// raw is a part's body as received, kept only while persistence needs it.
type raw struct {
	body        []byte
	contentType string
}

// persistState is what the client last wrote to its disk cache. Writes
// come after publication, and two runs' writes may overlap (the next run
// does not wait for the disk): turn orders them, and one older than what
// was written is skipped. Only writers wait for their turn, and a writer
// that has it does nothing but the write. (A channel, not a mutex: a
// writer waiting for a slow disk is then durably blocked, which lets
// tests run the machine under testing/synctest.)
type persistState struct {
	turn    chan struct{} // holds a token while a write is under way
	seq     uint64        // the run whose snapshot was written last
	content *content      // what it held
	shared  bool          // its documents are entries of their own (contentKey)
	at      atomic.Int64
}

func (w *persistState) lock()   { w.turn <- struct{}{} }
func (w *persistState) unlock() { <-w.turn }

// persist writes a snapshot that run seq published, when its content is
// new to the disk cache or the validation written is older than half the
// max age (a revalidation is recorded now and then, not on every
// refresh). Only aggregated parts can be persisted; a snapshot with a
// legacy part is not.
func (c *Client) persist(s *Snapshot, seq uint64) {
	if c.opts.disk == nil || s.core.raw == nil || s.named.raw == nil {
		return
	}
	w := &c.written
	w.lock()
	defer w.unlock()
	if seq <= w.seq || s.content == w.content && s.validated.Sub(time.Unix(0, w.at.Load())) <= c.opts.maxAge/2 {
		return
	}
	h := persisted{Version: persistVersion, Validated: s.validated}
	for i, p := range []*part{&s.core, &s.named} {
		h.Parts[i] = storedPart{ETag: p.etag, ContentType: p.raw.contentType, Length: len(p.raw.body)}
	}
	lastKnown, err := encodeLastKnown(s.groups)
	if err != nil {
		c.opts.logger.Debug("discovery: could not encode last known resources", "err", err)
		return
	}
	h.LastKnown = len(lastKnown)
	if c.opts.shared != nil && s.core.verified && s.named.verified {
		// Only documents checked against their ETags are named by them;
		// the store holds them from the write (or the read) of this
		// content before, if any.
		if s.content != w.content || !w.shared {
			for _, p := range []*part{&s.core, &s.named} {
				if err := c.opts.disk.Put(contentKey(p.etag, p.raw.contentType), p.raw.body); err != nil {
					c.opts.logger.Debug("discovery: could not persist a document", "err", err)
					return
				}
			}
		}
		h.Shared = true
	}
	header, err := json.Marshal(h)
	if err != nil {
		return
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
		return
	}
	w.seq, w.content, w.shared = seq, s.content, h.Shared
	w.at.Store(s.validated.UnixNano())
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
	// own, which the server would then confirm with 304s. Its documents
	// are used only once their ETags are recomputed from them, its last
	// known resources (which no ETag names) are not used, and a
	// validation time in the future (which would never be revalidated)
	// is none, also for content the Shared hook holds.
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
			b, ok := c.opts.disk.Get(contentKey(sp.ETag, sp.ContentType))
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
		case c.opts.shared != nil || h.Shared:
			mode = verifyJSON
		}
		p, keep, err := aggregatedPart(body, sp.ContentType, sp.ETag, mode)
		if errors.Is(err, errNotTheETags) || err == nil && h.Shared && !p.verified {
			// Dropped, so that the next persist files the real one.
			if h.Shared {
				c.opts.disk.Delete(contentKey(sp.ETag, sp.ContentType))
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
		groups, _, _, err := surface.DecodeAggregated(rest, mediatype.Aggregated("v2", false, ""), "")
		if err != nil {
			return nil, fmt.Errorf("persisted last known resources: %w", err)
		}
		known := &Snapshot{content: newContent(part{groups: groups}, part{})}
		keepLastKnown(&parts[0], known)
		keepLastKnown(&parts[1], known)
	}
	return c.loaded(c.intern(newContent(parts[0], parts[1])), h), nil
}

// sharedLoad is the persisted snapshot when its content is one the
// WithShared hook holds: nothing to read or decode. Nil otherwise.
func (c *Client) sharedLoad(h persisted, rest []byte) *Snapshot {
	if c.opts.shared == nil || h.LastKnown != 0 || len(rest) != 0 && h.Shared {
		return nil
	}
	k, ok := persistedKey(h)
	if !ok {
		return nil
	}
	if held := c.opts.shared.Lookup(k); held != nil && shareableKey(held) == k {
		return c.loaded(held.content, h)
	}
	return nil
}

// loaded is a snapshot read from the disk cache.
func (c *Client) loaded(ct *content, h persisted) *Snapshot {
	s := &Snapshot{content: ct, validated: h.Validated, fetched: h.Validated, fromDisk: true}
	c.written.lock()
	c.written.content = ct // read back, not written: no run has written yet
	c.written.shared = h.Shared
	c.written.at.Store(h.Validated.UnixNano())
	c.written.unlock()
	c.stats.diskLoads.Add(1)
	return s
}

// warmStart is the one read of the disk cache at a warm start.
type warmStart struct {
	once sync.Once
	done chan struct{} // closed when the read has ended
}

// warmStart reads the persisted snapshot, once, before the first read of
// the server, and publishes it unless a refresh published first. Callers
// wait for that read until ctx ends (ctx's error). The subscribers hear
// of it after it is published, like any other snapshot.
func (c *Client) warmStart(ctx context.Context) error {
	if c.opts.disk == nil {
		return nil
	}
	w := &c.warm
	w.once.Do(func() {
		w.done = make(chan struct{})
		go func() {
			defer close(w.done)
			if c.current.Load() != nil {
				return
			}
			s, err := c.load()
			if err != nil {
				c.opts.logger.Debug("discovery: no warm start", "err", err)
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

// encodeLastKnown writes the group-versions whose resources are last known
// (not in the documents as received) as an aggregated discovery list in
// JSON, the form decodeAggregated reads back field for field; nil when
// there are none.
func encodeLastKnown(groups []surface.Group) ([]byte, error) {
	var items []apidiscoveryv2.APIGroupDiscovery
	for _, g := range groups {
		var versions []apidiscoveryv2.APIVersionDiscovery
		for _, v := range g.Versions {
			if v.LastKnown {
				versions = append(versions, apidiscoveryv2.APIVersionDiscovery{Version: v.Version, Resources: toAggregated(v.Resources)})
			}
		}
		if versions != nil {
			item := apidiscoveryv2.APIGroupDiscovery{Versions: versions}
			item.Name = g.Name
			items = append(items, item)
		}
	}
	if items == nil {
		return nil, nil
	}
	list := apidiscoveryv2.APIGroupDiscoveryList{Items: items}
	list.APIVersion, list.Kind = "apidiscovery.k8s.io/v2", "APIGroupDiscoveryList"
	return json.Marshal(&list)
}

// toAggregated is fromAggregatedResources's inverse.
func toAggregated(in []surface.Resource) []apidiscoveryv2.APIResourceDiscovery {
	kind := func(k schema.GroupVersionKind, explicit bool) *metav1.GroupVersionKind {
		if explicit {
			return &metav1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
		}
		return &metav1.GroupVersionKind{Kind: k.Kind}
	}
	out := make([]apidiscoveryv2.APIResourceDiscovery, 0, len(in))
	for _, r := range in {
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		d := apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, SingularResource: r.SingularName, Scope: scope,
			ResponseKind: kind(r.Kind, r.ExplicitKind()),
			Verbs:        r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
		}
		for _, sub := range r.Subresources {
			d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource: sub.Name, ResponseKind: kind(sub.Kind, sub.ExplicitKind()), Verbs: sub.Verbs,
			})
		}
		out = append(out, d)
	}
	return out
}
