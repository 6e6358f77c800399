package discoverytest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AggregatedAPI is an API group served beside the fake, as the
// kube-aggregator serves the group of an aggregated API server's
// APIServices: what the function given to WithAggregatedAPI starts.
type AggregatedAPI struct {
	// Group is the group's aggregated discovery, as the aggregator reads
	// it from the server: its name (a group the fake does not serve), its
	// versions in preference order and their resources. The fake lists it
	// in aggregated and legacy discovery and as an APIService per version,
	// Current (Stale while unavailable: see SetAggregatedAPIUnavailable).
	Group apidiscoveryv2.APIGroupDiscovery
	// Handler serves every request under /apis/<group>, after the fake's
	// log, faults and authentication, as the aggregator proxies it. A
	// request's context ends when the API becomes unavailable or the
	// Server closes, as a proxied connection ends when the backend goes
	// away.
	Handler http.Handler
	// Close, if not nil, stops what the start function started and waits
	// for it. Server.Close calls it once, after every call of Handler has
	// returned.
	Close func()
}

// WithAggregatedAPI serves, beside the fake, the API group that start
// starts, as a cluster serves an aggregated API server's group through the
// kube-aggregator: for example kubeatlas's own discovery API
// (github.com/kubeatlas/kubeatlas/apiserver/servedtest), or a small
// handler of a test's.
//
// NewServer calls start once for each Server it builds, with a client that
// reaches this Server over in-memory connections at base (InProcessURL),
// as the aggregated server's service account: its requests are not in the
// request log, no fault touches them, and WithWatchForbidden and
// SetWatchForbidden do not refuse them, so a test can forbid CRDs and
// APIServices to its client alone. If start returns an error, NewServer
// returns it; start cleans up after itself.
//
// The API runs until Server.Close (Start and StartInProcess call it; a
// Server built by NewServer with this option needs it). Give the option
// once per group; a Fleet refuses it. Default: none.
func WithAggregatedAPI(start func(fake *http.Client, base string) (*AggregatedAPI, error)) Option {
	return func(o *options) error {
		if start == nil {
			return errors.New("discoverytest: WithAggregatedAPI needs a start function")
		}
		o.aggregated = append(o.aggregated, start)
		return nil
	}
}

// aggregatedKey marks a request of an aggregated API's own client (see
// fromAggregatedAPI).
type aggregatedKey struct{}

// fromAggregatedAPI tells whether a request is an aggregated API's own,
// which may list and watch CRDs and APIServices whatever the fake refuses
// its clients.
func fromAggregatedAPI(ctx context.Context) bool {
	v, _ := ctx.Value(aggregatedKey{}).(bool)
	return v
}

// aggregatedAPI is one API of a Server built WithAggregatedAPI, as the
// kube-aggregator's proxy to it.
type aggregatedAPI struct {
	api      *AggregatedAPI
	prefix   string // "/apis/<group>"
	versions []string

	// The fake, as the API's own client reaches it.
	fakeServer    *http.Server
	fakeTransport *http.Transport
	fakeServed    chan struct{} // closed when fakeServer's Serve returns

	mu sync.Mutex
	// available is canceled when the API becomes unavailable or stops:
	// the requests it is serving (watches) end; nil while unavailable.
	available    context.Context
	endAvailable context.CancelFunc
	stopped      bool
	inFlight     sync.WaitGroup // calls of api.Handler; Add only while !stopped

	stopOnce      sync.Once
	unavailableMu sync.Mutex // serializes SetAggregatedAPIUnavailable
}

// startAggregatedAPIs starts the APIs of s's options, lists them in s's
// discovery and routes their paths to them; on error, it stops those it
// started.
func startAggregatedAPIs(s *Server) error {
	served := map[string]bool{}
	for _, gv := range s.backends[0].GroupVersions() {
		served[gv.Group] = true
	}
	var apis []*aggregatedAPI
	fail := func(err error) error {
		for _, a := range apis {
			a.stop()
		}
		return fmt.Errorf("discoverytest: an aggregated API: %w", err)
	}
	for _, start := range s.opts.aggregated {
		a, err := startAggregatedAPI(s, start)
		if err != nil {
			return fail(err)
		}
		apis = append(apis, a)
		name := a.api.Group.Name
		switch {
		case name == "" || strings.Contains(name, "/"):
			return fail(fmt.Errorf("group name %q", name))
		case len(a.api.Group.Versions) == 0:
			return fail(fmt.Errorf("group %s has no versions", name))
		case a.api.Handler == nil:
			return fail(fmt.Errorf("group %s has no handler", name))
		case served[name]:
			return fail(fmt.Errorf("group %s is served twice", name))
		}
		served[name] = true
		a.prefix = "/apis/" + name
	}
	for _, a := range apis {
		for _, v := range a.api.Group.Versions {
			v.Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent
			if err := s.SetGroupVersion(a.api.Group.Name, v); err != nil {
				return fail(err)
			}
			a.versions = append(a.versions, v.Version)
		}
	}
	// Published after the APIs started: their own requests may already be
	// routed by s, and never under these prefixes.
	s.aggregated.Store(&apis)
	return nil
}

