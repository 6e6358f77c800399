package discovery

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// reader is the client as a refresh's requests see it: it sends them and
// decodes the answers, as the client's options say (the Accept header,
// the legacy fallback, what is kept for the disk cache), through the
// client's own connections, and counts them. A view of the Client, not a
// copy of its fields: those were 24 bytes of each client (a process may
// hold thousands, package shared's identities).
type reader Client

// reader is c as its refreshes' requests see it.
func (c *Client) reader() *reader { return (*reader)(c) }

// The media types of the documents a client asks for (package surface
// names them).
var (
	legacyJSON     = surface.Source{Format: surface.FormatLegacy}.MediaType("")
	legacyProtobuf = surface.Source{Format: surface.FormatLegacy, Protobuf: true}.MediaType("")
)

// accept is the one Accept header that negotiates the best format a server
// has: protobuf v2, JSON v2, JSON v2beta1, then plain JSON, which an old
// server answers with legacy discovery.
func (r *reader) accept() string {
	if r.opts.legacyOnly {
		return legacyJSON
	}
	profile := ""
	if r.opts.noPeer {
		profile = "nopeer"
	}
	types := []string{
		surface.Source{Format: surface.FormatAggregatedV2}.MediaType(profile),
		surface.Source{Format: surface.FormatAggregatedV2Beta1}.MediaType(""),
		legacyJSON,
	}
	if !r.opts.jsonOnly {
		types = append([]string{surface.Source{Format: surface.FormatAggregatedV2, Protobuf: true}.MediaType(profile)}, types...)
	}
	return strings.Join(types, ",")
}

// legacyAccept is for the per-group-version documents of legacy discovery.
func (r *reader) legacyAccept() string {
	if r.opts.jsonOnly {
		return legacyJSON
	}
	return legacyProtobuf + "," + legacyJSON
}

// fetch reads /api and /apis in parallel, conditionally on prev's ETags.
// It returns nil only when no snapshot could be built; a snapshot with
// failed group-versions comes with its PartialError.
//
// With nothing before (a cold start), the requests are conditional on
// what a store others may write held for this server (unconfirmed), else
// on the surface the client's Surfaces offers, if any: a 304 is the
// server's confirmation of the part it answers, two adopt the whole.
func (c *Client) fetch(ctx context.Context, prev *Snapshot) (*Snapshot, error) {
	cond := prev // what the requests are conditional on
	var stored *Snapshot
	if prev == nil && c.disk != nil {
		stored = c.disk.unconfirmed.Load()
	}
	if t := c.opts.surfaces; t != nil {
		if prev != nil {
			t.forgetOffer(c)
		} else if stored == nil {
			if g := t.guess(c); g != nil {
				cond = &Snapshot{content: g}
			}
		}
	}
	if stored != nil {
		cond = stored
	}
	var core, named *part
	var coreErr, namedErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var p *part
		if cond != nil {
			p = &cond.core
		}
		core, coreErr = c.reader().fetchPart(ctx, c.http, "/api", p)
	}()
	var p *part
	if cond != nil {
		p = &cond.named
	}
	named, namedErr = c.reader().fetchPart(ctx, c.http, "/apis", p)
	wg.Wait()
	if namedErr != nil {
		return nil, namedErr
	}
	if apierrors.IsNotFound(coreErr) {
		// An extension API server built on k8s.io/apiserver serves no
		// /api: its groups come from /apis, as client-go tolerates on
		// purpose. Nothing is kept of it, so the next refresh asks again.
		core, coreErr = &part{source: named.source}, nil
	}
	if coreErr != nil {
		return nil, coreErr
	}
	now := c.opts.clock.Now()
	if stored != nil && core == &stored.core && named == &stored.named {
		// Two 304s to the stored entry's ETags: the server serves it.
		s := &Snapshot{content: stored.content, validated: now, fetched: now}
		return s, s.err
	}
	if prev == nil && cond != nil && core == &cond.core && named == &cond.named {
		// Two 304s on a cold start: the server serves a surface the
		// table holds.
		c.stats.surfaceHits.Add(1)
		s := &Snapshot{content: c.intern(cond.content), validated: now, fetched: now}
		return s, s.err
	}
	if prev != nil && core == &prev.core && named == &prev.named {
		// Two 304s: the parsed content is still right.
		return &Snapshot{content: prev.content, validated: now, fetched: prev.fetched}, prev.err
	}
	if prev != nil {
		// Only the cluster's own history: never a guessed surface's.
		if core != &prev.core {
			keepLastKnown(core, prev)
		}
		if named != &prev.named {
			keepLastKnown(named, prev)
		}
	}
	s := &Snapshot{content: c.intern(newContent(*core, *named)), validated: now, fetched: now}
	return s, s.err
}

// intern shares ct through the client's Surfaces, if any (surfaces.go).
func (c *Client) intern(ct *content) *content {
	if c.opts.surfaces == nil {
		return ct
	}
	return c.opts.surfaces.intern(ct)
}

