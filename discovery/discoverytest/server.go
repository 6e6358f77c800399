package discoverytest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	"k8s.io/apiserver/pkg/endpoints/filters"
)

// Routing decides which backend of an HA server answers a request.
type Routing int

const (
	// RoundRobin sends each request to the next backend, like a load
	// balancer that balances requests. The default.
	RoundRobin Routing = iota
	// Sticky sends every request of one client connection to the same
	// backend, like an L4 load balancer with keep-alive connections.
	Sticky
)

type options struct {
	generation      Generation
	builtins        bool
	crds, crdGroups int
	backends        int
	routing         Routing
	versions        []string // gitVersion per backend, or nil
	peer            bool
	token           string
	bookmarks       time.Duration
	discoveryDelay  time.Duration
	watchForbidden  bool
	aggregated      []func(*http.Client, string) (*AggregatedAPI, error)
	specs           *specCache // set by NewFleet for its Servers
	logger          *slog.Logger
}

// Option configures a Server.
type Option func(*options) error

// WithGeneration makes the server speak the discovery formats of an older
// kube-apiserver. Default: GenerationV2 (1.33 and later).
func WithGeneration(g Generation) Option {
	return func(o *options) error {
		if g < GenerationV2 || g > GenerationLegacy {
			return fmt.Errorf("discoverytest: unknown generation %d", int(g))
		}
		o.generation = g
		return nil
	}
}

// WithCRDs adds n synthetic CRDs spread over groups groups (see
// SyntheticCRDs). Default: none.
func WithCRDs(n, groups int) Option {
	return func(o *options) error {
		if n < 0 || groups < 1 {
			return fmt.Errorf("discoverytest: WithCRDs(%d, %d): need n >= 0 and groups >= 1", n, groups)
		}
		o.crds, o.crdGroups = n, groups
		return nil
	}
}

// WithoutBuiltins starts from the core group alone instead of every built-in
// group of the v1.36.3 fixture. Default: built-ins included.
func WithoutBuiltins() Option {
	return func(o *options) error { o.builtins = false; return nil }
}

// WithBackends puts n API servers behind the one URL, all starting with the
// same content. Default: 1.
func WithBackends(n int, routing Routing) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("discoverytest: WithBackends(%d): need at least one backend", n)
		}
		o.backends, o.routing = n, routing
		return nil
	}
}

// WithBackendVersions makes backend i answer /version as a kube-apiserver
// of versions[i] (a gitVersion such as "v1.37.1"), with major and minor,
// and the emulation and minimum compatibility versions (minor and minor-1)
// derived from it, as a cluster mid-upgrade answers. It gives one version
// per backend (see WithBackends), and changes /version alone: discovery
// is still what the generation and the content say. Default: every backend
// says the version of its generation (v1.36.3 for GenerationV2).
func WithBackendVersions(versions ...string) Option {
	return func(o *options) error {
		for _, v := range versions {
			if _, err := parseGitVersion(v); err != nil {
				return err
			}
		}
		o.versions = append([]string(nil), versions...)
		return nil
	}
}

// WithPeerAggregation serves peer-aggregated discovery (KEP-4020): each
// backend's /apis merges every backend's groups, through the real
// k8s.io/apiserver peer handler, and answers with its own view when the
// Accept type says profile=nopeer. It needs GenerationV2. Default: off.
func WithPeerAggregation() Option {
	return func(o *options) error { o.peer = true; return nil }
}

// WithBookmarkInterval sets how often a watch that allows bookmarks gets
// a BOOKMARK event. It must be positive. Default: 5s.
func WithBookmarkInterval(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("discoverytest: WithBookmarkInterval(%v): need a positive interval", d)
		}
		o.bookmarks = d
		return nil
	}
}

// WithDiscoveryDelay makes Server.AddCRD and Server.RemoveCRD behave as on
// a real cluster, where a CustomResourceDefinition's watch event comes a
// little before discovery shows the change: the CRD's and APIServices'
// watch events go out at once, and discovery (and OpenAPI) change d later.
// AddCRD and RemoveCRD still return an error for a bad change, at once.
// Changes made through a Backend are not delayed. Default: 0, every change
// is visible everywhere before the method returns.
func WithDiscoveryDelay(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("discoverytest: WithDiscoveryDelay(%v): need a non-negative delay", d)
		}
		o.discoveryDelay = d
		return nil
	}
}

// WithWatchForbidden starts the server refusing LIST and WATCH of
// CustomResourceDefinitions and APIServices with a 403, as RBAC refuses a
// user without those verbs (see Server.SetWatchForbidden). Default: allowed.
func WithWatchForbidden() Option {
	return func(o *options) error { o.watchForbidden = true; return nil }
}

