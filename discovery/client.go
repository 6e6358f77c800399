package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// Defaults of the options.
const (
	DefaultMaxAge           = 30 * time.Second
	DefaultRefreshTimeout   = 30 * time.Second
	DefaultLegacyParallel   = 8
	DefaultMaxResponseBytes = 64 << 20
	DefaultMaxRetries       = httpx.DefaultMaxRetries
	DefaultMaxRedirects     = 3
)

type options struct {
	maxAge           time.Duration
	refreshTimeout   time.Duration
	legacyParallel   int
	maxResponseBytes int64
	maxRetries       int
	legacyOnly       bool
	jsonOnly         bool
	noPeer           bool
	logger           *slog.Logger
	clock            clock.PassiveClock
	disk             diskcache.Store
	shared           Shared
}

// Option configures a Client.
type Option func(*options) error

// WithMaxAge sets how old a snapshot may be before Snapshot revalidates it
// in the background. Default: DefaultMaxAge (30s).
func WithMaxAge(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("discovery: negative max age %v", d)
		}
		o.maxAge = d
		return nil
	}
}

// WithRefreshTimeout bounds one refresh, which callers share. Default:
// DefaultRefreshTimeout (30s).
func WithRefreshTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("discovery: refresh timeout must be positive, got %v", d)
		}
		o.refreshTimeout = d
		return nil
	}
}

// WithLegacyParallelism bounds the concurrent per-group-version requests of
// legacy discovery. Default: DefaultLegacyParallel (8).
func WithLegacyParallelism(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("discovery: legacy parallelism must be at least 1, got %d", n)
		}
		o.legacyParallel = n
		return nil
	}
}

// WithMaxResponseBytes caps one response body. Default:
// DefaultMaxResponseBytes (64 MiB).
func WithMaxResponseBytes(n int64) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("discovery: max response bytes must be positive, got %d", n)
		}
		o.maxResponseBytes = n
		return nil
	}
}

// WithMaxRetries bounds how many times a request answered with 429 or a
// 5xx carrying Retry-After (as API Priority and Fairness answers) is sent
// again, after the wait the server asks for; a wait that would end after
// the refresh's deadline is not made, and the server's error is returned.
// Default: DefaultMaxRetries (5); 0 turns retries off.
func WithMaxRetries(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("discovery: max retries must not be negative, got %d", n)
		}
		o.maxRetries = n
		return nil
	}
}

// WithLegacyOnly never asks for aggregated discovery. Default: off.
func WithLegacyOnly() Option { return func(o *options) error { o.legacyOnly = true; return nil } }

// WithJSONOnly never asks for protobuf. Default: off (protobuf preferred).
func WithJSONOnly() Option { return func(o *options) error { o.jsonOnly = true; return nil } }

// WithNoPeer asks for the answering API server's own view instead of the
// discovery merged across API servers (KEP-4020 profile=nopeer). Default: off.
func WithNoPeer() Option { return func(o *options) error { o.noPeer = true; return nil } }

// WithLogger sets where the client logs. Default: nowhere.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.logger = l; return nil }
}

// WithClock sets the clock for snapshot times and max age. Default: the
// real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) error { o.clock = c; return nil }
}

// Client reads a cluster's discovery and keeps the latest Snapshot.
// It is safe for concurrent use; readers never wait behind a refresh that
// another caller started, unless there is no snapshot yet.
type Client struct {
	http *httpx.Client // sends every request; Watch and Connection use its HC and Base
	opts options
	// config, when the client was built from one, backs the client-go
	// adapter's parts that kubeatlas does not replace (version, OpenAPI v2):
	// see Connection.
	config *rest.Config

	current atomic.Pointer[Snapshot] // written by publish (refresh.go) only
	machine refresher                // runs refreshes, publishes, tells subscribers
	stats   counters

	logMu          sync.Mutex
	lastFailed     map[string]string // group-version -> error text last logged
	lastRefreshErr string            // the refresh failure last logged

	warm     warmStart    // the disk cache's snapshot, read once (persist.go)
	written  persistState // what was last written to the disk cache (persist.go)
	failedAt atomic.Int64 // unix nanos of the last failed refresh

	views atomic.Pointer[viewHistory]  // servers behind the URL that disagree (mixed.go); nil while they agree
	fresh atomic.Pointer[httpx.Client] // for requests on new connections, built on first use

	watching atomic.Int32 // Watch calls watching (not polling), synced
}

