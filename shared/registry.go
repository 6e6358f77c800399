package shared

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
	"github.com/kubeatlas/kubeatlas/internal/optset"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// DefaultLinger is how long a client no handle holds any more is kept
// (WithLinger).
const DefaultLinger = 5 * time.Minute

type options struct {
	linger        time.Duration
	noWatch       bool
	discoveryOpts []discovery.Option
	mapperOpts    []restmapper.Option
	openapiOpts   []openapi3.Option
	watchOpts     []watch.Option

	given optset.Given
}

// Option configures a Registry.
type Option func(*options) error

func named(name string, set func(*options) error) Option {
	return optset.Named("shared", name, func(o *options) *optset.Given { return &o.given }, set)
}

// WithLinger keeps a client that no handle holds any more for d before it
// leaves its server's watch and is forgotten, so that code which acquires and
// releases in turn (a client per reconcile, released when the garbage
// collector finds it) keeps one client instead of reading discovery cold
// each time. An Acquire within d takes the client back. Zero stops it at
// the last Release. Default: DefaultLinger (5m), longer than the poll
// interval of most controllers that build a client per reconcile
// (Crossplane's is 1m).
func WithLinger(d time.Duration) Option {
	return named("WithLinger", func(o *options) error {
		if d < 0 {
			return fmt.Errorf("shared: negative linger %v", d)
		}
		o.linger = d
		return nil
	})
}

// WithoutWatch runs no discovery/watch for the clients: they are kept
// current by their max age (discovery.WithMaxAge) and by the mapper's
// refresh on a miss. Default: each server's clients run one watch between
// them, for as long as one is held or lingers (see the package doc).
func WithoutWatch() Option {
	return named("WithoutWatch", func(o *options) error { o.noWatch = true; return nil })
}

// WithDiscoveryOptions passes options to every discovery client, with the
// registry's discovery.WithSurfaces (the server's table, through which
// identities share what they prove they see alike; it makes the client
// read JSON), which they may not give again. Default: none.
func WithDiscoveryOptions(opts ...discovery.Option) Option {
	return named("WithDiscoveryOptions", func(o *options) error { o.discoveryOpts = append(o.discoveryOpts, opts...); return nil })
}

// WithMapperOptions passes options to every mapper, with the registry's
// restmapper.WithIndexes, which they may not give again. Default: none.
func WithMapperOptions(opts ...restmapper.Option) Option {
	return named("WithMapperOptions", func(o *options) error { o.mapperOpts = append(o.mapperOpts, opts...); return nil })
}

// WithOpenAPIOptions passes options to every OpenAPI v3 client, with the
// registry's openapi3.WithDocuments, which they may not give again.
// Default: none.
func WithOpenAPIOptions(opts ...openapi3.Option) Option {
	return named("WithOpenAPIOptions", func(o *options) error { o.openapiOpts = append(o.openapiOpts, opts...); return nil })
}

// WithWatchOptions passes options to every server's watch.Watcher, with
// the registry's watch.WithOnForbidden and watch.WithOnChange (which tells
// the clients' OpenAPI clients of the changes the watch sees), which they
// may not give again.
// Default: none.
func WithWatchOptions(opts ...watch.Option) Option {
	return named("WithWatchOptions", func(o *options) error { o.watchOpts = append(o.watchOpts, opts...); return nil })
}

// Registry hands out shared discovery clients, mappers and OpenAPI v3
// clients by rest.Config (see the package doc for the key, what is never
// shared and how long a client lives). It is safe for concurrent use.
type Registry struct {
	opts options
	// userAgent is rest.DefaultKubernetesUserAgent, made once: each
	// identity's config that names none holds this one string rather
	// than a copy of its own.
	userAgent string

	mu      sync.Mutex
	clients clientMap
	servers map[serverKey]*server
}

