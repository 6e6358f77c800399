package discovery

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
// Default: no persistence.
func WithDiskCache(c diskcache.Store) Option {
	return func(o *options) error {
		if o.disk = c; diskcache.IsNil(c) {
			o.disk = nil
		}
		return nil
	}
}

// WithContentCache keeps the persisted discovery documents in s once per
// content (by ETag and content type), whichever cluster served them, and
// in WithDiskCache's store only the cluster's own part: the ETags, when
// they were validated, and the resources it last knew of group-versions
// that are not current. The clients of a fleet give each its own
// WithDiskCache and all the same WithContentCache: a thousand clusters of
// one surface store its documents once. It needs WithDiskCache. A nil s is
// none. Default: none (the documents are in the cluster's entry).
func WithContentCache(s diskcache.Store) Option {
	return func(o *options) error {
		if o.content = s; diskcache.IsNil(s) {
			o.content = nil
		}
		return nil
	}
}

// contentKey names a document in the WithContentCache store.
func contentKey(etag, contentType string) diskcache.Key {
	return diskcache.Key{Name: "kubeatlas/discovery/content/v1\n" + etag + "\n" + contentType}
}

// persisted is the header of the entry; the two bodies follow it (unless
// Shared: they are in the WithContentCache store), then,
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
	return diskcache.Key{Name: "kubeatlas/discovery/v1\n" + c.accept()}
}

// raw is a part's body as received, kept only while persistence needs it.
type raw struct {
	body        []byte
	contentType string
	storedIn    sync.Map // WithContentCache stores that hold it
}

// persist writes the snapshot's documents. Only aggregated parts can be
// persisted; a snapshot with a legacy part is not.
func (c *Client) persist(s *Snapshot) {
	if c.opts.disk == nil || s.core.raw == nil || s.named.raw == nil {
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
	if c.opts.content != nil {
		for _, p := range []*part{&s.core, &s.named} {
			if err := c.storeContent(p); err != nil {
				c.opts.logger.Debug("discovery: could not persist a document", "err", err)
				return
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
	c.persistedAt.Store(s.validated.UnixNano())
}

// storeContent writes a part's document to the WithContentCache store,
// once per store: the part (shared by every client of its surface) records
// that it is there.
func (c *Client) storeContent(p *part) error {
	if _, done := p.raw.storedIn.Load(c.opts.content); done {
		return nil
	}
	if err := c.opts.content.Put(contentKey(p.etag, p.raw.contentType), p.raw.body); err != nil {
		return err
	}
	p.raw.storedIn.Store(c.opts.content, true)
	return nil
}

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
	if h.Shared && c.opts.content == nil {
		return nil, errors.New("persisted snapshot is in a content cache, and the client has none")
	}
	if s := c.sharedLoad(h, rest); s != nil {
		return s, nil
	}
	var parts [2]part
	for i, sp := range h.Parts {
		mt, err := mediatype.ParseDiscovery(sp.ContentType)
		if err != nil || !mt.Aggregated {
			return nil, fmt.Errorf("persisted snapshot content type %q", sp.ContentType)
		}
		var body []byte
		if h.Shared {
			b, ok := c.opts.content.Get(contentKey(sp.ETag, sp.ContentType))
			if !ok || len(b) != sp.Length {
				return nil, fmt.Errorf("persisted document %s is not in the content cache", sp.ETag)
			}
			body = b
		} else {
			if sp.Length < 0 || sp.Length > len(rest) {
				return nil, errors.New("persisted snapshot body lengths do not add up")
			}
			body = rest[:sp.Length]
			rest = rest[sp.Length:]
		}
		p, err := aggregatedPart(body, mt, sp.ETag, c.opts.surfaces != nil)
		if err != nil {
			return nil, err
		}
		p.raw = &raw{body: body, contentType: sp.ContentType}
		if h.Shared {
			p.raw.storedIn.Store(c.opts.content, true)
		}
		parts[i] = *p
	}
	if h.LastKnown < 0 || h.LastKnown != len(rest) {
		return nil, errors.New("persisted snapshot body lengths do not add up")
	}
	if h.LastKnown > 0 {
		groups, _, err := decodeAggregated(rest, mediatype.Discovery{Aggregated: true, Version: "v2"})
		if err != nil {
			return nil, fmt.Errorf("persisted last known resources: %w", err)
		}
		known := &Snapshot{content: newContent(part{groups: groups}, part{})}
		keepLastKnown(&parts[0], known)
		keepLastKnown(&parts[1], known)
	}
	loaded := newContent(parts[0], parts[1])
	if c.opts.surfaces != nil {
		loaded = c.opts.surfaces.intern(c.accept(), loaded)
	}
	return c.loaded(loaded, h), nil
}

// sharedLoad is the persisted snapshot when its content is one the
// client's Surfaces holds: nothing to read or decode. Nil otherwise.
func (c *Client) sharedLoad(h persisted, rest []byte) *Snapshot {
	if c.opts.surfaces == nil || h.LastKnown != 0 || len(rest) != 0 && h.Shared {
		return nil
	}
	k := surfaceKey{accept: c.accept(), api: h.Parts[0].ETag, apis: h.Parts[1].ETag}
	for i, sp := range h.Parts {
		mt, err := mediatype.ParseDiscovery(sp.ContentType)
		if err != nil || !mt.Aggregated {
			return nil
		}
		if i == 0 {
			k.core = sourceOf(mt)
		} else {
			k.named = sourceOf(mt)
		}
	}
	held := c.opts.surfaces.use(k)
	if held == nil {
		return nil
	}
	return c.loaded(held, h)
}

// loaded is a snapshot read from the disk cache.
func (c *Client) loaded(ct *content, h persisted) *Snapshot {
	s := &Snapshot{content: ct, validated: h.Validated, fetched: h.Validated, fromDisk: true}
	c.persistedAt.Store(h.Validated.UnixNano())
	c.stats.diskLoads.Add(1)
	return s
}

// warmStart installs the persisted snapshot, once, before the first read.
func (c *Client) warmStart() {
	c.warmOnce.Do(func() {
		if c.opts.disk == nil || c.current.Load() != nil {
			return
		}
		s, err := c.load()
		if err != nil {
			c.opts.logger.Debug("discovery: no warm start", "err", err)
			return
		}
		if c.current.CompareAndSwap(nil, s) {
			c.notify(nil, s)
		}
	})
}

// encodeLastKnown writes the group-versions whose resources are last known
// (not in the documents as received) as an aggregated discovery list in
// JSON, the form decodeAggregated reads back field for field; nil when
// there are none.
func encodeLastKnown(groups []Group) ([]byte, error) {
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
func toAggregated(in []Resource) []apidiscoveryv2.APIResourceDiscovery {
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
			ResponseKind: kind(r.Kind, r.explicitKind),
			Verbs:        r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
		}
		for _, sub := range r.Subresources {
			d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource: sub.Name, ResponseKind: kind(sub.Kind, sub.explicitKind), Verbs: sub.Verbs,
			})
		}
		out = append(out, d)
	}
	return out
}