// startAggregatedAPI serves s over in-memory connections to a new client
// and gives it to start.
func startAggregatedAPI(s *Server, start func(*http.Client, string) (*AggregatedAPI, error)) (*aggregatedAPI, error) {
	// The API's client skips the log, faults and authentication: it is
	// the aggregated server's service account, not a client under test.
	l := newPipeListener()
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.route(w, r.WithContext(context.WithValue(r.Context(), aggregatedKey{}, true)))
	})}
	a := &aggregatedAPI{fakeServer: hs, fakeTransport: &http.Transport{DialContext: l.dial}, fakeServed: make(chan struct{})}
	go func() {
		defer close(a.fakeServed)
		_ = hs.Serve(l) // http.ErrServerClosed once stop closes hs
	}()
	api, err := start(&http.Client{Transport: a.fakeTransport}, InProcessURL)
	if err == nil && api == nil {
		err = errors.New("the start function returned nothing")
	}
	if err != nil {
		a.closeFake()
		return nil, err
	}
	a.api = api
	a.available, a.endAvailable = context.WithCancel(context.Background())
	return a, nil
}

// aggregatedFor returns the aggregated API that serves path, or nil.
func (s *Server) aggregatedFor(path string) *aggregatedAPI {
	apis := s.aggregated.Load()
	if apis == nil {
		return nil
	}
	for _, a := range *apis {
		if path == a.prefix || strings.HasPrefix(path, a.prefix+"/") {
			return a
		}
	}
	return nil
}

// ServeHTTP answers as the kube-aggregator does for the API's
// APIServices: proxied to its handler, or a 503 (the aggregator's
// plain-text "service unavailable") while it is unavailable or stopped.
func (a *aggregatedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	available := a.available
	if a.stopped || available == nil {
		a.mu.Unlock()
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	a.inFlight.Add(1)
	a.mu.Unlock()
	defer a.inFlight.Done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(available, cancel)
	defer stop()
	a.api.Handler.ServeHTTP(newStreamingWriter(w, ctx), r.WithContext(ctx))
}

// streamingWriter is a writer a handler can stream a watch through, as
// through net/http's own: k8s.io/apiserver's filters keep a writer's Flush
// only if it can also CloseNotify (responsewriter.WrapForHTTP1Or2), which
// this fake's log writer cannot.
type streamingWriter struct {
	http.ResponseWriter
	closed chan bool
}

func newStreamingWriter(w http.ResponseWriter, ctx context.Context) streamingWriter {
	closed := make(chan bool, 1)
	context.AfterFunc(ctx, func() { closed <- true })
	return streamingWriter{ResponseWriter: w, closed: closed}
}

func (w streamingWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// CloseNotify tells when the request ends (its context is done).
func (w streamingWriter) CloseNotify() <-chan bool { return w.closed }

// Unwrap lets http.ResponseController reach the connection's writer.
func (w streamingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setAvailable makes the API reachable or not.
func (a *aggregatedAPI) setAvailable(available bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped || (a.available != nil) == available {
		return
	}
	if available {
		a.available, a.endAvailable = context.WithCancel(context.Background())
	} else {
		a.endAvailable()
		a.available, a.endAvailable = nil, nil
	}
}

// stop refuses new requests, ends the open ones, waits for them, then
// closes the API and its client's way in.
func (a *aggregatedAPI) stop() {
	a.stopOnce.Do(func() {
		a.mu.Lock()
		a.stopped = true
		if a.endAvailable != nil {
			a.endAvailable()
		}
		a.mu.Unlock()
		a.inFlight.Wait()
		if a.api.Close != nil {
			a.api.Close()
		}
		a.closeFake()
	})
}

func (a *aggregatedAPI) closeFake() {
	_ = a.fakeServer.Close()
	<-a.fakeServed
	a.fakeTransport.CloseIdleConnections()
}

// SetAggregatedAPIUnavailable makes the aggregated API of group
// (WithAggregatedAPI) unavailable (true) or available again (false), as
// when its server is down: requests to it get the kube-aggregator's 503,
// the open ones (watches) end, and its group-versions are Stale in
// discovery (and their APIServices Available False). It returns an error
// if no aggregated API serves group.
func (s *Server) SetAggregatedAPIUnavailable(group string, unavailable bool) error {
	a := s.aggregatedFor("/apis/" + group)
	if a == nil || a.api.Group.Name != group {
		return fmt.Errorf("discoverytest: no aggregated API serves group %q", group)
	}
	a.unavailableMu.Lock()
	defer a.unavailableMu.Unlock()
	// Unreachable first, then Stale, as a cluster sees it: the backend
	// goes away before the aggregator's availability check notices.
	if unavailable {
		a.setAvailable(false)
	}
	var errs []error
	for _, v := range a.versions {
		errs = append(errs, s.SetStale(schema.GroupVersion{Group: group, Version: v}, unavailable))
	}
	if !unavailable {
		a.setAvailable(true)
	}
	return errors.Join(errs...)
}

// Close stops what the server runs on its own, its aggregated APIs
// (WithAggregatedAPI), in the order they were given, waiting for each, and
// ends every open watch (StopWatches). Start and StartInProcess call it; a
// Server built by NewServer with WithAggregatedAPI needs it. Close is
// idempotent.
func (s *Server) Close() {
	if apis := s.aggregated.Load(); apis != nil {
		for _, a := range *apis {
			a.stop()
		}
	}
	s.StopWatches()
}
