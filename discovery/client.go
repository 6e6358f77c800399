package discovery

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// Defaults of the options, which each option's doc states.
const (
	defaultMaxAge         = 30 * time.Second
	defaultRefreshTimeout = 30 * time.Second
	defaultLegacyParallel = 8
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
	surfaces         *Surfaces
}

// building is the options while they apply: the record of those given is
// read only then, and a client keeps none (a process may hold thousands
// of clients, package shared's identities).
type building struct {
	options
	given map[string]bool // the options given, by name (named)
}

// named is the option name, which may be given once: two of one option
// would be silently last-wins, so the second is a constructor error.
func named(name string, set func(*options) error) Option {
	return func(b *building) error {
		if b.given[name] {
			return fmt.Errorf("discovery: %s given twice", name)
		}
		if b.given == nil {
			b.given = map[string]bool{}
		}
		b.given[name] = true
		return set(&b.options)
	}
}

// discard is the default logger: one for every client, which a logger
// of each would not be (clients whose options are alike share them:
// Surfaces.sharedOptions). A *slog.Logger is immutable.
var discard = slog.New(slog.DiscardHandler)

// Option configures a Client.
type Option func(*building) error

// WithMaxAge sets how old a snapshot may be before Snapshot revalidates it
// in the background. Default: 30s.
func WithMaxAge(d time.Duration) Option {
	return named("WithMaxAge", func(o *options) error {
		if d < 0 {
			return fmt.Errorf("discovery: negative max age %v", d)
		}
		o.maxAge = d
		return nil
	})
}

// WithRefreshTimeout bounds one refresh, which callers share. Default: 30s.
func WithRefreshTimeout(d time.Duration) Option {
	return named("WithRefreshTimeout", func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("discovery: refresh timeout must be positive, got %v", d)
		}
		o.refreshTimeout = d
		return nil
	})
}

// WithConcurrency bounds the requests a refresh sends at once: those of
// legacy discovery, one per group-version. Default: 8.
func WithConcurrency(n int) Option {
	return named("WithConcurrency", func(o *options) error {
		if n < 1 {
			return fmt.Errorf("discovery: concurrency must be at least 1, got %d", n)
		}
		o.legacyParallel = n
		return nil
	})
}

// WithMaxResponseBytes caps one response body. Default: 64 MiB.
func WithMaxResponseBytes(n int64) Option {
	return named("WithMaxResponseBytes", func(o *options) error {
		if n < 1 {
			return fmt.Errorf("discovery: max response bytes must be positive, got %d", n)
		}
		o.maxResponseBytes = n
		return nil
	})
}

// WithMaxRetries bounds how many times a request answered with 429 or a
// 5xx carrying Retry-After (as API Priority and Fairness answers) is sent
// again, after the wait the server asks for; a wait that would end after
// the refresh's deadline is not made, and the server's error is returned.
// Default: 5; 0 turns retries off.
func WithMaxRetries(n int) Option {
	return named("WithMaxRetries", func(o *options) error {
		if n < 0 {
			return fmt.Errorf("discovery: max retries must not be negative, got %d", n)
		}
		o.maxRetries = n
		return nil
	})
}

// WithLegacyOnly never asks for aggregated discovery. Default: off.
func WithLegacyOnly() Option {
	return named("WithLegacyOnly", func(o *options) error { o.legacyOnly = true; return nil })
}

// WithJSONOnly never asks for protobuf. Default: off (protobuf preferred).
func WithJSONOnly() Option {
	return named("WithJSONOnly", func(o *options) error { o.jsonOnly = true; return nil })
}

// WithNoPeer asks for the answering API server's own view instead of the
// discovery merged across API servers (KEP-4020 profile=nopeer). Default: off.
func WithNoPeer() Option {
	return named("WithNoPeer", func(o *options) error { o.noPeer = true; return nil })
}

// WithLogger sets where the client logs (discovery/watch has its own).
// A logr.Logger (controller-runtime's, klog's) goes through logr's bridge:
// WithLogger(slog.New(logr.ToSlogHandler(l))). Default: nowhere.
func WithLogger(l *slog.Logger) Option {
	return named("WithLogger", func(o *options) error { o.logger = l; return nil })
}

// WithClock sets the clock for snapshot times and max age. Default: the
// real clock.
func WithClock(c clock.PassiveClock) Option {
	return named("WithClock", func(o *options) error { o.clock = c; return nil })
}

