// Package controllerruntime puts kubeatlas behind controller-runtime: a
// manager's (or cluster's) REST mapper becomes a kubeatlas
// restmapper.Mapper over kubeatlas discovery, which follows the cluster's
// CRDs and APIServices as they change (discovery/watch), so a
// controller needs no restart when a CRD it uses is installed or gains a
// version.
//
//	p := controllerruntime.New()
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{MapperProvider: p.MapperProvider})
//	err = mgr.Add(p) // watches discovery for as long as the manager runs
//
// # A client per reconcile
//
// Code that builds clients over and over (a client per reconcile, per
// tenant; clusters and managers built many times in one process) takes
// the process's shared discovery, mapper and HTTP client for a config
// (package shared) with one line, through options controller-runtime
// already has:
//
//	c, err := client.New(cfg, controllerruntime.ClientOptions(cfg, client.Options{}))
//	cl, err := cluster.New(cfg, controllerruntime.ClusterOption(cfg))
//	mgr, err := ctrl.NewManager(cfg, controllerruntime.ManagerOptions(cfg, ctrl.Options{}))
//
// The first client of a server and identity reads discovery; the others
// read nothing (another identity: two 304s). A client dropped without
// ceremony gives its reference back when the garbage collector finds it.
//
// # Metrics and logs
//
// kubeatlas's requests are counted in the manager's rest_client_requests_total
// beside client-go's (kubeatlas reports them to client-go's metrics
// adapters, which controller-runtime registers). Its own metrics
// (kubeatlas_discovery_*, kubeatlas_restmapper_*: refreshes and their
// outcome, 304s, bytes, snapshot generation and age, watch events, mapper
// hits and misses; see integrations/prometheus) are registered with
// controller-runtime's registry (metrics.Registry, which the manager
// serves), labelled client=<server host>, unless WithoutMetrics. Discovery
// and discovery/watch log through controller-runtime's logger (log.Log,
// which ctrl.SetLogger sets and the manager's logger derives from), named
// "kubeatlas", unless WithLogger.
//
// It lives in its own module (github.com/kubeatlas/kubeatlas/integrations),
// so that programs that import only kubeatlas's discovery do not inherit
// controller-runtime.
//
// # Files
//
// controllerruntime.go: [Provider], [New] and its options; kind.go: [Kind],
// a source for a kind that may not be served yet; shared.go:
// [ClientOptions], [ClusterOption], [ManagerOptions] and [Sharing], over
// package shared.
package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	prom "github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	kprom "github.com/kubeatlas/kubeatlas/integrations/prometheus"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Option configures a Provider.
type Option func(*Provider)

// WithDiscoveryOptions passes options to each discovery client (a disk
// cache for warm starts, say), with the provider's discovery.WithLogger,
// which they may not give again (the provider's WithLogger sets it).
// Default: none.
func WithDiscoveryOptions(o ...discovery.Option) Option {
	return func(p *Provider) { p.discoveryOpts = append(p.discoveryOpts, o...) }
}

// WithMapperOptions passes options to each mapper. Default: none.
func WithMapperOptions(o ...restmapper.Option) Option {
	return func(p *Provider) { p.mapperOpts = append(p.mapperOpts, o...) }
}

// WithWatchOptions passes options to each mapper's watch.Watcher, with
// the provider's watch.WithLogger, which they may not give again.
// Default: none.
func WithWatchOptions(o ...watch.Option) Option {
	return func(p *Provider) { p.watchOpts = append(p.watchOpts, o...) }
}

// WithLogger sets where discovery and discovery/watch log (through
// logr.ToSlogHandler); a discovery.WithLogger in WithDiscoveryOptions
// overrides it. Default: controller-runtime's log.Log named "kubeatlas".
func WithLogger(l logr.Logger) Option { return func(p *Provider) { p.logger = l } }

// WithoutMetrics keeps kubeatlas's own metrics out of controller-runtime's
// registry. (Its requests are still counted in rest_client_requests_total,
// as client-go's are.) Default: registered.
func WithoutMetrics() Option { return func(p *Provider) { p.noMetrics = true } }

// Provider makes kubeatlas mappers for controller-runtime (MapperProvider)
// and, as a manager.Runnable, keeps their discovery current with
// discovery/watch while the manager runs. Without being added to the
// manager, a mapper still finds a new kind on its own: a lookup that finds
// nothing refreshes discovery (restmapper's miss policy: at once for a
// question's first miss, then backing off to once a second), and one
// without a version (kstatus's RESTMapping(gk)) is answered from discovery
// validated within a second, so it follows versions added to and removed
// from a group (controller-runtime#3542). While the manager runs it and
// its watch is established, lookups without a version cost the server
// nothing: the watch keeps discovery current (discovery.Client.Following),
// and the one-second rule applies again only while it cannot (its
// connection lost, backing off, the manager stopped).
type Provider struct {
	discoveryOpts []discovery.Option
	mapperOpts    []restmapper.Option
	watchOpts     []watch.Option
	logger        logr.Logger
	noMetrics     bool

	mu        sync.Mutex
	collector *kprom.Collector            // nil until the first mapper, or WithoutMetrics
	refused   bool                        // the registry refused the collector (logged once)
	byMapper  map[meta.RESTMapper]watched // each mapper made, and the client it reads
	started   context.Context             // set by Start: clients made later are watched at once
}

