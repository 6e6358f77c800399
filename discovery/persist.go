package discovery

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// WithDiskCache persists the last aggregated discovery documents, as
// received (protobuf when the server speaks it), with their ETags, in one
// entry of c. A new client starts from it: one file read and decoded, then
// two conditional requests, or none while the snapshot is younger than the
// max age. Legacy discovery (one document per group-version) is not
// persisted. Default: no persistence.
func WithDiskCache(c *diskcache.Cache) Option {
	return func(o *options) error { o.disk = c; return nil }
}

// persisted is the header of the entry; the two bodies follow it.
type persisted struct {
	Version   int           `json:"version"`
	Validated time.Time     `json:"validated"`
	Parts     [2]storedPart `json:"parts"` // /api, /apis
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
func (c *Client) persistKey() string {
	return "kubeatlas/discovery/v1\n" + c.accept()
}

// raw is a part's body as received, kept only while persistence needs it.
type raw struct {
	body        []byte
	contentType string
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
	header, err := json.Marshal(h)
	if err != nil {
		return
	}
	buf := make([]byte, 4, 4+len(header)+len(s.core.raw.body)+len(s.named.raw.body))
	binary.LittleEndian.PutUint32(buf, uint32(len(header)))
	buf = append(buf, header...)
	buf = append(buf, s.core.raw.body...)
	buf = append(buf, s.named.raw.body...)
	if err := c.opts.disk.Put(c.persistKey(), buf); err != nil {
		// The cache says once that it cannot write; no need to say it per refresh.
		c.opts.logger.Debug("discovery: could not persist snapshot", "err", err)
		return
	}
	c.persistedAt.Store(s.validated.UnixNano())
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
	var parts [2]part
	for i, sp := range h.Parts {
		if sp.Length < 0 || sp.Length > len(rest) {
			return nil, errors.New("persisted snapshot body lengths do not add up")
		}
		body := rest[:sp.Length]
		rest = rest[sp.Length:]
		mt, err := mediatype.ParseDiscovery(sp.ContentType)
		if err != nil || !mt.Aggregated {
			return nil, fmt.Errorf("persisted snapshot content type %q", sp.ContentType)
		}
		p, err := aggregatedPart(body, mt, sp.ETag)
		if err != nil {
			return nil, err
		}
		p.raw = &raw{body: body, contentType: sp.ContentType}
		parts[i] = *p
	}
	s := &Snapshot{content: newContent(parts[0], parts[1], h.Validated), validated: h.Validated}
	s.generation = c.generations.Add(1)
	s.fromDisk = true
	c.persistedAt.Store(h.Validated.UnixNano())
	c.stats.diskLoads.Add(1)
	return s, nil
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