// New builds a client from a client-go config, so kubeconfig auth, TLS, exec
// plugins, impersonation and proxies work unchanged.
func New(cfg *rest.Config, opts ...Option) (*Client, error) {
	cfg, hc, _, err := httpx.FromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return NewForConfigAndClient(cfg, hc, opts...)
}

// NewForConfigAndClient builds a client for cfg's server that sends its
// requests through hc, the client a framework already built for cfg
// (controller-runtime's, say), as client-go's constructors of that name
// do: cfg gives the server URL (a path prefix kept), compression, and what
// Connection hands adapters; hc gives auth, TLS and proxies.
func NewForConfigAndClient(cfg *rest.Config, hc *http.Client, opts ...Option) (*Client, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	c, err := newClient(hc, base, opts)
	if err != nil {
		return nil, err
	}
	c.config = rest.CopyConfig(cfg)
	c.http.Gzip = !cfg.DisableCompression
	return c, nil
}

// NewForHTTPClient builds a client that sends requests through hc (nil means
// http.DefaultClient) to the API server at baseURL. The client uses a copy
// of hc whose redirect policy follows at most DefaultMaxRedirects
// redirects, on the server's own scheme and host only: credentials that hc's
// transport adds never reach another host.
func NewForHTTPClient(hc *http.Client, baseURL string, opts ...Option) (*Client, error) {
	base, err := httpx.ParseBase(baseURL)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return newClient(hc, base, opts)
}

