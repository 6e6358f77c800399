package openapi3

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/flight"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
	"github.com/kubeatlas/kubeatlas/internal/optset"
)

// Defaults of the options.
const (
	DefaultConcurrency      = 8
	DefaultMaxRedirects     = 3
	DefaultMaxResponseBytes = 128 << 20
	DefaultMaxAge           = 30 * time.Second
	DefaultMaxRetries       = httpx.DefaultMaxRetries
	// DefaultRootTimeout bounds one read of the root, under discovery's
	// default refresh timeout (30s): the root is one small document (about
	// 100 KB at 3000 CRDs) where a refresh reads two of up to megabytes,
	// and a CLI that revalidates discovery before reading the root (explain)
	// stays within a minute when both hang.
	DefaultRootTimeout = 20 * time.Second
)

type options struct {
	disk             diskcache.Store
	concurrency      int
	maxRedirects     int
	maxResponseBytes int64
	maxRetries       int
	maxAge           time.Duration
	clock            clock.PassiveClock
	maxDocuments     int
	documents        *Documents
	staleRoot        bool
	rootTimeout      time.Duration
	limits           DocumentLimits

	given optset.Given // the options given, by name (named)
}

// named is the option name, which may be given once (optset).
func named(name string, set func(*options) error) Option {
	return optset.Named("openapi3", name, func(o *options) *optset.Given { return &o.given }, set)
}

// WithRootTimeout bounds one read of the root, which concurrent callers
// share: a server that does not answer within d is unavailable, and with
// WithStaleRootOnError the root kept on disk answers, as discovery's cached
// snapshot answers once its refresh timeout passes. Default:
// DefaultRootTimeout (20s, under discovery's 30s).
func WithRootTimeout(d time.Duration) Option {
	return named("WithRootTimeout", func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("openapi3: root timeout must be positive, got %v", d)
		}
		o.rootTimeout = d
		return nil
	})
}

// WithMaxDocuments bounds how many documents the client keeps in memory,
// the least recently used going first (a document dropped is read again
// when next asked for: from the disk cache with WithDiskCache, from the
// server without). Default: 0, no bound; every document fetched is kept
// until its hash changes, as client-go's memory-cached OpenAPI client keeps
// every document's bytes. At 3000 CRDs FetchAll keeps ~100 MB of JSON.
func WithMaxDocuments(n int) Option {
	return named("WithMaxDocuments", func(o *options) error {
		if n < 0 {
			return fmt.Errorf("openapi3: max documents must not be negative, got %d", n)
		}
		o.maxDocuments = n
		return nil
	})
}

// WithMaxAge sets how long the root (and with it every document's current
// ?hash= URL) is trusted. An older root is still answered from, at once,
// and read again in the background, as discovery's snapshots are; a path
// the root does not list reads it again at once (at most once a second),
// so a group-version added since is found. Default: DefaultMaxAge (30s).
func WithMaxAge(d time.Duration) Option {
	return named("WithMaxAge", func(o *options) error {
		if d < 0 {
			return fmt.Errorf("openapi3: max age must not be negative, got %v", d)
		}
		o.maxAge = d
		return nil
	})
}

// WithClock sets the clock for the root's age. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return named("WithClock", func(o *options) error { o.clock = c; return nil })
}

// Option configures a Client.
type Option func(*options) error

// WithDiskCache serves documents through an HTTP cache (diskcache.
// NewTransport) on c, a *diskcache.Cache or any diskcache.Store: a document
// at an unchanged ?hash= URL costs no request at all. A store other than a
// *diskcache.Cache (Redis, a fleet's) may be written by others: the root,
// which names the documents' hashes, is never answered from it without
// the server (the root is read, or its entry confirmed by a 304), a JSON
// document read back from it is checked against its ?hash= (Document,
// Raw), and what nothing can check (a protobuf document, a hash of another
// form than kube-openapi's) is neither read from it nor written to it.
// A nil c, or a nil *diskcache.Cache, is no cache. Default: no disk
// cache.
func WithDiskCache(c diskcache.Store) Option {
	return named("WithDiskCache", func(o *options) error {
		if o.disk = c; diskcache.IsNil(c) {
			o.disk = nil
		}
		return nil
	})
}

// WithConcurrency bounds the requests FetchAll sends at once. Default:
// DefaultConcurrency (8).
func WithConcurrency(n int) Option {
	return named("WithConcurrency", func(o *options) error {
		if n < 1 {
			return fmt.Errorf("openapi3: concurrency must be at least 1, got %d", n)
		}
		o.concurrency = n
		return nil
	})
}

// WithMaxRedirects bounds the 301s followed for a stale ?hash=. Default:
// DefaultMaxRedirects (3).
func WithMaxRedirects(n int) Option {
	return named("WithMaxRedirects", func(o *options) error {
		if n < 0 {
			return fmt.Errorf("openapi3: max redirects must not be negative, got %d", n)
		}
		o.maxRedirects = n
		return nil
	})
}

// WithMaxRetries bounds how many times a request answered with 429 or a
// 5xx carrying Retry-After is sent again, after the wait the server asks
// for (never past the caller's deadline). Default: DefaultMaxRetries (5);
// 0 turns retries off.
func WithMaxRetries(n int) Option {
	return named("WithMaxRetries", func(o *options) error {
		if n < 0 {
			return fmt.Errorf("openapi3: max retries must not be negative, got %d", n)
		}
		o.maxRetries = n
		return nil
	})
}