// fetchPart reads one endpoint through on (the client's own connections,
// or a resample's new ones). A 304 returns prev itself.
func (r *reader) fetchPart(ctx context.Context, on *httpx.Client, path string, prev *part) (*part, error) {
	etag := ""
	if prev != nil {
		etag = prev.etag
	}
	resp, err := r.get(ctx, on, httpx.Request{Ref: path, Accept: r.accept(), ETag: etag})
	var status *apierrors.StatusError
	if errors.As(err, &status) {
		return nil, fmt.Errorf("discovery: GET %s: %w", path, err)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotModified {
		return prev, nil
	}
	body := resp.Body
	contentType := resp.Header.Get("Content-Type")
	as := readAs(contentType)
	src, err := surface.ParseMediaType(as)
	if err != nil {
		return nil, &ResponseError{Path: path, ContentType: contentType, Err: err}
	}
	if src.Format == surface.FormatLegacy {
		return r.fetchLegacy(ctx, path, body, as)
	}
	mode := verifyNone
	if r.opts.surfaces != nil {
		mode = verifyJSON
	}
	p, keep, err := aggregatedPart(body, contentType, resp.Header.Get("ETag"), mode)
	if err != nil {
		return nil, &ResponseError{Path: path, ContentType: contentType, Err: err}
	}
	if r.opts.disk != nil {
		p.raw = &raw{body: keep, contentType: contentType}
	} else if src.Protobuf {
		// Nothing points into a protobuf body once decoded (the decoder
		// copies what a snapshot keeps; surface's tests pin it), and
		// nothing is kept of it without a disk cache: its buffer goes back
		// to httpx's pools for the next read, rather than to the collector
		// (a cold start at 3,000 CRDs reads 1 MB of /apis).
		resp.Recycle()
	}
	return p, nil
}

// verifyMode says what aggregatedPart checks of a body against its ETag.
type verifyMode int

const (
	verifyNone verifyMode = iota
	// verifyJSON: a JSON body is checked (WithSurfaces, which shares
	// nothing else); one that is not its ETag's is used unverified.
	// Protobuf is not checked (see Surfaces).
	verifyJSON
	// verifyAll: the body is its ETag's document, JSON or protobuf, or an
	// error (surface.ErrNotTheETags): what is read back from a store
	// others write.
	verifyAll
)

// aggregatedPart decodes an aggregated discovery body into what one
// endpoint contributes to a snapshot, checking it against its ETag as
// mode says (the part records whether it is the ETag's document). keep
// is what is to be persisted of it: a verified JSON body's canonical
// encoding (surface.VerifyAggregated: the bytes the ETag hashes, so that
// a store filing it under its ETag keeps nothing but what was verified,
// no duplicate keys another decoder reads otherwise), else body.
func aggregatedPart(body []byte, contentType, etag string, mode verifyMode) (p *part, keep []byte, err error) {
	protobuf := false
	if src, err := surface.SourceOf(contentType); err == nil {
		protobuf = src.Protobuf
	}
	var groups []surface.Group
	var src surface.Source
	verified := false
	if mode == verifyAll || mode == verifyJSON && !protobuf {
		var canonical []byte
		groups, src, canonical, err = surface.VerifyAggregated(body, contentType, etag)
		switch {
		case err == nil:
			verified, keep = true, canonical
			if protobuf {
				// Checked, so used; but neither shared nor filed under
				// its ETag (see Surfaces): part.verified stays false.
				verified, keep = false, body
			}
			p = &part{groups: groups, etag: etag, source: src, verified: verified}
		case mode == verifyAll || !errors.Is(err, surface.ErrNotTheETags):
			return nil, nil, err
		}
	}
	if p == nil {
		if groups, src, _, err = surface.DecodeAggregated(body, contentType, ""); err != nil {
			return nil, nil, err
		}
		p, keep = &part{groups: groups, etag: etag, source: src}, body
	}
	for _, g := range groups {
		for _, v := range g.Versions {
			if v.Freshness == surface.FreshnessStale {
				p.failed = append(p.failed, &GroupVersionError{GroupVersion: schema.GroupVersion{Group: g.Name, Version: v.Version}, Err: ErrStale})
			}
		}
	}
	return p, keep, nil
}

// generations numbers contents across the process, so that a content
// shared by the clients of a Surfaces table has one generation in all of them.
var generations atomic.Uint64

// newContent joins what /api and /apis contributed.
func newContent(core, named part) *content {
	c := &content{core: core, named: named, generation: generations.Add(1)}
	c.groups = make([]surface.Group, 0, len(core.groups)+len(named.groups))
	c.groups = append(c.groups, core.groups...)
	c.groups = append(c.groups, named.groups...)
	if failed := append(append([]*GroupVersionError(nil), core.failed...), named.failed...); len(failed) > 0 {
		c.err = &PartialError{Errors: failed}
	}
	return c
}

// readAs is the media type a response is read as: its Content-Type, except
// that a body served as text/json, text/plain, text/html or without a
// Content-Type is read as legacy JSON, as client-go reads it (hand-written
// servers and proxies label JSON so; client-go's
// TestDiscoveryContentTypeVersion lists them); the body must still parse
// as the document asked for.
func readAs(contentType string) string {
	base, _, err := mime.ParseMediaType(contentType)
	if contentType == "" || err == nil && (base == "text/json" || base == "text/plain" || base == "text/html") {
		return legacyJSON
	}
	return contentType
}

// fetchLegacy reads legacy discovery: the root document says which
// group-versions exist, then each is read on its own, a bounded number at a
// time. A group-version that fails stays listed, marked Failed.
func (r *reader) fetchLegacy(ctx context.Context, path string, body []byte, contentType string) (*part, error) {
	groups, err := surface.DecodeLegacyGroups(body, contentType, path == "/api")
	if err != nil {
		return nil, &ResponseError{Path: path, ContentType: legacyJSON, Err: err}
	}

	type job struct{ g, v int }
	var jobs []job
	for gi := range groups {
		for vi := range groups[gi].Versions {
			jobs = append(jobs, job{gi, vi})
		}
	}
	errs := make([]error, len(jobs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(r.opts.legacyParallel, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				g := &groups[jobs[i].g]
				v := &g.Versions[jobs[i].v]
				got, err := r.fetchLegacyVersion(ctx, schema.GroupVersion{Group: g.Name, Version: v.Version})
				if errs[i] = err; err == nil {
					*v = got
				}
			}
		}()
	}
	for i := range jobs {
		work <- i
	}
	close(work)
	wg.Wait()

	out := &part{groups: groups, source: surface.Source{Format: surface.FormatLegacy}}
	for i, err := range errs {
		if err == nil {
			continue
		}
		g := &groups[jobs[i].g]
		v := &g.Versions[jobs[i].v]
		v.Freshness = surface.FreshnessFailed
		out.failed = append(out.failed, &GroupVersionError{GroupVersion: schema.GroupVersion{Group: g.Name, Version: v.Version}, Err: err})
	}
	return out, nil
}

// fetchLegacyVersion reads one group-version's document. A 404 on the core
// group's is an empty list, as client-go has it; any other 404 says the
// group-version is gone, and keepLastKnown keeps nothing of it. A transient
// failure (a 5xx, a 429 past the retries, a reset connection) is asked once
// more, as client-go's discovery retries.
func (r *reader) fetchLegacyVersion(ctx context.Context, gv schema.GroupVersion) (surface.Version, error) {
	path := "/apis/" + gv.String()
	if gv.Group == "" {
		path = "/api/" + gv.Version
	}
	resp, err := r.get(ctx, r.http, httpx.Request{Ref: path, Accept: r.legacyAccept()})
	if err != nil && httpx.IsTransient(err) && ctx.Err() == nil {
		resp, err = r.get(ctx, r.http, httpx.Request{Ref: path, Accept: r.legacyAccept()})
	}
	if err != nil && gv == (schema.GroupVersion{Version: "v1"}) && apierrors.IsNotFound(err) {
		return surface.Version{Version: gv.Version}, nil
	}
	if err != nil {
		return surface.Version{}, err
	}
	contentType := resp.Header.Get("Content-Type")
	v, err := surface.DecodeLegacyVersion(gv, resp.Body, readAs(contentType))
	if err != nil {
		return surface.Version{}, &ResponseError{Path: path, ContentType: contentType, Err: err}
	}
	return v, nil
}

// keepLastKnown gives a group-version that is not current the resources it
// had in prev, when the server sent none.
func keepLastKnown(p *part, prev *Snapshot) {
	for _, gve := range p.failed {
		gi := -1
		for i := range p.groups {
			if p.groups[i].Name == gve.GroupVersion.Group {
				gi = i
				break
			}
		}
		if gi < 0 {
			continue
		}
		if apierrors.IsNotFound(gve.Err) {
			// Gone: a mapper must not map it (client-go: NoMatch).
			continue
		}
		for vi := range p.groups[gi].Versions {
			v := &p.groups[gi].Versions[vi]
			if v.Version != gve.GroupVersion.Version || len(v.Resources) > 0 {
				continue
			}
			if old, ok := prev.Version(gve.GroupVersion); ok && len(old.Resources) > 0 {
				v.Resources, v.LastKnown = old.Resources, true
			}
		}
	}
}

// get sends req through on (httpx.Client.Get) and counts its bytes and
// 304s. A 304 is an answer when req has an ETag. An error status is an
// *apierrors.StatusError, returned as is; a body over the limit is a
// *ResponseError; any other error is the transport's, or says the body
// could not be read.
func (r *reader) get(ctx context.Context, on *httpx.Client, req httpx.Request) (*httpx.Response, error) {
	resp, err := on.Get(ctx, req)
	if resp != nil {
		r.stats.bytes.Add(resp.Wire)
	}
	var status *apierrors.StatusError
	switch {
	case resp == nil || errors.As(err, &status):
		return resp, err
	case errors.Is(err, ErrTooLarge):
		return resp, &ResponseError{Path: req.Ref, ContentType: resp.Header.Get("Content-Type"), Err: err}
	case err != nil:
		return resp, fmt.Errorf("discovery: GET %s: reading body: %w", req.Ref, err)
	}
	if resp.StatusCode == http.StatusNotModified {
		r.stats.notModified.Add(1)
	}
	return resp, nil
}