// clientMap is the registry's clients by clientKey.identity (which names
// the server too), held by the key's first 8 bytes: a slot of a Go map is
// its key and value, 16 bytes rather than 40 with the whole 32-byte key,
// and a thousand identities held about 50 bytes less each with the
// map's room to grow. A key is a SHA-256, so two held identities whose
// first 8 bytes are the same do not happen unless made to; the second
// is then in collided, by its whole key, and a lookup compares the whole
// key (client.id) before it hands a client out: never another
// identity's.
type clientMap struct {
	byPrefix map[uint64]*client
	collided map[identityKey]*client // nil until a collision
}

func prefixOf(id identityKey) uint64 { return binary.LittleEndian.Uint64(id[:8]) }

// get is the client of id, or nil.
func (m *clientMap) get(id identityKey) *client {
	if c := m.byPrefix[prefixOf(id)]; c != nil && c.id == id {
		return c
	}
	return m.collided[id]
}

// put holds c, whose id m does not hold.
func (m *clientMap) put(c *client) {
	p := prefixOf(c.id)
	if m.byPrefix[p] == nil {
		if m.byPrefix == nil {
			m.byPrefix = map[uint64]*client{}
		}
		m.byPrefix[p] = c
		return
	}
	if m.collided == nil {
		m.collided = map[identityKey]*client{}
	}
	m.collided[c.id] = c
}

// remove forgets c, if m holds it.
func (m *clientMap) remove(c *client) {
	if p := prefixOf(c.id); m.byPrefix[p] == c {
		delete(m.byPrefix, p)
	} else if m.collided[c.id] == c {
		delete(m.collided, c.id)
	}
}

func (m *clientMap) len() int { return len(m.byPrefix) + len(m.collided) }

// server is what the clients of one server share: content that each
// client's own conditional requests prove it sees, held by content (ETag,
// generation, ?hash=) in the tables of the core packages.
type server struct {
	key       serverKey // in the registry's map (none for a private client's)
	surfaces  *discovery.Surfaces
	indexes   *restmapper.Indexes
	documents *openapi3.Documents
	clients   int // clients of the registry's map that use it (under Registry.mu)

	// The server's one watch (leader.go), under Registry.mu.
	members map[*client]struct{} // clients held or lingering
	lead    *lead                // the watch's run, nil with none
}

// client is one shared client: a server and an identity. Its fields are
// ordered, and its counts 32 bits, so that the flags and the counts fill
// the sync.Once's padding: 112 bytes, two size classes less than 144 (a
// process may hold thousands, package shared's identities).
type client struct {
	id     identityKey // its key in the registry's map (clientKey.identity)
	reg    *Registry
	srv    *server
	dc     *discovery.Client // its transport, below its count, is c's (httpClient)
	mapper *restmapper.Mapper

	// The OpenAPI v3 client, built at the first Handle.OpenAPI (most
	// identities never ask: a thousand held at once would hold a
	// thousand unused clients, a quarter of each identity's heap). A
	// pointer, so that the server's watch marks it (Registry.changed)
	// once built, without building it.
	openapiOnce sync.Once
	private     bool // not in the map: a config that cannot be keyed (keyFor)
	// Under Registry.mu: whether c's credentials were refused a watch
	// (leader.go).
	refused bool
	// Under Registry.mu.
	refs    int32
	lingers uint32 // bumped at each last release and each take-back: a linger timer of an older one does nothing (a wrap would take 4 billion within one linger)
	openapi atomic.Pointer[openapi3.Client]

	// Under Registry.mu.
	timer *time.Timer
	// The server's watch (leader.go): how c follows its leader.
	unfollow func()
}

var defaultRegistry = sync.OnceValue(func() *Registry {
	r, err := New()
	if err != nil {
		panic(err) // New with no options cannot fail
	}
	return r
})

// Default is the process's registry, with the default options, which
// controller-runtime and cli-runtime integrations use unless given
// another. It is the one piece of package state: a process-wide registry
// is what this package is for (see the package doc).
func Default() *Registry { return defaultRegistry() }