// WithMaxResponseBytes caps one response, the root's or a document's
// (which DocumentLimits.Bytes caps too: the lower bound applies). Default:
// DefaultMaxResponseBytes.
func WithMaxResponseBytes(n int64) Option {
	return named("WithMaxResponseBytes", func(o *options) error {
		if n < 1 {
			return fmt.Errorf("openapi3: max response bytes must be positive, got %d", n)
		}
		o.maxResponseBytes = n
		return nil
	})
}

// Client reads a cluster's OpenAPI v3: the root once, then each
// group-version's document through the URL the root gives it.
type Client struct {
	http *httpx.Client // every request goes through it
	opts options

	rootMu    sync.Mutex // guards root, rootTried, rootStale, rootFailed and the marks; held only to read or swap them (never across the clock)
	root      map[string]string
	rootTried time.Time // when the root was last read, or tried
	rootStale error     // why root is the one kept on disk (WithStaleRootOnError), else nil
	rootKept  []byte    // the root kept on disk, as far as this process knows (keepRoot)
	// rootFailed is the last read's failure when the root's bytes were at
	// fault (over its bounds, not a root), else nil: see Paths.
	rootFailed *failure
	// Changed's marks: how many were made, how many a read of the root
	// has answered; and how many reads found the root unchanged since
	// marksTried marks were made (they get markReads in all).
	marks, marksRead, marksTried uint64
	marksUnchanged               int

	// Fetches that concurrent callers share, each on its own context
	// (bounded by fetchTimeout), cancelled when every caller has left.
	rootFetch flight.Group[struct{}, map[string]string]
	docFetch  flight.Group[string, *Document]
	pbFetch   flight.Group[string, *openapi_v3.Document]
	rawFetch  flight.Group[string, []byte] // Raw's protobuf documents

	// large lets one document at a time grow past httpx.LargeBody, so
	// that FetchAll against a server of oversized documents holds about
	// one limit's worth of memory, not one per parallel fetch.
	large *semaphore.Weighted

	docMu  sync.Mutex               // guards docs, recent and redirects; never held across I/O
	docs   map[string]*list.Element // path -> its element of recent
	recent *list.List               // of *Document, most recently used first
	// redirects: path -> its kept document's fetch, when a 301 led it to
	// bytes of another hash than the one asked for (keptAt); redirected
	// says whether it holds any, so that keptAt, on FetchAll's path for
	// every group-version, reads the clock only then.
	redirects  map[string]redirect
	redirected atomic.Bool

	// ownDisk: the disk cache is a *diskcache.Cache, whose entries only
	// the user (or root) wrote (verify). sharedDisk: there is a disk
	// cache, and it is not one (Redis, a fleet's): others may write it.
	ownDisk, sharedDisk bool

	failMu sync.Mutex           // guards failed; never held across I/O or the clock
	failed map[failKey]*failure // why a document could not be had (limits.go)

	// work counts the SHA-512s computed and protobuf documents decoded,
	// for the tests that pin "once per document".
	work struct{ hashes, decodes atomic.Int64 }
}

// New builds a client from a client-go config.
// Its User-Agent is the config's, else "kubeatlas", as discovery's.
func New(cfg *rest.Config, opts ...Option) (*Client, error) {
	_, hc, base, err := httpx.FromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("openapi3: %w", err)
	}
	return newClient(hc, base, opts)
}

// NewForHTTPClient builds a client that sends requests through hc (nil
// means http.DefaultClient) to the API server at baseURL.
func NewForHTTPClient(hc *http.Client, baseURL string, opts ...Option) (*Client, error) {
	base, err := httpx.ParseBase(baseURL)
	if err != nil {
		return nil, fmt.Errorf("openapi3: %w", err)
	}
	return newClient(hc, base, opts)
}

