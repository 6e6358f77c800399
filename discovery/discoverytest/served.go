package discoverytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/apiserver"
	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/discovery"
)

// WithServedAPI makes the server serve kubeatlas's discovery API,
// discovery.kubeatlas.io/v1alpha1 (apigroups, apiservers,
// clusterconsistencies), as a cluster where kubeatlas-apiserver is
// deployed does, so that a client's use of it (discovery/watch.Run watches
// apigroups where it is served) can be tested.
//
// It is the apiserver module's server itself (apiserver.NewUnlistened),
// without a listener, fed by a discovery.Client on this fake: its
// apiserver.Feed watches CRDs and APIServices and keeps the objects
// current. The group is listed in aggregated and legacy discovery as the
// kube-aggregator lists it, from that server's own discovery (so also as an
// APIService, v1alpha1.discovery.kubeatlas.io), and requests under
// /apis/discovery.kubeatlas.io go to it after this fake's log, faults and
// authentication, as the aggregator proxies them. The feed's own requests
// reach the fake directly: they are not in the request log, no fault
// touches them, and WithWatchForbidden and SetWatchForbidden do not refuse
// them (deploy/ gives the server the RBAC to list and watch CRDs and
// APIServices), so a test can forbid those to its client alone.
// SetServedAPIUnavailable makes the served API unreachable.
//
// The served API runs until Close (Start and StartInProcess call it). It
// cannot be used in a Fleet. Default: not served.
func WithServedAPI() Option {
	return func(o *options) error { o.served = true; return nil }
}

// servedAPIPath is where the kube-aggregator would route requests to the
// served API's APIService.
var servedAPIPath = "/apis/" + v1alpha1.GroupName

func isServedAPIPath(path string) bool {
	return path == servedAPIPath || strings.HasPrefix(path, servedAPIPath+"/")
}

// servedAPIFeedKey marks a request of the served API's feed (see
// fromServedAPIFeed).
type servedAPIFeedKey struct{}

// fromServedAPIFeed tells whether a request is the served API's feed's,
// which may list and watch CRDs and APIServices whatever the fake refuses
// its clients.
func fromServedAPIFeed(ctx context.Context) bool {
	v, _ := ctx.Value(servedAPIFeedKey{}).(bool)
	return v
}

// servedAPI is the served discovery API of a Server built WithServedAPI.
type servedAPI struct {
	api      *apiserver.Server
	versions []string // served versions, as listed in discovery

	feedServer    *http.Server // the fake, as the feed reaches it
	feedTransport *http.Transport
	feedServed    chan struct{} // closed when feedServer's Serve returns

	cancel context.CancelFunc // ends api.Run
	done   chan struct{}      // closed when api.Run returns

	mu sync.Mutex
	// available is canceled when the API becomes unavailable or stops:
	// the requests it is serving (watches) end, as proxied connections do
	// when the aggregator's backend goes away; nil while unavailable.
	available     context.Context
	endAvailable  context.CancelFunc
	stopped       bool
	stopOnce      sync.Once
	unavailableMu sync.Mutex // serializes SetServedAPIUnavailable
}

// startServedAPI builds the served API over s, lists it in s's discovery,
// sets s.served and runs it.
func startServedAPI(s *Server) (*servedAPI, error) {
	// The feed reaches the fake over in-memory connections, through a
	// handler that marks its requests and skips the log, faults and
	// authentication: it is the served API's service account, not a
	// client under test.
	l := newPipeListener()
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.route(w, r.WithContext(context.WithValue(r.Context(), servedAPIFeedKey{}, true)))
	})}
	sa := &servedAPI{feedServer: hs, feedTransport: &http.Transport{DialContext: l.dial}, feedServed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sa.feedServed)
		_ = hs.Serve(l) // http.ErrServerClosed once stop closes hs
	}()
	fail := func(err error) (*servedAPI, error) {
		_ = hs.Close()
		<-sa.feedServed
		return nil, fmt.Errorf("discoverytest: the served API: %w", err)
	}
	// A discarding logger: the feed's warnings (a check that failed
	// while a test made the fake misbehave) are not the test's business.
	quiet := slog.New(slog.DiscardHandler)
	client, err := discovery.NewForHTTPClient(&http.Client{Transport: sa.feedTransport}, InProcessURL, discovery.WithLogger(quiet))
	if err != nil {
		return fail(err)
	}
	api, err := apiserver.NewUnlistened(&apiserver.Feed{Client: client, Stores: apiserver.NewStores(nil), Logger: quiet})
	if err != nil {
		return fail(err)
	}
	sa.api = api
	group, err := servedGroupDiscovery(api.Handler())
	if err != nil {
		return fail(err)
	}
	for _, v := range group.Versions {
		if err := s.SetGroupVersion(group.Name, v); err != nil {
			return fail(err)
		}
		sa.versions = append(sa.versions, v.Version)
	}
	sa.available, sa.endAvailable = context.WithCancel(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	sa.cancel = cancel
	s.served = sa // before the feed runs: its requests are routed by s
	go func() {
		defer close(sa.done)
		_ = api.Run(ctx)
	}()
	return sa, nil
}

