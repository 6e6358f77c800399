package openapi3

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The default bounds of one group-version's document (WithDocumentLimits),
// measured on 2026-12-02 (DocumentStats, and the typed layer's build: every
// schema parsed, structured-merge-diff types made). kube-apiserver
// v1.36.3's largest document, api/v1, is 1.6 MB of JSON with 251 schemas,
// 1,133 properties, 10,089 objects, 9 deep, and builds in 2 MB. The
// largest we know of, a group-version of 3,000 CRDs (the fake server's
// WithCRDs(3000, 1)), is 61.4 MB (58.6 MiB) with 12,008 schemas, 153,023
// properties, 294,056 objects, 9 deep, and built in 209 MB of heap (710 B
// an object; typed now types a kind of it in 2.1 MB, all 6,000 in 34 MB:
// docs/openapi.md): the defaults fit it (its bytes with 9% to spare, its
// counts with 2x or more). A hostile document over them is refused while it is
// read (its bytes) or indexed (the rest), before any of it is parsed: a
// 31 MB schema of a million properties costs its bytes and the index's,
// not the 1.7 GB it took to build. One made to fit just under them still
// costs what its objects do, up to about 960 B each for empty properties
// (a schema of 200,000 of them builds in 193 MB): some 580 MB at the
// object bound. A process that must stay under 256 MB whatever a server
// sends sets Objects to 200,000, which refuses the 3,000-CRD group-version.
const (
	DefaultMaxDocumentBytes = 64 << 20
	DefaultMaxSchemas       = 30_000
	DefaultMaxProperties    = 300_000
	DefaultMaxObjects       = 600_000
	DefaultMaxDepth         = 256
	// DefaultMaxPaths bounds the root's group-versions: a cluster of 3,000
	// CRDs lists a few thousand at most (kube-apiserver v1.36.3 alone,
	// 47). A root at the bound, of ?hash= URLs, is about 4.5 MB.
	DefaultMaxPaths = 20_000
)

// DocumentLimits bounds what one group-version's document may hold, so
// that a hostile or broken server (one aggregated API server among many)
// cannot make its callers parse or build without end. A document over any
// bound is refused with a *DocumentError wrapping a *LimitError (or, for
// its bytes, ErrTooLarge) before anything is parsed of it, and the refusal
// is remembered for its hash (see Client.DocumentAt). The protobuf form
// (Client.Gnostic, Client.Raw) is held to them before it is decoded, its
// messages and their nesting at twice Objects and Depth. A zero field is
// its default.
type DocumentLimits struct {
	// Bytes bounds its JSON (default DefaultMaxDocumentBytes), read no
	// further; WithMaxResponseBytes, if lower, bounds it too.
	Bytes int64
	// Schemas bounds its components/schemas entries (DefaultMaxSchemas).
	Schemas int
	// Properties bounds the members of its "properties" objects, at any
	// depth, all schemas together (DefaultMaxProperties).
	Properties int
	// Objects bounds the JSON objects in it, at any depth: every schema,
	// property, parameter... (DefaultMaxObjects). What parsing and
	// building types cost grows with it: an allOf or anyOf of a million
	// empty schemas is a million objects, in 3 MB.
	Objects int
	// Depth bounds how deep its objects and arrays nest (DefaultMaxDepth).
	Depth int
	// Paths bounds the group-versions the root (/openapi/v3) lists,
	// each a document (DefaultMaxPaths); the root's bytes are bounded as
	// a document's.
	Paths int
}

// withDefaults is l with each zero field its default.
func (l DocumentLimits) withDefaults() DocumentLimits {
	if l.Bytes == 0 {
		l.Bytes = DefaultMaxDocumentBytes
	}
	if l.Schemas == 0 {
		l.Schemas = DefaultMaxSchemas
	}
	if l.Properties == 0 {
		l.Properties = DefaultMaxProperties
	}
	if l.Objects == 0 {
		l.Objects = DefaultMaxObjects
	}
	if l.Depth == 0 {
		l.Depth = DefaultMaxDepth
	}
	if l.Paths == 0 {
		l.Paths = DefaultMaxPaths
	}
	return l
}

// WithDocumentLimits bounds each group-version's document (see
// DocumentLimits; a zero field is its default). Raise them for a cluster
// whose documents are larger than the defaults allow; the memory a
// document costs grows with them. Default: the DefaultMax constants.
func WithDocumentLimits(l DocumentLimits) Option {
	return named("WithDocumentLimits", func(o *options) error {
		if l.Bytes < 0 || l.Schemas < 0 || l.Properties < 0 || l.Objects < 0 || l.Depth < 0 || l.Paths < 0 {
			return fmt.Errorf("openapi3: document limits must not be negative, got %+v", l)
		}
		if l.Depth > maxDepth {
			return fmt.Errorf("openapi3: document depth limit must be at most %d, got %d", maxDepth, l.Depth)
		}
		o.limits = l.withDefaults()
		return nil
	})
}

// DocumentStats is what a document holds, as DocumentLimits counts it.
type DocumentStats struct {
	Schemas, Properties, Objects, Depth int
}

// Stats is what d holds, as DocumentLimits counts it (zero for a document
// that does not index).
func (d *Document) Stats() DocumentStats {
	idx, _ := d.indexAll()
	return idx.stats
}