func newClient(hc *http.Client, base *url.URL, opts []Option) (*Client, error) {
	o := options{
		concurrency:      DefaultConcurrency,
		maxRedirects:     DefaultMaxRedirects,
		maxResponseBytes: DefaultMaxResponseBytes,
		maxRetries:       DefaultMaxRetries,
		maxAge:           DefaultMaxAge,
		clock:            clock.RealClock{},
		rootTimeout:      DefaultRootTimeout,
		limits:           DocumentLimits{}.withDefaults(),
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	// Read only while the options apply: a client keeps no record (a
	// process may hold thousands of clients, package shared's identities).
	o.given = nil
	if o.staleRoot && o.disk == nil {
		return nil, errStaleRootNeedsCache
	}
	// A copy of the caller's client: its transport under the disk cache,
	// and the redirect policy discovery has too (httpx.CheckRedirect).
	// Gzip is left to Go's transport, under the disk cache, which stores
	// documents decompressed, as it verifies them.
	h := httpx.NewClient(hc, base, o.maxRedirects)
	cl := &Client{http: h, opts: o, docs: map[string]*list.Element{}, recent: list.New(), large: semaphore.NewWeighted(1)}
	h.MaxRetries = int32(min(o.maxRetries, math.MaxInt32))
	// A document is read no further than its bound (the root, 100 KB at
	// 3000 CRDs, shares it).
	limit := min(o.maxResponseBytes, o.limits.Bytes)
	h.Body = httpx.Options{Limit: limit, Large: cl.large}
	if o.disk != nil {
		_, cl.ownDisk = o.disk.(*diskcache.Cache)
		cl.sharedDisk = !cl.ownDisk
		h.HC.Transport = diskcache.NewTransport(h.HC.Transport, o.disk, diskcache.WithKey(storeKey),
			diskcache.WithCheck(cl.checkBeforeStoring), diskcache.WithMaxBodyBytes(limit))
	}
	cl.rootFetch.Timeout, cl.docFetch.Timeout, cl.pbFetch.Timeout, cl.rawFetch.Timeout = fetchTimeout, fetchTimeout, fetchTimeout, fetchTimeout
	return cl, nil
}

// ErrRedirect is the cause of an error for a redirect that is not followed:
// too many, or to another host (credentials never leave the server's host).
// It is the same error as discovery.ErrRedirect.
var ErrRedirect = httpx.ErrRedirect

// ErrTooLarge is the cause of the error for a response over the size limit
// (WithMaxResponseBytes). It is the same error as discovery.ErrTooLarge.
var ErrTooLarge = httpx.ErrTooLarge

// Paths lists the group-version paths of the root ("apis/apps/v1", "api/v1")
// and their current URLs. The root is read on first use; one older than
// the max age is answered from and read again in the background. Until a
// root is read, a root whose bytes were at fault (over DocumentLimits'
// Bytes or Paths, or not a root) is not read again for 1s, doubling with
// each such failure up to 5 minutes: its error comes back, wrapped with
// ErrRemembered. RefreshRoot reads it at once.
//
// After Changed, the root is read again before the answer, unless it was
// read (or tried) less than a second before: then the first call a second
// after that read reads it (see Changed for a root found unchanged).
func (c *Client) Paths(ctx context.Context) (map[string]string, error) {
	now := c.opts.clock.Now() // the user's clock: read holding no lock
	c.rootMu.Lock()
	root, tried, failed := c.root, c.rootTried, c.rootFailed
	age := now.Sub(tried)
	// Marks due a read claim it as they decide (see missRead): callers
	// that miss at once read the root once, however many; one whose
	// context has ended claims nothing.
	markDue := root != nil && ctx.Err() == nil && c.marks != c.marksRead && age >= c.markWaitLocked()
	if markDue && !c.held() {
		c.rootTried = now
	}
	c.rootMu.Unlock()
	if root == nil {
		if failed != nil {
			if at, _ := failed.retryAt(failed.url); c.opts.clock.Now().Before(at) {
				return nil, fmt.Errorf("%w: %w", ErrRemembered, failed.err)
			}
		}
		root, err := c.RefreshRoot(ctx)
		if err != nil {
			if stale := c.staleRoot(err); stale != nil {
				return stale, nil
			}
		}
		return root, err
	}
	if markDue {
		if fresh, err := c.RefreshRoot(ctx); err == nil {
			return fresh, nil
		}
		// The read failed (it answered the marks: see readRoot): the root
		// held answers, as when a read in the background fails.
		return root, nil
	}
	if age >= c.opts.maxAge {
		c.rootFetch.Start(struct{}{}, c.readRoot)
	}
	return root, nil
}

// Changed tells c that the server's APIs may have changed (a CRD's schema,
// a group-version added or removed): the next call that needs the root
// (Paths, Document, DocumentOf, Kind, FetchAll, Gnostic, and so
// openapi3/typed's Converter) reads it again first, so that a changed
// ?hash= is fetched (that group-version's document alone), a new
// group-version is found and a removed one forgotten. The root is read at
// most once a second however often Changed is called: a call within a
// second of the last read is answered by the first call a second after
// it. A read that finds the root unchanged, with no mark since, is tried
// again half a second later until 2 s, then each second until 6 s, then
// 2, 4, 8 and 16 s apart (36 s in all, past DefaultMaxAge), as a server
// serves a change a moment after telling of it (a second or so for a
// CRD's schema, tens of seconds under load); a read that fails
// answers the marks (the max age schedules the next), but one the server
// refused with a 429 does not: the first call a second later, once the
// 429's Retry-After has passed (nothing is sent before), reads again. An
// idle client sends nothing: the read waits for a call that needs it.
//
// Changed sends nothing and does not block: it is for a watch's callback
// (discovery/watch.WithOnChange, which package shared wires), and for
// callers that learn of a change another way (a conversion that fails on
// a field the held schema lacks, as openapi3/typed's does).
func (c *Client) Changed() {
	c.rootMu.Lock()
	c.marks++
	c.rootMu.Unlock()
}

// RefreshRoot reads the root again now; documents whose hash changed are
// then fetched anew (and their old copies leave the disk cache).
func (c *Client) RefreshRoot(ctx context.Context) (map[string]string, error) {
	root, err := c.rootFetch.Do(ctx, struct{}{}, c.readRoot)
	if err != nil && err == ctx.Err() {
		// The caller left before the shared read ended (readRoot's own
		// errors name the URL): say what it waited for (explain printed
		// a bare "context deadline exceeded").
		u, _ := c.http.URL("/openapi/v3")
		err = fmt.Errorf("openapi3: reading the root %s: %w", u.Redacted(), err)
	}
	return root, err
}

// readRoot reads the root, within the root timeout (a hanging server is
// unavailable: see staleRoot). A failed read counts as a try, so that a
// server that fails is asked again after the max age, not on every call.
//
// A read answers the marks Changed made before it began: at once when it
// fails or finds a new root, and after markReads reads that find the same
// root (the change may not be served yet). Marks made during the read
// wait for the next one, which may begin after their change.
func (c *Client) readRoot(ctx context.Context) (map[string]string, error) {
	now := c.opts.clock.Now() // the user's clock: read holding no lock
	c.rootMu.Lock()
	if !c.held() {
		c.rootTried = now
	}
	prev, covered := c.root, c.marks
	c.rootMu.Unlock()
	root, body, err := c.readRootBody(ctx)
	if err != nil {
		c.rootFailure(now, err)
	}
	c.rootMu.Lock()
	if err == nil {
		c.root, c.rootStale, c.rootFailed = root, nil, nil
	}
	switch {
	case err != nil && apierrors.IsTooManyRequests(err):
		// The server told the client to wait (API Priority and
		// Fairness): the marks stay, and the first call a second later
		// reads again, sending nothing until the 429's Retry-After has
		// passed (the client holds it). Answered by the refusal, a
		// change the watch saw waited for the max age: issue 47's soak
		// found a throttled identity's schemas up to 13.7 s behind, of
		// the time it was free to ask.
	case err == nil && covered != c.marksRead && maps.Equal(prev, root):
		if c.marksTried != covered {
			c.marksTried, c.marksUnchanged = covered, 0
		}
		if c.marksUnchanged++; c.marksUnchanged >= markReads {
			c.marksRead = covered
		}
	default:
		c.marksRead = max(c.marksRead, covered)
	}
	c.rootMu.Unlock()
	if err != nil {
		return nil, err
	}
	if c.opts.staleRoot && c.ownDisk {
		c.keepRoot(body)
	}
	if prev != nil {
		c.forgetUnlisted(root)
	}
	return root, nil
}

// readRootBody reads and parses the root, within the root timeout.
func (c *Client) readRootBody(ctx context.Context) (map[string]string, []byte, error) {
	rctx, cancel := context.WithTimeoutCause(ctx, c.opts.rootTimeout, &RootTimeoutError{Timeout: c.opts.rootTimeout})
	defer cancel()
	body, _, err := c.get(rctx, httpx.Request{Ref: "/openapi/v3", Accept: "application/json"})
	if err != nil {
		if cause := context.Cause(rctx); ctx.Err() == nil && cause != nil && !errors.As(err, new(*RootTimeoutError)) {
			// The bound, not the caller, ended the read: say so where the
			// error does not (a wait for Retry-After says only "context
			// deadline exceeded").
			err = fmt.Errorf("%w: %w", cause, err)
		}
		return nil, nil, err
	}
	root, err := c.parseRoot(body)
	if err != nil {
		return nil, nil, err
	}
	return root, body, nil
}

// forgetUnlisted drops the documents kept for group-versions root does
// not list: the server no longer serves them, and lookups answer
// ErrNotFound (urlFor) without them.
func (c *Client) forgetUnlisted(root map[string]string) {
	c.docMu.Lock()
	defer c.docMu.Unlock()
	for path, e := range c.docs {
		if _, ok := root[path]; !ok {
			c.recent.Remove(e)
			delete(c.docs, path)
			delete(c.redirects, path)
		}
	}
	c.redirected.Store(len(c.redirects) > 0)
}

// rootFailure remembers a read of the root at now that failed with err,
// if its bytes were at fault (Paths): a root has no hash to wait for a
// new one of, so it is tried again after a back-off, as a document's
// failure that may pass is.
func (c *Client) rootFailure(now time.Time, err error) {
	if !finalFailure(err) {
		return
	}
	c.rootMu.Lock()
	defer c.rootMu.Unlock()
	attempts := 1
	if c.rootFailed != nil {
		attempts = c.rootFailed.attempts + 1
	}
	c.rootFailed = &failure{url: "/openapi/v3", err: err, at: now, attempts: attempts}
}

// parseRoot parses a root's body within DocumentLimits.Paths; the error
// names the root.
func (c *Client) parseRoot(body []byte) (map[string]string, error) {
	root, err := parseRoot(body, c.opts.limits.Paths)
	switch {
	case errors.As(err, new(*LimitError)):
		u, _ := c.http.URL("/openapi/v3")
		return nil, fmt.Errorf("openapi3: the root %s: %w", u.Redacted(), err)
	case err != nil:
		return nil, fmt.Errorf("openapi3: the root is not an OpenAPI v3 discovery document: %w", err)
	}
	return root, nil
}

// missRead reads the root again for a miss (a path the root does not
// list, a kind or field the held document lacks) unless it was read, or
// tried, within missRefresh; read says whether this call read it. The
// check and the claim of the read are one step under rootMu: callers that
// miss at once, or one after another while a read ends, read the root
// once a second however many they are, where a check apart from the read
// let a caller that checked before a read ended start another after it.
//
// A caller whose context has ended claims nothing (it would cancel the
// read it claimed, and hold the others' off for a second): it gets its
// context's error.
func (c *Client) missRead(ctx context.Context) (root map[string]string, read bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	now := c.opts.clock.Now() // the user's clock: read holding no lock
	c.rootMu.Lock()
	due := now.Sub(c.rootTried) >= missRefresh
	if due && !c.held() {
		c.rootTried = now
	}
	c.rootMu.Unlock()
	if !due {
		return nil, false, nil
	}
	root, err = c.RefreshRoot(ctx)
	return root, true, err
}

// held says whether the server told the client to wait (a 429 whose
// Retry-After has not passed, which the client's requests are answered
// with, and nothing sent): a read then is no try. The first call after
// the wait reads at once, not a second after the refused read: a
// throttled identity refused again and again lost up to a second of the
// time it was free to ask at each refusal (issue 47's soak).
func (c *Client) held() bool { return !c.http.HeldUntil().IsZero() }

// missRefresh is how often at most a miss (missRead) makes the client
// read the root again.
const missRefresh = time.Second

// markReads is how many reads marks (Changed) get while the root stays
// the same: half a second apart for the first markQuick (the first at
// once, a second after the last read at the earliest), then a second
// apart to markSteady, then 2, 4, 8 and 16 s apart. A real kube-apiserver
// v1.36.3 serves a CRD's new schema 0.35 to 1.1 s after the watch event
// for it, so the first read often comes too early, and under load (3,000
// CRDs, a busy machine) 1 to 1.4 s after, and at times tens of seconds
// (one new group-version 43 s after its CRD was created). Reading each
// half second while most changes show keeps the typed schema within half
// a second of the server's: with reads a second apart, issue 47's soak
// found a fleet member's schemas 1.07 s behind its server, whose schema
// came just after the first read (with reads 1, 2 and 4 s apart, a change
// served 1.05 s after its event waited until the read at 3 s). Reading on
// past the default max age (30 s, after which any call reads the root
// anyway) leaves no change the watch saw waiting longer than the next
// read. A mark for a change that never shows in the root (a CRD's status)
// costs these 13 root reads over 36 s, most of them 304s, and nothing
// more. New marks between reads (a flood of Changed) read once a second.
const (
	markQuick     = 5 // reads at 0, 0.5, 1, 1.5 and 2 s
	markQuickWait = missRefresh / 2
	markSteady    = 9  // and at 3, 4, 5 and 6 s
	markReads     = 13 // and at 8, 12, 20 and 36 s
)

// markWaitLocked is how long after the last read the marks may make the
// next: a second when marks were made since it (so that a flood of them
// reads once a second); else, after the reads since the last new mark
// that found the root unchanged, half a second for the first markQuick,
// a second to markSteady, then doubling.
func (c *Client) markWaitLocked() time.Duration {
	switch {
	case c.marksTried != c.marks:
		return missRefresh
	case c.marksUnchanged < markQuick:
		return markQuickWait
	case c.marksUnchanged < markSteady:
		return missRefresh
	}
	return missRefresh << (c.marksUnchanged - markSteady + 1)
}

// fetchTimeout bounds a fetch that concurrent callers share.
const fetchTimeout = 2 * time.Minute

// Raw is the body of a GET of the server-relative URL u with Accept
// contentType, through the client's connection, disk cache, limits and
// retries, for adapters that hand documents on to parsers of their own
// (openapi3/clientgo, to client-go's openapi3.NewRoot and kube-openapi's
// proto models). What it hands on depends on what u and contentType ask
// for:
//   - a group-version's document (a URL under /openapi/v3/) as JSON is
//     DocumentAt's, of the path the root lists at u (else the one u
//     names): within DocumentLimits, checked against its ?hash=, its
//     failures remembered, kept as Document keeps it;
//   - the same document as protobuf (ProtobufType or
//     ProtobufTypeDeprecated) is Gnostic's bytes, not decoded: within
//     DocumentLimits as Gnostic says, its failures remembered as
//     Gnostic's, not kept;
//   - the root is the server's root within DocumentLimits.Paths;
//   - anything else is the server's answer as it came, bounded in bytes
//     only.
//
// With a store other than a *diskcache.Cache, as WithDiskCache says: the
// root is the server's (read, or confirmed by a 304), what cannot be
// checked is the server's answer, and a JSON document at a ?hash= URL
// read back from the store is checked against the hash: one that is not
// the hash's is dropped and asked of the server, once.
func (c *Client) Raw(ctx context.Context, u, contentType string) ([]byte, error) {
	pb := asked(contentType, ProtobufType) || asked(contentType, ProtobufTypeDeprecated)
	if path, ok := c.documentPath(u); ok {
		switch {
		case pb:
			return c.protobufAt(ctx, path, u, contentType)
		case asked(contentType, "application/json"):
			d, err := c.DocumentAt(ctx, path, u)
			if err != nil {
				return nil, err
			}
			return d.JSON, nil
		}
	}
	body, err := c.raw(ctx, u, contentType)
	if err != nil || pb || !asked(contentType, "application/json") || !isRoot(u) {
		return body, err
	}
	if _, err := c.parseRoot(body); err != nil {
		return nil, err
	}
	return body, nil
}

// raw is the body of a GET of u as the server sent it (through the disk
// cache: a JSON document at a ?hash= URL read back from a store others
// write is checked against the hash).
func (c *Client) raw(ctx context.Context, u, contentType string) ([]byte, error) {
	req := httpx.Request{Ref: u, Accept: contentType}
	for first := true; ; first = false {
		body, resp, err := c.get(ctx, req)
		if err != nil || !c.sharedDisk || resp.Request == nil || resp.Header.Get(diskcache.FromCache) != "1" || wantType(resp, "application/json") != nil {
			return body, err
		}
		if _, err := c.verifyHash(resp.Request.URL, body); err != nil {
			if first && c.dropCached(resp) {
				continue // an entry another writer left: the server's, once
			}
			return nil, fmt.Errorf("openapi3: GET %s: %w", u, err)
		}
		return body, nil
	}
}

// isRoot says whether the server-relative URL u is the root's.
func isRoot(u string) bool {
	p, err := url.Parse(u)
	return err == nil && strings.HasSuffix(strings.TrimSuffix(p.Path, "/"), "/openapi/v3")
}

// documentPath is the group-version path of the document at u: the one
// the root lists at u, else what follows /openapi/v3/ in u's path (as
// kube-openapi names them, and as storeKey files them). ok is false for
// a URL that is no document's.
func (c *Client) documentPath(u string) (path string, ok bool) {
	c.rootMu.Lock()
	root := c.root // never modified once published: read without the lock
	c.rootMu.Unlock()
	for p, at := range root {
		if at == u {
			return p, true
		}
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "", false
	}
	_, path, ok = strings.Cut(parsed.Path, "/openapi/v3/")
	path = strings.Trim(path, "/")
	return path, ok && path != ""
}

// fetchRemembered answers path's document at u in form key: the failure
// remembered for it if it is not due for a retry, else the result of
// fetch, which concurrent callers share (g, by u) and whose failure is
// remembered as DocumentAt says. A first failure of an entry the disk
// cache answered drops the entry and asks the server, once: another
// writer may have left it.
func fetchRemembered[V any](ctx context.Context, c *Client, g *flight.Group[string, V], key failKey, u string,
	fetch func(context.Context) (V, *http.Response, error)) (V, error) {
	if err := c.remembered(key, u); err != nil {
		var zero V
		return zero, err
	}
	return g.Do(ctx, u, func(ctx context.Context) (V, error) {
		for first := true; ; first = false {
			v, resp, err := fetch(ctx)
			if err != nil && first && c.dropCached(resp) {
				continue // an entry another writer left: the server's, once
			}
			if err != nil {
				err = &DocumentError{Path: key.path, URL: u, Err: err}
			}
			// Remembered by the fetch, which callers share, not by each
			// caller: the one whose context ended remembers nothing.
			c.remember(key, u, err)
			return v, err
		}
	})
}

// get fetches one server-relative URL, r.Ref (httpx.Client.Get: within
// the size limit, again after a 429 or 5xx with Retry-After), using a
// store others may write only as far as the server confirms what it
// holds (fromShared).
func (c *Client) get(ctx context.Context, r httpx.Request) ([]byte, *http.Response, error) {
	if c.sharedDisk {
		r.Revalidate, r.NoStore = fromShared(r.Ref, r.Accept)
	}
	ref := r.Ref
	// Under a path prefix (a proxy's /k8s/clusters/<id>), a URL rooted at
	// /openapi/v3 gets the prefix; one a proxy already rewrote to carry it
	// is taken as it is, as client-go does.
	if prefix := c.http.Base.Path; prefix != "" && !strings.HasPrefix(ref, "/openapi/v3") && strings.HasPrefix(ref, prefix+"/") {
		ref = strings.TrimPrefix(ref, prefix)
	}
	r.Ref = ref
	resp, err := c.http.Get(ctx, r)
	if err != nil {
		var hr *http.Response
		if resp != nil {
			hr = resp.Response
		}
		return nil, hr, fmt.Errorf("openapi3: GET %s: %w", ref, err)
	}
	return resp.Body, resp.Response, nil
}

// fromShared says how a request to ref with Accept accept may use a store
// that others write (any but a *diskcache.Cache: Redis, a fleet's): a
// JSON document at a ?hash= URL of kube-openapi's form is read from it
// and checked against the hash (verify, Raw), which the server's root
// named; the root, which names those hashes, is answered from it only
// once the server confirms the entry (a 304 to its ETag: revalidate);
// anything else, which nothing the server says can vouch for (a protobuf
// document, whose bytes no hash names; a hash of another form), neither
// comes from it nor goes to it (noStore).
func fromShared(ref, accept string) (revalidate, noStore bool) {
	u, err := url.Parse(ref)
	if err != nil {
		return false, true
	}
	if strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/openapi/v3") {
		return true, false
	}
	if _, checkable := namedHash(u); checkable && accept == "application/json" {
		return false, false
	}
	return false, true
}