// Server is a fake Kubernetes API server for discovery and OpenAPI v3,
// served by the handlers a real kube-apiserver runs. It is an http.Handler:
//
//	srv, err := discoverytest.NewServer(discoverytest.WithCRDs(200, 20))
//	ts := httptest.NewServer(srv)
//
// Mutations through the Server apply to every backend; use Backends to change
// one. All methods are safe for concurrent use with requests.
//
// Besides discovery, every backend serves LIST, GET and WATCH of
// CustomResourceDefinitions (apiextensions.k8s.io/v1) and APIServices
// (apiregistration.k8s.io/v1): one set of objects for the cluster, derived
// from the first backend's content after each change, with a watch
// history to resume from (see DropWatches, CompactWatchHistory); and LIST
// and GET of the API server identity leases (coordination.k8s.io/v1 in
// kube-system), one per backend (see Backend.LeaseName).
type Server struct {
	opts     options // as built, for Server.clone
	token    string
	backends []*Backend
	routing  Routing
	next     atomic.Uint64
	faults   faults
	log      requestLog
	handler  http.Handler

	objects        *objectStore
	leases         *leaseStore
	discoveryDelay time.Duration
	applying       sync.Mutex                       // serializes delayed changes (see applyDue)
	aggregated     atomic.Pointer[[]*aggregatedAPI] // WithAggregatedAPI; set by NewServer
}

// NewServer builds a server. With no options it serves the discovery of a
// real v1.36.3 cluster with no CRDs, and aggregated discovery v2.
func NewServer(opts ...Option) (*Server, error) {
	o := options{builtins: true, backends: 1, bookmarks: 5 * time.Second}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.peer && o.generation != GenerationV2 {
		return nil, errors.New("discoverytest: peer-aggregated discovery needs GenerationV2")
	}
	if o.versions != nil && len(o.versions) != o.backends {
		return nil, fmt.Errorf("discoverytest: WithBackendVersions gives %d versions for %d backends", len(o.versions), o.backends)
	}
	base, err := loadFixtureContent(o.builtins)
	if err != nil {
		return nil, err
	}
	for _, crd := range SyntheticCRDs(o.crds, o.crdGroups) {
		if err := base.addCRD(crd); err != nil {
			return nil, err
		}
	}
	if len(o.aggregated) > 0 && o.specs != nil {
		return nil, errors.New("discoverytest: WithAggregatedAPI cannot be used in a Fleet")
	}
	s, err := newServer(o, func(int) *content { return base.clone() })
	if err != nil || len(o.aggregated) == 0 {
		return s, err
	}
	if err := startAggregatedAPIs(s); err != nil {
		return nil, err
	}
	return s, nil
}

// newServer builds a server whose i-th backend starts from contentOf(i),
// which it then owns. NewServer and a fleet's copy-on-write (Server.clone)
// share it.
func newServer(o options, contentOf func(i int) *content) (*Server, error) {
	s := &Server{
		opts:           o,
		routing:        o.routing,
		token:          o.token,
		objects:        newObjectStore(o.bookmarks, o.watchForbidden),
		discoveryDelay: o.discoveryDelay,
	}
	s.leases = newLeaseStore(s.objects, s.invalidatePeers)
	for i := range o.backends {
		id := fmt.Sprintf("apiserver-%d", i)
		var peers aggregated.PeerDiscoveryProvider
		if o.peer {
			peers = peerView{server: s, self: id}
		}
		var gitVersion string
		if o.versions != nil {
			gitVersion = o.versions[i]
		}
		b, err := newBackend(id, o.generation, gitVersion, contentOf(i), peers, o.specs, o.logger)
		if err != nil {
			return nil, err
		}
		b.leases = s.leases
		s.leases.add(b)
		first := i == 0
		b.changed = func() {
			s.invalidatePeers()
			if first {
				s.syncObjects()
			}
		}
		s.backends = append(s.backends, b)
	}
	// The objects that exist at start are not in the watch history, as a
	// real server's watch cache starts from a list.
	s.syncObjects()
	s.objects.mu.Lock()
	s.objects.compactLocked()
	s.objects.mu.Unlock()
	s.handler = s.log.wrap(s.chain(s.route))
	return s, nil
}

// chain puts what every request goes through after the log, whichever URL
// it came to, in front of h: faults, Cache-Control and authentication.
func (s *Server) chain(h http.HandlerFunc) http.Handler {
	return s.faults.wrap(filters.WithCacheControl(s.authenticate(h)))
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// backendHandler serves b alone, as the listener of b's own URL does. The
// log names b even for a request refused before it reaches b.
func (s *Server) backendHandler(b *Backend) http.Handler {
	next := s.chain(func(w http.ResponseWriter, r *http.Request) { s.serve(b, w, r) })
	return s.log.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(backendHeader, b.id)
		next.ServeHTTP(w, r)
	}))
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	var b *Backend
	switch {
	case len(s.backends) == 1:
		b = s.backends[0]
	case s.routing == Sticky:
		h := fnv.New32a()
		_, _ = h.Write([]byte(r.RemoteAddr))
		b = s.backends[h.Sum32()%uint32(len(s.backends))]
	default:
		b = s.backends[(s.next.Add(1)-1)%uint64(len(s.backends))]
	}
	s.serve(b, w, r)
}