// New returns an empty registry. Options given twice, or that give again
// what the registry sets, are errors.
func New(opts ...Option) (*Registry, error) {
	o := options{linger: DefaultLinger}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	// Tried once here, so that a bad option is New's error, not every
	// Acquire's.
	srv := newServer()
	dc, err := discovery.NewForHTTPClient(nil, "https://shared.invalid", srv.discoveryOptions(o)...)
	if err != nil {
		return nil, fmt.Errorf("shared: WithDiscoveryOptions: %w", err)
	}
	if _, err := restmapper.New(dc, srv.mapperOptions(o)...); err != nil {
		return nil, fmt.Errorf("shared: WithMapperOptions: %w", err)
	}
	if _, err := openapi3.NewForHTTPClient(nil, "https://shared.invalid", srv.openAPIOptions(o)...); err != nil {
		return nil, fmt.Errorf("shared: WithOpenAPIOptions: %w", err)
	}
	if _, err := watch.New(dc, watchOptions(o, func() {}, func() {})...); err != nil {
		return nil, fmt.Errorf("shared: WithWatchOptions: %w", err)
	}
	return &Registry{opts: o, userAgent: rest.DefaultKubernetesUserAgent(), servers: map[serverKey]*server{}}, nil
}

func newServer() *server {
	return &server{surfaces: discovery.NewSurfaces(), indexes: restmapper.NewIndexes(), documents: openapi3.NewDocuments()}
}

func (s *server) discoveryOptions(o options) []discovery.Option {
	return append([]discovery.Option{discovery.WithSurfaces(s.surfaces)}, o.discoveryOpts...)
}

func (s *server) mapperOptions(o options) []restmapper.Option {
	return append([]restmapper.Option{restmapper.WithIndexes(s.indexes)}, o.mapperOpts...)
}

func (s *server) openAPIOptions(o options) []openapi3.Option {
	return append([]openapi3.Option{openapi3.WithDocuments(s.documents)}, o.openapiOpts...)
}

// Acquire returns a handle on the shared client for cfg's server and
// identity, making it if there is none: making it sends no request (the
// first lookup reads discovery), and joins the server's watch, starting
// it with this identity's credentials when none runs (unless
// WithoutWatch). Release the handle when done; a handle that is never
// released is released when the garbage collector finds it unreachable
// (see Handle). The error is cfg's: a bad host, an unreadable CA file, an
// HTTP client client-go cannot build.
func (r *Registry) Acquire(cfg *rest.Config) (*Handle, error) {
	if cfg == nil {
		return nil, errors.New("shared: Acquire: nil config")
	}
	k, shareable, err := keyFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("shared: %w", err)
	}
	if shareable {
		if c := r.take(k); c != nil {
			return r.handle(c), nil
		}
	}
	// Built outside the lock: client-go reads certificate files. Two
	// Acquires that race both build; the second to lock drops its own,
	// which has started nothing.
	srv := r.serverFor(k.server, shareable)
	c, err := r.build(cfg, k, srv)
	if err != nil {
		r.mu.Lock()
		r.dropServerLocked(k.server, srv, shareable)
		r.mu.Unlock()
		return nil, err
	}
	c.private = !shareable
	r.mu.Lock()
	if held := r.clients.get(k.identity); shareable && held != nil {
		r.dropServerLocked(k.server, srv, shareable)
		r.takeLocked(held)
		r.mu.Unlock()
		return r.handle(held), nil
	}
	c.refs = 1
	if shareable {
		r.clients.put(c)
	}
	r.joinLocked(c)
	r.mu.Unlock()
	return r.handle(c), nil
}

// take returns the held client of k with one reference more, or nil.
func (r *Registry) take(k clientKey) *client {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.clients.get(k.identity)
	if c != nil {
		r.takeLocked(c)
	}
	return c
}

func (r *Registry) takeLocked(c *client) {
	c.refs++
	if c.refs == 1 { // it lingered: it is held again
		c.lingers++
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
	}
}