// urlFor is the current URL of path's document, from the root. A path the
// root does not list reads the root again, unless it was read within
// missRefresh: a group-version added since is found, and asking for one
// that does not exist costs at most a request a second.
func (c *Client) urlFor(ctx context.Context, path string) (string, error) {
	root, err := c.Paths(ctx)
	if err != nil {
		return "", err
	}
	u, ok := root[path]
	if !ok {
		fresh, read, err := c.missRead(ctx)
		if err != nil {
			return "", err
		}
		if read {
			u, ok = fresh[path]
		}
	}
	if !ok {
		return "", fmt.Errorf("%w: the server lists no OpenAPI document for %q", ErrNotFound, path)
	}
	return u, nil
}

// Document returns one group-version's document, fetching it on first use
// (and again when the root gives it a new hash). A failure is remembered
// as DocumentAt says.
func (c *Client) Document(ctx context.Context, path string) (*Document, error) {
	u, err := c.urlFor(ctx, path)
	if err != nil {
		return nil, err
	}
	if c.redirectDue(path, u) {
		// The kept bytes are another hash's (keptAt): the root, read
		// again (at most once a second), may list that hash by now.
		if fresh, read, err := c.missRead(ctx); err == nil && read {
			if nu, ok := fresh[path]; ok {
				u = nu
			}
		}
	}
	return c.DocumentAt(ctx, path, u)
}