// watched is the discovery client a mapper reads and its Watcher.
type watched struct {
	dc *discovery.Client
	w  *watch.Watcher
}

// clientFor is the discovery client behind a mapper p made, or nil.
func (p *Provider) clientFor(m meta.RESTMapper) *discovery.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byMapper[m].dc
}

var (
	_ manager.Runnable               = (*Provider)(nil)
	_ manager.LeaderElectionRunnable = (*Provider)(nil)
)

// New returns a Provider.
func New(opts ...Option) *Provider {
	p := &Provider{logger: log.Log.WithName("kubeatlas")}
	for _, o := range opts {
		o(p)
	}
	return p
}

// MapperProvider has the signature of manager.Options.MapperProvider and
// cluster.Options.MapperProvider. Requests go through hc, controller-
// runtime's client for cfg (auth, TLS, proxies), when it gives one.
func (p *Provider) MapperProvider(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	var dc *discovery.Client
	var err error
	// The logger first, so that the caller's discovery options may
	// override it.
	logger := slog.New(logr.ToSlogHandler(p.logger))
	dopts := append([]discovery.Option{discovery.WithLogger(logger)}, p.discoveryOpts...)
	if hc == nil {
		dc, err = discovery.New(cfg, dopts...)
	} else {
		dc, err = discovery.NewForConfigAndClient(cfg, hc, dopts...)
	}
	if err != nil {
		return nil, err
	}
	m, err := restmapper.New(dc, p.mapperOpts...)
	if err != nil {
		return nil, err
	}
	w, err := watch.New(dc, append([]watch.Option{watch.WithLogger(logger)}, p.watchOpts...)...)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.byMapper == nil {
		p.byMapper = map[meta.RESTMapper]watched{}
	}
	p.byMapper[m] = watched{dc, w}
	ctx := p.started
	p.mu.Unlock()
	if !p.noMetrics {
		p.expose(cfg, watched{dc, w}, m)
	}
	if ctx != nil {
		go func() { _ = w.Run(ctx) }()
	}
	return m, nil
}

// expose adds dc and m to the collector of kubeatlas's metrics in
// controller-runtime's registry, named after the server's host (with #2,
// #3... for more mappers of one server). The collector is registered with
// the first mapper; one that another Provider registered is shared, since
// the registry takes one collector of the same metrics. Metrics are not
// worth failing a manager for: a registry that refuses is logged.
func (p *Provider) expose(cfg *rest.Config, w watched, m *restmapper.Mapper) {
	col, err := p.sharedCollector()
	if err != nil {
		p.logger.Error(err, "kubeatlas metrics not registered")
		return
	}
	if col == nil {
		return
	}
	name := cfg.Host
	if base, _, err := rest.DefaultServerUrlFor(cfg); err == nil {
		name = base.Host + base.Path
	}
	src := kprom.Source{Discovery: w.dc, Watch: w.w, Mapper: m}
	for i, n := 1, name; ; i, n = i+1, fmt.Sprintf("%s#%d", name, i+1) {
		if col.Add(n, src) == nil {
			return
		}
	}
}

// sharedCollector is p's collector, registered on first use; nil (and an
// error the first time) when the registry refused it. The registry is
// called holding no lock: it is not ours (a program may replace
// crmetrics.Registry), and Start and MapperProvider wait for p.mu. Calls
// that race each register; the registry keeps one collector, which the
// others get back as the one already registered.
func (p *Provider) sharedCollector() (*kprom.Collector, error) {
	p.mu.Lock()
	col, refused := p.collector, p.refused
	p.mu.Unlock()
	if col != nil || refused {
		return col, nil
	}
	col = kprom.NewCollector()
	err := crmetrics.Registry.Register(col)
	if err != nil {
		var already prom.AlreadyRegisteredError
		if errors.As(err, &already) {
			col, _ = already.ExistingCollector.(*kprom.Collector)
		} else {
			col = nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.collector != nil || p.refused:
		return p.collector, nil // another call got there first (and said so)
	case col == nil:
		p.refused = true
		return nil, err
	}
	p.collector = col
	return col, nil
}

// Start watches the discovery of every mapper made, until ctx ends (the
// manager calls it). Where the credentials may not watch CRDs and
// APIServices, it polls instead (watch.WithFallbackPoll).
func (p *Provider) Start(ctx context.Context) error {
	p.mu.Lock()
	p.started = ctx
	clients := slices.Collect(maps.Values(p.byMapper))
	p.mu.Unlock()
	errs := make(chan error, len(clients))
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { errs <- c.w.Run(ctx) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// NeedLeaderElection is false: every replica needs a current mapper,
// leader or not.
func (p *Provider) NeedLeaderElection() bool { return false }