// serve answers a request with backend b: its own discovery, OpenAPI and
// /version, and the cluster's objects and leases, which every backend
// serves alike.
func (s *Server) serve(b *Backend, w http.ResponseWriter, r *http.Request) {
	w.Header().Set(backendHeader, b.id)
	if a := s.aggregatedFor(r.URL.Path); a != nil {
		a.ServeHTTP(w, r)
		return
	}
	if _, _, ok := objectRoute(r.URL.Path); ok {
		s.objects.ServeHTTP(w, r)
		return
	}
	if _, _, ok := leaseRoute(r.URL.Path); ok {
		s.leases.ServeHTTP(w, r)
		return
	}
	b.ServeHTTP(w, r)
}

// Backends returns the API servers behind the URL, in a fixed order.
func (s *Server) Backends() []*Backend { return append([]*Backend(nil), s.backends...) }

func (s *Server) each(fn func(b *Backend) error) error {
	var errs []error
	for _, b := range s.backends {
		if err := fn(b); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.id, err))
		}
	}
	return errors.Join(errs...)
}

// AddCRD calls Backend.AddCRD on every backend. Adding a CRD again with
// other fields updates its object (a MODIFIED event, a new generation).
// WithDiscoveryDelay delays the discovery change (not the watch events).
func (s *Server) AddCRD(crd CRD) error {
	crd = crd.clone()
	each := func(b *Backend) error { return b.AddCRD(crd) }
	if s.discoveryDelay > 0 {
		return s.later(func(c *content) error { return c.addCRD(crd) }, each)
	}
	return s.each(each)
}

// RemoveCRD calls Backend.RemoveCRD on every backend. WithDiscoveryDelay
// delays the discovery change (not the watch events).
func (s *Server) RemoveCRD(group, plural string) error {
	each := func(b *Backend) error { return b.RemoveCRD(group, plural) }
	if s.discoveryDelay > 0 {
		return s.later(func(c *content) error { return c.removeCRD(group, plural) }, each)
	}
	return s.each(each)
}

// SetGroupVersion calls Backend.SetGroupVersion on every backend.
func (s *Server) SetGroupVersion(group string, v apidiscoveryv2.APIVersionDiscovery) error {
	return s.each(func(b *Backend) error { return b.SetGroupVersion(group, v) })
}

// RemoveGroupVersion calls Backend.RemoveGroupVersion on every backend.
func (s *Server) RemoveGroupVersion(gv schema.GroupVersion) error {
	return s.each(func(b *Backend) error { return b.RemoveGroupVersion(gv) })
}

// RemoveGroup calls Backend.RemoveGroup on every backend.
func (s *Server) RemoveGroup(group string) error {
	return s.each(func(b *Backend) error { return b.RemoveGroup(group) })
}

// SetStale calls Backend.SetStale on every backend.
func (s *Server) SetStale(gv schema.GroupVersion, stale bool) error {
	return s.each(func(b *Backend) error { return b.SetStale(gv, stale) })
}

// ChangeSchema calls Backend.ChangeSchema on every backend.
func (s *Server) ChangeSchema(gv schema.GroupVersion) error {
	return s.each(func(b *Backend) error { return b.ChangeSchema(gv) })
}

// InjectFault makes requests to path misbehave as f says. A path ending in
// "*" matches every path with that prefix; the first matching fault wins.
func (s *Server) InjectFault(path string, f Fault) { s.faults.add(path, f) }

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() { s.faults.clear() }

// Requests returns every request answered since the server started or the
// log was last reset, oldest first. A request is logged before any of its
// response is sent, so a client that has a response finds it logged; a
// watch is logged as its status line is sent, while it is still open.
func (s *Server) Requests() []Request { return s.log.snapshot() }

// ResetRequests empties the request log.
func (s *Server) ResetRequests() { s.log.reset() }

// Stats sums the request log.
func (s *Server) Stats() Stats {
	var st Stats
	for _, r := range s.log.snapshot() {
		st.Requests++
		st.Bytes += r.Bytes
		if r.Status == http.StatusNotModified {
			st.NotModified++
		}
		if r.Status >= 400 || r.Aborted {
			st.Errors++
		}
		if r.Watch {
			st.Watches++
		}
	}
	return st
}

func (s *Server) invalidatePeers() {
	for _, b := range s.backends {
		if b.peer != nil {
			b.peer.InvalidateCache()
		}
	}
}

// peerView gives one backend the local discovery of every other backend
// that has an identity lease, keyed by its lease name (its API server ID),
// as the peer proxy of a real API server finds its peers and fetches it.
type peerView struct {
	server *Server
	self   string
}

func (v peerView) GetPeerResources() map[string][]apidiscoveryv2.APIGroupDiscovery {
	out := map[string][]apidiscoveryv2.APIGroupDiscovery{}
	for _, b := range v.server.backends {
		if b.id == v.self || !v.server.leases.exists(b) {
			continue
		}
		groups, err := b.localDiscovery()
		if err != nil {
			continue // an unreachable peer contributes nothing, as in a real cluster
		}
		out[b.LeaseName()] = groups
	}
	return out
}