// DocumentAt returns path's document at the server-relative URL u (one
// the root listed, with its ?hash=), fetching it unless it is the one kept.
// Document is DocumentAt of the URL the root lists now.
//
// A document that cannot be had is a *DocumentError, and the failure is
// remembered for path: until it may be tried again, callers get it back at
// once, wrapped with ErrRemembered, and nothing is sent. A document whose
// bytes are at fault (over its DocumentLimits, not JSON, not its ?hash=)
// is tried again only at another URL, once the root gives path a new hash;
// any other failure (a status, another content type, a connection or a
// body cut short) after 1s, doubling with each failure up to 5 minutes.
// Whatever the URL, path's document is tried at most once a second after a
// failure. The caller's context ending is not remembered.
func (c *Client) DocumentAt(ctx context.Context, path, u string) (*Document, error) {
	if d := c.keptAt(path, u); d != nil {
		return d, nil
	}
	if t := c.opts.documents; t != nil {
		if d := t.get(path, u); d != nil {
			// Indexed by another client, within its own limits.
			if err := d.Stats().within(c.opts.limits); err != nil {
				return nil, &DocumentError{Path: path, URL: u, Err: err}
			}
			c.noteRedirect(path, u, hashOf(u)) // the table holds u's own bytes
			c.keepIfCurrent(path, u, d)
			return d, nil
		}
	}
	d, err := fetchRemembered(ctx, c, &c.docFetch, failKey{path: path}, u, func(ctx context.Context) (*Document, *http.Response, error) {
		return c.fetchDocument(ctx, path, u)
	})
	if err != nil {
		return nil, err
	}
	c.keepIfCurrent(path, u, d)
	return d, nil
}