// contradictions is the error of options that cannot all hold.
func (o *options) contradictions() error {
	if !o.legacyOnly {
		return nil
	}
	for _, other := range []struct {
		given bool
		why   string
	}{
		{o.noPeer, "WithNoPeer applies to aggregated discovery"},
		{o.disk != nil, "WithDiskCache persists aggregated discovery only"},
		{o.surfaces != nil, "WithSurfaces shares aggregated discovery only"},
	} {
		if other.given {
			return fmt.Errorf("discovery: %s, which WithLegacyOnly turns off", other.why)
		}
	}
	return nil
}

// Client reads a cluster's discovery and keeps the latest Snapshot.
// It is safe for concurrent use; readers never wait behind a refresh that
// another caller started, unless there is no snapshot yet.
type Client struct {
	http *httpx.Client // sends every request; Connection hands out its HC
	opts *options      // read only; the Surfaces table's when its clients' are alike
	// config, when the client was built from one, backs the client-go
	// adapter's parts that kubeatlas does not replace (version, OpenAPI v2):
	// see Connection.
	config heldConfig

	current atomic.Pointer[Snapshot] // written by publish (refresh.go) only
	machine refresher                // runs refreshes, publishes, tells subscribers
	stats   counters

	log atomic.Pointer[failureLog] // made at the first failure (failures): most clients never have one

	disk     *diskState   // with a disk cache only (WithDiskCache), else nil
	failedAt atomic.Int64 // unix nanos of the last failed refresh

	followers atomic.Int32 // callers following the server's discovery for c (Follow)
	leaders   leaders      // clients whose followers vouch for c's content (FollowLeader)

	views union // servers behind the URL that disagree (mixed.go)
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
	c.config = hold(cfg, c.opts.surfaces)
	c.http.Gzip, c.http.Identity = !cfg.DisableCompression, cfg.DisableCompression
	return c, nil
}

// NewForHTTPClient builds a client that sends requests through hc (nil means
// http.DefaultClient) to the API server at baseURL. The client uses a copy
// of hc whose redirect policy follows at most 3 redirects, on the server's own scheme and host only: credentials that hc's
// transport adds never reach another host.
func NewForHTTPClient(hc *http.Client, baseURL string, opts ...Option) (*Client, error) {
	base, err := httpx.ParseBase(baseURL)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return newClient(hc, base, opts)
}

func newClient(hc *http.Client, base *url.URL, opts []Option) (*Client, error) {
	b := building{options: options{
		maxAge:           defaultMaxAge,
		refreshTimeout:   defaultRefreshTimeout,
		legacyParallel:   defaultLegacyParallel,
		maxResponseBytes: httpx.DefaultMaxResponseBytes,
		maxRetries:       httpx.DefaultMaxRetries,
		logger:           discard,
		clock:            clock.RealClock{},
	}}
	for _, opt := range opts {
		if err := opt(&b); err != nil {
			return nil, err
		}
	}
	o := b.options
	if err := o.contradictions(); err != nil {
		return nil, err
	}
	if o.surfaces != nil {
		o.jsonOnly = true // what WithSurfaces says
	}
	c := &Client{opts: o.surfaces.sharedOptions(&o)}
	if o.disk != nil {
		c.disk = &diskState{}
	}
	c.machine = refresher{c: c}
	// A copy of the caller's client: every request it sends is counted, and
	// redirects stay on the server's host (httpx.CheckRedirect says why).
	c.http = httpx.NewClient(hc, base, httpx.DefaultMaxRedirects)
	c.http.Base = o.surfaces.sharedBase(c.http.Base)
	next := c.http.HC.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.http.HC.Transport = httpx.Counting{Next: next, N: &c.stats.requests}
	c.http.Gzip = true
	c.http.MaxRetries = int32(min(o.maxRetries, math.MaxInt32))
	// Without a disk cache no body outlives its decoding (fetchPart), so
	// bodies may come from httpx's pools and go back to them.
	c.http.Body = httpx.Options{Limit: o.maxResponseBytes, Recyclable: o.disk == nil}
	c.views.c = c
	return c, nil
}

// Connection is the HTTP client this client sends its requests through
// (each counted in Stats.Requests; its transport unwraps, as a
// utilnet.RoundTripperWrapper, to the one below the count, which
// discovery/watch counts on its own) and a rest.Config for the same server:
// a copy of New's config, or one with only the host for
// NewForHTTPClient. It is for adapters that make requests of their own on
// the same connection, such as discovery/clientgo for the server version
// and OpenAPI v2.
func (c *Client) Connection() (*http.Client, *rest.Config) {
	if cfg := c.config.copy(); cfg != nil {
		return c.http.HC, cfg
	}
	return c.http.HC, &rest.Config{Host: c.http.Base.String(), UserAgent: httpx.UserAgent}
}