// serverFor is the server record of k, counting one more client of it
// (dropServerLocked undoes that); a private client has one of its own.
func (r *Registry) serverFor(k serverKey, shareable bool) *server {
	if !shareable {
		return newServer()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.servers[k]
	if s == nil {
		s = newServer()
		s.key = k
		r.servers[k] = s
	}
	s.clients++
	return s
}

func (r *Registry) dropServerLocked(k serverKey, s *server, shareable bool) {
	if !shareable {
		return
	}
	if s.clients--; s.clients == 0 && r.servers[k] == s {
		delete(r.servers, k)
	}
}

// build makes the client for cfg: its own HTTP client (auth and TLS as
// client-go builds them for cfg), discovery over it, sharing the server's
// tables.
func (r *Registry) build(cfg *rest.Config, k clientKey, srv *server) (*client, error) {
	if cfg.UserAgent == "" {
		// What client-go's clientsets and controller-runtime's client
		// send: the HTTP client is handed to them.
		cfg = rest.CopyConfig(cfg)
		cfg.UserAgent = r.userAgent
	}
	// An identity whose only credentials are a token and impersonation
	// (most) sends through one object over client-go's shared transport
	// (credentials.go); any other, through what client-go builds.
	hc, compact, err := compactTransport(cfg)
	var base *url.URL
	if err == nil && compact {
		base, _, err = rest.DefaultServerUrlFor(cfg)
	} else if err == nil {
		cfg, hc, base, err = httpx.FromConfig(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("shared: %w", err)
	}
	dc, err := discovery.NewForConfigAndClient(cfg, hc, srv.discoveryOptions(r.opts)...)
	if err != nil {
		return nil, fmt.Errorf("shared: %w", err)
	}
	m, err := restmapper.New(dc, srv.mapperOptions(r.opts)...)
	if err != nil {
		return nil, fmt.Errorf("shared: %w", err)
	}
	// The OpenAPI client is built at its first use (openAPI), from what
	// the client holds; what could make that fail is refused here
	// (New tried the options).
	if _, err := httpx.ParseBase(base.String()); err != nil {
		return nil, fmt.Errorf("shared: %w", err)
	}
	return &client{id: k.identity, reg: r, srv: srv, dc: dc, mapper: m, unfollow: func() {}}, nil
}

// httpClient is c's HTTP client as client-go built it for c's config
// (rest.HTTPClientFor: its transport, with auth, TLS and connections,
// and the config's timeout), made again from c's discovery client, which
// sends through that transport below its count of requests (Connection
// says it unwraps to it): the registry keeps no copy of its own (48 bytes
// of each identity). The requests it sends are not discovery's, and are
// not counted in its Stats.
func (c *client) httpClient() *http.Client {
	dhc, cfg := c.dc.Connection()
	next := dhc.Transport
	if w, ok := next.(interface{ WrappedRoundTripper() http.RoundTripper }); ok {
		next = w.WrappedRoundTripper()
	}
	return &http.Client{Transport: next, Timeout: cfg.Timeout}
}

// openAPI is c's OpenAPI v3 client, built at the first call over c's HTTP
// client, for the base URL of c's discovery client, with the server's
// documents table: what an eager build in build would have made.
func (c *client) openAPI(o options) *openapi3.Client {
	c.openapiOnce.Do(func() {
		_, cfg := c.dc.Connection()
		base, _, err := rest.DefaultServerUrlFor(cfg)
		var oa *openapi3.Client
		if err == nil {
			oa, err = openapi3.NewForHTTPClient(c.httpClient(), base.String(), c.srv.openAPIOptions(o)...)
		}
		if err != nil {
			// Not reached: build parsed this base URL, New tried
			// these options, and neither reads anything but them.
			panic(fmt.Sprintf("shared: the OpenAPI client that Acquire checked: %v", err))
		}
		c.openapi.Store(oa)
	})
	return c.openapi.Load()
}

// release drops one reference to c: the last one starts its linger, after
// which (or at once, with no linger) c leaves its server's watch and is
// forgotten.
func (r *Registry) release(c *client) {
	r.mu.Lock()
	c.refs--
	if c.refs > 0 {
		r.mu.Unlock()
		return
	}
	c.lingers++
	if r.opts.linger > 0 && !c.private {
		seq := c.lingers
		c.timer = time.AfterFunc(r.opts.linger, func() { r.expire(c, seq) })
		r.mu.Unlock()
		return
	}
	r.forgetLocked(c)
	r.mu.Unlock()
}

// expire forgets c if nothing took it back since its linger seq began.
func (r *Registry) expire(c *client, seq uint32) {
	r.mu.Lock()
	if c.refs > 0 || c.lingers != seq {
		r.mu.Unlock()
		return
	}
	c.timer = nil
	r.forgetLocked(c)
	r.mu.Unlock()
}

func (r *Registry) forgetLocked(c *client) {
	r.leaveLocked(c)
	if c.private {
		return
	}
	r.clients.remove(c)
	r.dropServerLocked(c.srv.key, c.srv, true)
}

// Len is how many clients the registry holds now, lingering ones
// included.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clients.len()
}

// Handle is one user's hold on a shared client. Its methods return the
// shared objects, which are safe for concurrent use; they keep working
// after Release (a lookup still refreshes discovery on a miss), but are
// then no longer followed through the server's watch once the client is
// forgotten, nor shared with later Acquires.
//
// A handle that becomes unreachable without Release is released by the
// garbage collector (runtime.AddCleanup), for callers that cannot say
// when they are done (a controller-runtime client built per reconcile
// and dropped). Nothing the methods return keeps the handle reachable,
// except the client of HTTPClient: hand that, or the handle itself, to
// whatever lives as long as the use.
type Handle struct {
	c        *client
	cleanup  runtime.Cleanup
	released atomic.Bool // Release gave the reference back (the garbage collector gives it only when Release did not)
}

func (r *Registry) handle(c *client) *Handle {
	h := &Handle{c: c}
	// The cleanup's argument is the client, which does not reach the
	// handle; it runs only while Release has not (Release stops it, and
	// a handle being released is reachable), so it needs no flag of its
	// own: a handle is one object, not two.
	h.cleanup = runtime.AddCleanup(h, (*client).releaseUnreachable, c)
	return h
}

// releaseUnreachable gives back the reference of a handle that became
// unreachable without Release.
func (c *client) releaseUnreachable() { c.reg.release(c) }

// Release gives the handle's reference back. Calling it again does
// nothing. The objects the handle returned stay usable (see Handle).
func (h *Handle) Release() {
	if h.released.CompareAndSwap(false, true) {
		h.cleanup.Stop()
		h.c.reg.release(h.c)
	}
}

// Discovery is the shared discovery client.
func (h *Handle) Discovery() *discovery.Client { return h.c.dc }

// Mapper is the shared REST mapper.
func (h *Handle) Mapper() *restmapper.Mapper { return h.c.mapper }

// OpenAPI is the shared OpenAPI v3 client: built at the first call for
// the handle's server and identity (Acquire builds none, and checked
// what could make it fail), then the same for every handle on it.
func (h *Handle) OpenAPI() *openapi3.Client { return h.c.openAPI(h.c.reg.opts) }

// Watcher is the server's watch (for its Stats) while it runs with the
// handle's identity's credentials (see the package doc, "One watch per
// server"); nil while another identity's credentials run it (the watch's
// Run is not handed to an identity whose credentials it does not send),
// once the client is forgotten, and with WithoutWatch.
func (h *Handle) Watcher() *watch.Watcher {
	r := h.c.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := h.c.srv.lead; l != nil && l.c == h.c {
		return l.watcher
	}
	return nil
}

// HTTPClient is an HTTP client for the handle's server and identity,
// over the shared client's transport (auth, TLS, connections), to hand
// to a framework's client with the mapper (controller-runtime's
// client.Options.HTTPClient). It keeps the handle reachable: as long as
// something holds it, the garbage collector does not release the handle.
func (h *Handle) HTTPClient() *http.Client {
	hc := h.c.httpClient()
	hc.Transport = holding{next: hc.Transport, h: h}
	return hc
}

// holding is a transport that keeps a handle reachable.
type holding struct {
	next http.RoundTripper
	h    *Handle
}

func (t holding) RoundTrip(req *http.Request) (*http.Response, error) { return t.next.RoundTrip(req) }

// WrappedRoundTripper lets client-go's utilnet.RoundTripperWrapper
// walkers (its metrics and debugging) see the transport below.
func (t holding) WrappedRoundTripper() http.RoundTripper { return t.next }