// fetchDocument reads path's document at u, checks it and hands it to the
// shared table; resp is the response it came in, if any.
func (c *Client) fetchDocument(ctx context.Context, path, u string) (*Document, *http.Response, error) {
	ctx, v := withVerdict(ctx)
	body, resp, err := c.get(ctx, httpx.Request{Ref: u, Accept: "application/json"})
	if err != nil {
		return nil, resp, err
	}
	if err := wantType(resp, "application/json"); err != nil {
		return nil, resp, fmt.Errorf("openapi3: GET %s: %w", u, err)
	}
	verified, err := c.verify(resp, body, v.about(resp))
	if err != nil {
		return nil, resp, fmt.Errorf("openapi3: GET %s: %w", u, err)
	}
	d, err := newDocument(path, u, body, &c.opts.limits)
	if err == nil {
		c.noteRedirect(path, u, resp.Request.URL.Query().Get("hash"))
	}
	if err != nil || !verified || c.opts.documents == nil {
		return d, resp, err
	}
	// The hash verified is the final URL's (resp.Request's, after any
	// redirect), which names the bytes; u's may name others.
	return c.opts.documents.put(d, resp.Request.URL.Query().Get("hash")), resp, nil
}

// keepIfCurrent keeps d for path while u is the root's current URL for it:
// a caller holding an older root must not replace a newer document.
func (c *Client) keepIfCurrent(path, u string, d *Document) {
	c.rootMu.Lock()
	current := c.root[path] == u
	c.rootMu.Unlock()
	if current {
		c.keep(path, d)
	}
}