func newClient(hc *http.Client, base *url.URL, opts []Option) (*Client, error) {
	o := options{
		maxAge:           DefaultMaxAge,
		refreshTimeout:   DefaultRefreshTimeout,
		legacyParallel:   DefaultLegacyParallel,
		maxResponseBytes: DefaultMaxResponseBytes,
		maxRetries:       DefaultMaxRetries,
		logger:           slog.New(slog.DiscardHandler),
		clock:            clock.RealClock{},
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.legacyOnly && o.noPeer {
		return nil, errors.New("discovery: WithNoPeer applies to aggregated discovery, which WithLegacyOnly turns off")
	}
	c := &Client{opts: o, lastFailed: map[string]string{}}
	c.written.turn = make(chan struct{}, 1)
	// A copy of the caller's client: every request it sends is counted, and
	// redirects stay on the server's host (httpx.CheckRedirect says why).
	c.http = httpx.NewClient(hc, base, DefaultMaxRedirects)
	next := c.http.HC.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.http.HC.Transport = countingTransport{next: next, n: &c.stats.requests}
	c.http.Gzip = true
	c.http.MaxRetries = o.maxRetries
	c.http.Body = httpx.Options{Limit: o.maxResponseBytes}
	return c, nil
}

// Connection is the HTTP client this client sends its requests through
// (each counted in Stats.Requests) and a rest.Config for the same server:
// a copy of New's config, or one with only the host for
// NewForHTTPClient. It is for adapters that make requests of their own on
// the same connection, such as discovery/clientgo for the server version
// and OpenAPI v2.
func (c *Client) Connection() (*http.Client, *rest.Config) {
	if c.config != nil {
		return c.http.HC, rest.CopyConfig(c.config)
	}
	return c.http.HC, &rest.Config{Host: c.http.Base.String(), UserAgent: httpx.UserAgent}
}

// Current returns the latest snapshot without doing anything, or nil before
// the first successful read.
func (c *Client) Current() *Snapshot { return c.current.Load() }

// Snapshot returns the latest snapshot, reading discovery first if there is
// none. When the snapshot is older than the max age it is returned at once
// and revalidated in the background. The error is the snapshot's own
// (Snapshot.Err) or, without a snapshot, why none could be read.
//
// Snapshot waits for the network in two cases only: when there is no
// snapshot, and once after a warm start (WithDiskCache) from a snapshot
// older than the max age, which is revalidated before it is answered from
// (two 304s when nothing changed). Each waits at most one refresh, bounded
// by ctx and WithRefreshTimeout. When that refresh fails, the persisted
// snapshot is returned with the failure in its RefreshError, and no later
// call waits for it again. After a failed refresh, the next background one
// starts no sooner than the max age (at least a second) later, so that a
// dead server does not get a request per call.
func (c *Client) Snapshot(ctx context.Context) (*Snapshot, error) {
	s := c.current.Load()
	if s == nil {
		if err := c.warmStart(ctx); err != nil {
			return nil, err
		}
		if s = c.current.Load(); s == nil {
			// Any read will do: there is nothing older to be newer than.
			return c.refreshAfter(ctx, false)
		}
	}
	now := c.opts.clock.Now()
	if now.Sub(s.validated) > c.opts.maxAge {
		switch {
		case s.fromDisk && s.refreshErr == nil:
			r, err := c.Refresh(ctx)
			if r != nil && r.refreshErr != nil {
				err = r.err // the failure is told by the snapshot
			}
			return r, err
		case s.refreshErr == nil || now.Sub(time.Unix(0, c.failedAt.Load())) >= max(c.opts.maxAge, time.Second):
			c.refreshInBackground()
		}
	}
	c.stats.cacheHits.Add(1)
	return s, s.err
}

// Refresh revalidates discovery now: a conditional request per endpoint,
// so an unchanged cluster costs two 304s and no decoding. It returns a
// snapshot read after the call began: a refresh already under way (which
// may have read the server before a change the caller must see) is not
// taken, but the callers that arrive while it runs share the one that
// follows it. Each caller waits at most until its ctx ends (it then gets
// the current snapshot and ctx's error), and a refresh that every caller
// has left is cancelled. With WithDiskCache, the first Refresh revalidates
// the persisted snapshot. A failed refresh keeps the previous snapshot's
// content current, marked with the failure (Snapshot.RefreshError), and
// returns it with the error.
func (c *Client) Refresh(ctx context.Context) (*Snapshot, error) {
	// Revalidate what is on disk rather than read it all again.
	if err := c.warmStart(ctx); err != nil {
		return c.current.Load(), err
	}
	return c.refreshAfter(ctx, true)
}

// logFailures logs a group-version when it starts or stops failing, not on
// every refresh, so a long-dead aggregated API server does not flood logs.
func (c *Client) logFailures(s *Snapshot) {
	now := map[string]string{}
	if pe, ok := s.err.(*PartialError); ok {
		for _, gve := range pe.Errors {
			now[gve.GroupVersion.String()] = gve.Err.Error()
		}
	}
	c.logMu.Lock()
	defer c.logMu.Unlock()
	for gv, msg := range now {
		if c.lastFailed[gv] != msg {
			c.opts.logger.Warn("discovery: group-version not current", "groupVersion", gv, "err", msg)
		}
	}
	for gv := range c.lastFailed {
		if _, still := now[gv]; !still {
			c.opts.logger.Info("discovery: group-version current again", "groupVersion", gv)
		}
	}
	c.lastFailed = now
}

// get sends one GET (httpx.Client.Get) and counts its bytes and 304s. A
// 304 is an answer when etag is set. An error status is an
// *apierrors.StatusError, returned as is; a body over the limit is a
// *ResponseError; any other error is the transport's, or says the body
// could not be read.
func (c *Client) get(ctx context.Context, r httpx.Request) (*httpx.Response, error) {
	resp, err := c.connectionFor(ctx, &r).Get(ctx, r)
	if resp != nil {
		c.stats.bytes.Add(resp.Wire)
	}
	var status *apierrors.StatusError
	switch {
	case resp == nil || errors.As(err, &status):
		return resp, err
	case errors.Is(err, ErrTooLarge):
		return resp, &ResponseError{Path: r.Ref, ContentType: resp.Header.Get("Content-Type"), Err: err}
	case err != nil:
		return resp, fmt.Errorf("discovery: GET %s: reading body: %w", r.Ref, err)
	}
	if resp.StatusCode == http.StatusNotModified {
		c.stats.notModified.Add(1)
	}
	return resp, nil
}
