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
// It lives in its own module (github.com/kubeatlas/kubeatlas/integrations),
// so that programs that import only kubeatlas's discovery do not inherit
// controller-runtime.
//
// # Files
//
// controllerruntime.go: [Provider], [New] and its options; kind.go: [Kind],
// a source for a kind that may not be served yet.
package controllerruntime

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Option configures a Provider.
type Option func(*Provider)

// WithDiscoveryOptions passes options to each discovery client (a disk
// cache for warm starts, say). Default: none.
func WithDiscoveryOptions(o ...discovery.Option) Option {
	return func(p *Provider) { p.discoveryOpts = append(p.discoveryOpts, o...) }
}

// WithMapperOptions passes options to each mapper. Default: none.
func WithMapperOptions(o ...restmapper.Option) Option {
	return func(p *Provider) { p.mapperOpts = append(p.mapperOpts, o...) }
}

// WithWatchOptions passes options to watch.Run. Default: none.
func WithWatchOptions(o ...watch.Option) Option {
	return func(p *Provider) { p.watchOpts = append(p.watchOpts, o...) }
}

// Provider makes kubeatlas mappers for controller-runtime (MapperProvider)
// and, as a manager.Runnable, keeps their discovery current with
// discovery/watch while the manager runs. Without being added to the
// manager, a mapper still finds a new kind on its own: a lookup that finds
// nothing refreshes discovery (restmapper's miss policy: at once for a
// question's first miss, then backing off to once a second).
type Provider struct {
	discoveryOpts []discovery.Option
	mapperOpts    []restmapper.Option
	watchOpts     []watch.Option

	mu       sync.Mutex
	byMapper map[meta.RESTMapper]*discovery.Client // each mapper made, and the client it reads
	started  context.Context                       // set by Start: clients made later are watched at once
}

// clientFor is the discovery client behind a mapper p made, or nil.
func (p *Provider) clientFor(m meta.RESTMapper) *discovery.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byMapper[m]
}

var (
	_ manager.Runnable               = (*Provider)(nil)
	_ manager.LeaderElectionRunnable = (*Provider)(nil)
)

// New returns a Provider.
func New(opts ...Option) *Provider {
	p := &Provider{}
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
	if hc == nil {
		dc, err = discovery.New(cfg, p.discoveryOpts...)
	} else {
		dc, err = discovery.NewForConfigAndClient(cfg, hc, p.discoveryOpts...)
	}
	if err != nil {
		return nil, err
	}
	m, err := restmapper.New(dc, p.mapperOpts...)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.byMapper == nil {
		p.byMapper = map[meta.RESTMapper]*discovery.Client{}
	}
	p.byMapper[m] = dc
	ctx := p.started
	p.mu.Unlock()
	if ctx != nil {
		go func() { _ = watch.Run(ctx, dc, p.watchOpts...) }()
	}
	return m, nil
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
		wg.Go(func() { errs <- watch.Run(ctx, c, p.watchOpts...) })
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