// redirect is a fetch of a document that a 301 led to bytes of another
// hash than the one asked for. Behind a balancer over two servers, a root
// read from the server that has a CRD's change lists the new hash, and the
// document's request may reach the one that does not yet: its 301 leads
// to its current, older document. Kept as the document of the new hash,
// it stayed until the root changed again: issue 47's soak found a
// balancer's typed schema 6.9 s behind both servers, until the next CRD
// event. So such a document answers for the URL asked for a second at
// most (missRefresh), and is then asked for again, once the root has been
// read again (Document): one listing the hash its bytes have makes it that
// URL's document, with no request.
type redirect struct {
	u     string    // the URL asked for
	final string    // the hash the bytes were verified against
	at    time.Time // when they were read (the user's clock)
}

// noteRedirect records how path's document at u was just read: final is
// the hash of the URL its bytes came from.
func (c *Client) noteRedirect(path, u, final string) {
	now := c.opts.clock.Now() // the user's clock: read holding no lock
	c.docMu.Lock()
	defer c.docMu.Unlock()
	defer func() { c.redirected.Store(len(c.redirects) > 0) }()
	if final == "" || final == hashOf(u) {
		delete(c.redirects, path)
		return
	}
	if c.redirects == nil {
		c.redirects = map[string]redirect{}
	}
	c.redirects[path] = redirect{u: u, final: final, at: now}
}

// redirectDue says whether path's kept document is another hash's bytes
// kept for u for a second or more.
func (c *Client) redirectDue(path, u string) bool {
	if !c.redirected.Load() {
		return false // Document's path, at every call: no clock, no lock
	}
	now := c.opts.clock.Now() // the user's clock: read holding no lock
	c.docMu.Lock()
	defer c.docMu.Unlock()
	r, ok := c.redirects[path]
	return ok && r.u == u && now.Sub(r.at) >= missRefresh
}

// keptAt returns the document kept for path if it is u's, as just used:
// read from u, and not bytes of another hash that a 301 led to a second
// or more ago (redirect); or read from another URL with the bytes of u's
// hash, which it becomes.
func (c *Client) keptAt(path, u string) *Document {
	var now time.Time
	if c.redirected.Load() {
		now = c.opts.clock.Now() // the user's clock: read holding no lock
	}
	c.docMu.Lock()
	defer c.docMu.Unlock()
	e := c.docs[path]
	if e == nil {
		return nil
	}
	d := e.Value.(*Document)
	r, redirected := c.redirects[path]
	switch {
	case redirected && d.URL == r.u && u != r.u && hashOf(u) == r.final:
		d = d.at(u)
		e.Value = d
		delete(c.redirects, path)
		c.redirected.Store(len(c.redirects) > 0)
	case d.URL != u:
		return nil
	case redirected && r.u == u && now.Sub(r.at) >= missRefresh:
		return nil
	}
	c.recent.MoveToFront(e)
	return d
}