// within checks s against l, for a document indexed by another client
// (WithDocuments) with other bounds.
func (s DocumentStats) within(l DocumentLimits) error {
	switch {
	case s.Schemas > l.Schemas:
		return &LimitError{Limit: "schemas", Max: int64(l.Schemas), Offset: -1}
	case s.Properties > l.Properties:
		return &LimitError{Limit: "properties", Max: int64(l.Properties), Offset: -1}
	case s.Objects > l.Objects:
		return &LimitError{Limit: "objects", Max: int64(l.Objects), Offset: -1}
	case s.Depth > l.Depth:
		return &LimitError{Limit: "depth", Max: int64(l.Depth), Offset: -1}
	}
	return nil
}

// LimitError reports a document over one of its DocumentLimits. It
// unwraps to ErrTooLarge.
type LimitError struct {
	Limit  string // "schemas", "properties", "objects", "depth" or "paths" (the root's)
	Max    int64  // the bound it passed
	Offset int    // the byte offset where reading stopped, or -1
}

func (e *LimitError) Error() string {
	msg := fmt.Sprintf("over its limit of %d %s (openapi3.WithDocumentLimits)", e.Max, e.Limit)
	if e.Offset >= 0 {
		msg += fmt.Sprintf(" at byte %d", e.Offset)
	}
	return msg
}

func (e *LimitError) Unwrap() error { return ErrTooLarge }

// DocumentError is why one group-version's document could not be had:
// fetched, verified, within its limits and indexed.
type DocumentError struct {
	Path string // the group-version's path, "apis/apps/v1"
	URL  string // the server-relative URL, with its ?hash=
	Err  error
}

func (e *DocumentError) Error() string {
	return fmt.Sprintf("openapi3: the document of %s at %s: %s", e.Path, e.URL, strings.TrimPrefix(e.Err.Error(), "openapi3: "))
}

func (e *DocumentError) Unwrap() error { return e.Err }

// ErrRemembered marks the error of a document that failed before and is
// not asked for again yet (see Client.DocumentAt): the error returned
// wraps both it and the failure's *DocumentError.
var ErrRemembered = errors.New("openapi3: a failure remembered, not retried yet")

// Remembered failures: one per group-version, for the URL (and so the
// hash) that failed.
const (
	// retryAfter is the least time between two attempts at a
	// group-version's document that failed: a root that names a new hash
	// every time it is read costs at most a download a second.
	retryAfter = time.Second
	// maxRetryAfter bounds the back-off of a failure that may pass (a
	// status, a connection or a body cut short): doubled after each, from
	// retryAfter.
	maxRetryAfter = 5 * time.Minute
)

// failKey names a group-version's document in one of its forms.
type failKey struct {
	path     string
	protobuf bool // the form Gnostic reads
}

// errNotProtobuf is the cause of Gnostic's error for a body that does not
// decode: the bytes the ?hash= names are at fault.
var errNotProtobuf = errors.New("is not an OpenAPI v3 protobuf document")

// failure is a group-version's document that could not be had.
type failure struct {
	url      string
	err      error // a *DocumentError
	at       time.Time
	final    bool // the bytes at url are at fault: tried again only at another url
	attempts int  // consecutive failures at url
}

// retryAt is when the document at u may be asked for again.
func (f *failure) retryAt(u string) (time.Time, bool) {
	if u != f.url {
		return f.at.Add(retryAfter), true
	}
	if f.final {
		return time.Time{}, false
	}
	wait := retryAfter << min(f.attempts-1, 20)
	return f.at.Add(min(wait, maxRetryAfter)), true
}

// finalFailure says whether err condemns the bytes at a URL, which a
// ?hash= names for good: over a bound, not JSON, not the hash. Anything
// else (a status, another content type, as a proxy's error page, a
// connection or body cut short) may pass.
func finalFailure(err error) bool {
	return errors.Is(err, ErrTooLarge) || errors.Is(err, ErrHashMismatch) || errors.Is(err, errNotProtobuf) ||
		errors.As(err, new(*SyntaxError)) || errors.As(err, new(*LimitError))
}

// remembered returns the error to answer for path's document at u without
// asking for it, if its failure is remembered and not due for a retry.
func (c *Client) remembered(path failKey, u string) error {
	c.failMu.Lock()
	f, ok := c.failed[path]
	c.failMu.Unlock()
	if !ok {
		return nil
	}
	at, retry := f.retryAt(u)
	if retry && !c.opts.clock.Now().Before(at) { // the user's clock: read holding no lock
		return nil
	}
	return fmt.Errorf("%w: %w", ErrRemembered, f.err)
}

// remember records how fetching path's document at u ended: a success
// forgets the failure, a failure is remembered (but not the caller's
// context ending, which says nothing of the document).
func (c *Client) remember(path failKey, u string, err error) {
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	now := c.opts.clock.Now()
	c.failMu.Lock()
	defer c.failMu.Unlock()
	f := c.failed[path]
	if err == nil {
		if f != nil && f.url == u {
			delete(c.failed, path)
		}
		return
	}
	attempts := 1
	if f != nil && f.url == u {
		attempts = f.attempts + 1
	}
	if c.failed == nil {
		c.failed = map[failKey]*failure{}
	}
	c.failed[path] = &failure{url: u, err: err, at: now, final: finalFailure(err), attempts: attempts}
}