// servedGroupDiscovery reads the served API's group from its own aggregated
// discovery, as the kube-aggregator does from an APIService's server.
func servedGroupDiscovery(h http.Handler) (*apidiscoveryv2.APIGroupDiscovery, error) {
	req := httptest.NewRequest(http.MethodGet, "/apis", nil)
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("its /apis answered %d: %s", rec.Code, rec.Body.String())
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		return nil, fmt.Errorf("its /apis: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Name == v1alpha1.GroupName {
			return &list.Items[i], nil
		}
	}
	return nil, errors.New("its /apis does not list " + v1alpha1.GroupName)
}

// ServeHTTP answers as the kube-aggregator does for the served API's
// APIService: proxied to its server, or a 503 (the aggregator's plain-text
// "service unavailable") while it is unavailable or stopped.
func (sa *servedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sa.mu.Lock()
	available := sa.available
	if sa.stopped {
		available = nil
	}
	sa.mu.Unlock()
	if available == nil || available.Err() != nil {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(available, cancel)
	defer stop()
	sa.api.Handler().ServeHTTP(newStreamingWriter(w, ctx), r.WithContext(ctx))
}

// streamingWriter is a writer k8s.io/apiserver streams a watch through:
// its filters keep a writer's Flush only if it can also CloseNotify
// (responsewriter.WrapForHTTP1Or2), as net/http's own writers do and this
// fake's log writer does not.
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

// setAvailable makes the API reachable or not; it reports whether that
// changed.
func (sa *servedAPI) setAvailable(available bool) bool {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if (sa.available != nil) == available {
		return false
	}
	if available {
		sa.available, sa.endAvailable = context.WithCancel(context.Background())
	} else {
		sa.endAvailable()
		sa.available, sa.endAvailable = nil, nil
	}
	return true
}

// stop ends the served API, its open requests, and its feed, and waits
// for them all.
func (sa *servedAPI) stop() {
	sa.stopOnce.Do(func() {
		sa.mu.Lock()
		sa.stopped = true
		if sa.endAvailable != nil {
			sa.endAvailable()
		}
		sa.mu.Unlock()
		sa.cancel()
		<-sa.done
		_ = sa.feedServer.Close()
		<-sa.feedServed
		sa.feedTransport.CloseIdleConnections()
	})
}

// SetServedAPIUnavailable makes the served API (WithServedAPI) unavailable
// (true) or available again (false), as when its server is down: requests
// to it get the kube-aggregator's 503, open watches of it end, and its
// group-versions are Stale in discovery (and its APIService Available
// False). It returns an error on a server built without WithServedAPI.
func (s *Server) SetServedAPIUnavailable(unavailable bool) error {
	sa := s.served
	if sa == nil {
		return errors.New("discoverytest: SetServedAPIUnavailable needs a server built WithServedAPI")
	}
	sa.unavailableMu.Lock()
	defer sa.unavailableMu.Unlock()
	// Unreachable first, then Stale, as a cluster sees it: the backend
	// goes away before the aggregator's availability check notices.
	if unavailable {
		sa.setAvailable(false)
	}
	var errs []error
	for _, v := range sa.versions {
		errs = append(errs, s.SetStale(schema.GroupVersion{Group: v1alpha1.GroupName, Version: v}, unavailable))
	}
	if !unavailable {
		sa.setAvailable(true)
	}
	return errors.Join(errs...)
}

// Close stops what the server runs on its own, the served API
// (WithServedAPI) and its feed, waiting for them, and ends every open watch
// (StopWatches). Start and StartInProcess call it; a Server built
// WithServedAPI by NewServer needs it. Close is idempotent.
func (s *Server) Close() {
	if s.served != nil {
		s.served.stop()
	}
	s.StopWatches()
}