// hashOf is the ?hash= of the server-relative URL u ("" if none).
func hashOf(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return parsed.Query().Get("hash")
}

// keep keeps d for path, dropping the least recently used document beyond
// the bound.
func (c *Client) keep(path string, d *Document) {
	c.docMu.Lock()
	defer c.docMu.Unlock()
	if e := c.docs[path]; e != nil {
		e.Value = d
		c.recent.MoveToFront(e)
	} else {
		c.docs[path] = c.recent.PushFront(d)
	}
	if limit := c.opts.maxDocuments; limit > 0 && c.recent.Len() > limit {
		oldest := c.recent.Back()
		c.recent.Remove(oldest)
		delete(c.docs, oldest.Value.(*Document).Path)
		delete(c.redirects, oldest.Value.(*Document).Path)
		c.redirected.Store(len(c.redirects) > 0)
	}
}

// FetchAll reads every group-version's document, a bounded number at a
// time, in the order of their paths.
func (c *Client) FetchAll(ctx context.Context) ([]*Document, error) {
	root, err := c.Paths(ctx)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(root))
	for p := range root {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	docs := make([]*Document, len(paths))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.concurrency)
	for i, p := range paths {
		// A document kept at the root's URL is taken here, not through a
		// goroutine of its own: at 3000 CRDs, 404 of them took 0.77 ms of
		// a long-lived client's round (0.28 ms taken here), and the
		// fetches of changed documents waited their turn behind them.
		if d := c.keptAt(p, root[p]); d != nil {
			docs[i] = d
			continue
		}
		g.Go(func() error {
			d, err := c.Document(gctx, p)
			docs[i] = d
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return docs, nil
}

// The OpenAPI v3 protobuf content types: servers answer with the first;
// servers before Kubernetes 1.27 know only the second.
const (
	ProtobufType           = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	ProtobufTypeDeprecated = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// Gnostic reads a group-version's document in its protobuf form, decoded
// with gnostic-models (the form kube-openapi's proto.NewOpenAPIV3Data
// builds its models from). It goes through the same ?hash= URL as
// Document, so with WithDiskCache an unchanged document costs no request;
// nothing is kept in memory. It is bounded by DocumentLimits before it is
// decoded: its bytes as a JSON document's, its schemas and properties
// counted the same, its messages and their nesting at twice the JSON
// form's Objects and Depth (gnostic wraps each schema in two messages). A
// failure is a *DocumentError, remembered as DocumentAt's (over a bound,
// or bytes that do not decode, for its hash), apart from the JSON form's.
func (c *Client) Gnostic(ctx context.Context, path string) (*openapi_v3.Document, error) {
	u, err := c.urlFor(ctx, path)
	if err != nil {
		return nil, err
	}
	return fetchRemembered(ctx, c, &c.pbFetch, failKey{path: path, protobuf: true}, u, func(ctx context.Context) (*openapi_v3.Document, *http.Response, error) {
		body, doc, resp, err := c.fetchProtobuf(ctx, path, u, ProtobufType+", "+ProtobufTypeDeprecated)
		if err != nil || doc != nil {
			return doc, resp, err
		}
		doc, err = c.unmarshalGnostic(body)
		if err != nil {
			return nil, resp, gnosticError(path, err)
		}
		return doc, resp, nil
	})
}

// protobufAt is path's protobuf document at u as Gnostic reads it, not
// decoded: Raw's, for parsers of the caller's (kube-openapi's), remembered
// with Gnostic's.
func (c *Client) protobufAt(ctx context.Context, path, u, accept string) ([]byte, error) {
	return fetchRemembered(ctx, c, &c.rawFetch, failKey{path: path, protobuf: true}, u, func(ctx context.Context) ([]byte, *http.Response, error) {
		body, _, resp, err := c.fetchProtobuf(ctx, path, u, accept)
		return body, resp, err
	})
}

// fetchProtobuf reads path's protobuf document at u and checks it against
// the DocumentLimits (checkGnostic); doc is the document decoded, if the
// disk cache's check decoded it on its way to the store; resp is the
// response it came in, if any.
func (c *Client) fetchProtobuf(ctx context.Context, path, u, accept string) (body []byte, doc *openapi_v3.Document, resp *http.Response, err error) {
	ctx, v := withVerdict(ctx)
	body, resp, err = c.get(ctx, httpx.Request{Ref: u, Accept: accept})
	if err != nil {
		return nil, nil, resp, err
	}
	if err := wantType(resp, ProtobufType, ProtobufTypeDeprecated); err != nil {
		return nil, nil, resp, fmt.Errorf("openapi3: GET %s: %w", u, err)
	}
	// Checked (and decoded) once: by the disk cache's check on its way to
	// the store, else here.
	if doc := v.about(resp).gnostic; doc != nil {
		return body, doc, resp, nil
	}
	if _, err := checkGnostic(body, &c.opts.limits); err != nil {
		return nil, nil, resp, gnosticError(path, err)
	}
	return body, nil, resp, nil
}
