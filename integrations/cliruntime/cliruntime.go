// Package cliruntime is a cli-runtime RESTClientGetter over kubeatlas, for
// kubectl plugins and kubectl-style commands (cmdutil.NewFactory,
// resource.NewBuilder) and Helm (action.Configuration.Init): kubectl's
// ConfigFlags, the same flags and kubeconfig handling, with kubeatlas's
// discovery (as client-go's CachedDiscoveryInterface, Invalidate and Fresh
// honoured), REST mapper and OpenAPI v3 behind them, and their persistent
// cache in the flags' cache directory.
//
//	flags := genericclioptions.NewConfigFlags(true)
//	flags.AddFlags(pflag.CommandLine)
//	getter := cliruntime.NewGetter(flags)
//	infos, err := resource.NewBuilder(getter).Unstructured().ResourceTypeOrNameArgs(true, "deploy,svc").Do().Infos()
//
// Getters built many times in one process share one discovery client,
// mapper and OpenAPI client per server and identity with [WithShared]
// (package shared): NewGetter(flags, WithShared(nil)).
//
// Discovery and the cache log nowhere unless [WithLogger] gives them the
// caller's logr.Logger (klog.Background() in a kubectl-style command).
//
// It lives in its own module (github.com/kubeatlas/kubeatlas/integrations),
// so that programs that import only kubeatlas's discovery do not inherit
// cli-runtime.
//
// # Files
//
// cliruntime.go: [Getter], [NewGetter] and its options.
package cliruntime

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/clientgo"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
	openapi3clientgo "github.com/kubeatlas/kubeatlas/openapi3/clientgo"
	"github.com/kubeatlas/kubeatlas/restmapper"
	"github.com/kubeatlas/kubeatlas/shared"
)

// Option configures a Getter.
type Option func(*Getter)

// WithWarningHandler receives short-name ambiguity warnings (ConfigFlags's
// warningPrinter is unexported, so it cannot be reused from the flags).
func WithWarningHandler(f func(string)) Option {
	return func(g *Getter) { g.mapperOpts = append(g.mapperOpts, restmapper.WithWarningHandler(f)) }
}

// WithDiscoveryOptions passes options to the discovery client. Default:
// none.
func WithDiscoveryOptions(o ...discovery.Option) Option {
	return func(g *Getter) { g.discoveryOpts = append(g.discoveryOpts, o...) }
}

// WithLogger sets where discovery (and discovery/watch over Client) and
// the disk cache log, through logr.ToSlogHandler; a discovery.WithLogger in
// WithDiscoveryOptions overrides it for discovery. Default: nowhere.
func WithLogger(l logr.Logger) Option {
	return func(g *Getter) { g.logger = slog.New(logr.ToSlogHandler(l)) }
}

// WithShared takes the discovery client, mapper and OpenAPI v3 client
// from r, a process-wide registry (nil: shared.Default()), instead of
// building them, so that getters built many times in one process (one
// per Helm action, per tenant, per request) share one per server and
// identity (see package shared): the getter holds its handle for as
// long as it is reachable, and reads no disk cache (the registry's
// clients are kept current in memory). The registry's options apply:
// WithDiscoveryOptions and WithWarningHandler with it are an error of
// the getter's first call. Default: the getter's own clients.
func WithShared(r *shared.Registry) Option {
	return func(g *Getter) {
		if r == nil {
			r = shared.Default()
		}
		g.registry = r
	}
}

// WithoutOpenAPIV3 keeps client-go's own OpenAPI v3 client (kubectl explain,
// client-side validation) behind ToDiscoveryClient instead of kubeatlas's
// openapi3. OpenAPIV3 still returns kubeatlas's.
func WithoutOpenAPIV3() Option { return func(g *Getter) { g.noOpenAPI = true } }

// Getter implements genericclioptions.RESTClientGetter (and so Helm's
// action.RESTClientGetter and cli-runtime's resource.RESTClientGetter).
// It holds one discovery client and one mapper, built on the first call
// (after the flags are parsed), whatever the ConfigFlags' persistence:
// kubectl's factory asks for them for every builder, and kubeatlas's
// revalidate cheaply (two 304s) instead of being rebuilt.
//
// Its cache is a kubeatlas directory in the flags' cache directory
// (--cache-dir, else $KUBECACHEDIR, else ~/.kube/cache), beside kubectl's
// own discovery and http directories, whose formats differ; a cache that
// cannot be opened is not an error, as it is not for kubectl.
type Getter struct {
	flags         *genericclioptions.ConfigFlags
	discoveryOpts []discovery.Option
	mapperOpts    []restmapper.Option
	noOpenAPI     bool
	logger        *slog.Logger // nil: the packages' default (nowhere)
	registry      *shared.Registry

	once   sync.Once
	handle *shared.Handle // with WithShared
	client *discovery.Client
	oc     *openapi3.Client
	disc   *clientgo.Discovery
	mapper *restmapper.Mapper
	err    error
}

var _ genericclioptions.RESTClientGetter = (*Getter)(nil)

// NewGetter returns a Getter over flags, which it reads on first use.
func NewGetter(flags *genericclioptions.ConfigFlags, opts ...Option) *Getter {
	g := &Getter{flags: flags}
	for _, o := range opts {
		o(g)
	}
	return g
}

// ToRESTConfig is the flags' rest.Config.
func (g *Getter) ToRESTConfig() (*rest.Config, error) { return g.flags.ToRESTConfig() }

// ToRawKubeConfigLoader is the flags' kubeconfig loader.
func (g *Getter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return g.flags.ToRawKubeConfigLoader()
}

// ToDiscoveryClient is kubeatlas's discovery as client-go's
// CachedDiscoveryInterface (discovery/clientgo), with kubeatlas's OpenAPI
// v3 unless WithoutOpenAPIV3.
func (g *Getter) ToDiscoveryClient() (cgdiscovery.CachedDiscoveryInterface, error) {
	g.init()
	if g.err != nil {
		return nil, g.err
	}
	return g.disc, nil
}

// ToRESTMapper is kubeatlas's REST mapper, which expands short names and
// categories as client-go's ShortcutExpander does (kubectl wraps
// ConfigFlags' mapper in one).
func (g *Getter) ToRESTMapper() (meta.RESTMapper, error) {
	g.init()
	if g.err != nil {
		return nil, g.err
	}
	return g.mapper, nil
}

// Client is the underlying kubeatlas client (for discovery/watch, Stats, Subscribe).
func (g *Getter) Client() (*discovery.Client, error) { g.init(); return g.client, g.err }

// OpenAPIV3 is kubeatlas's OpenAPI v3 client, on the getter's cache, for
// schema lookups client-go's interface does not offer (openapi3.Client.Kind,
// Schema.Field).
func (g *Getter) OpenAPIV3() (*openapi3.Client, error) { g.init(); return g.oc, g.err }

func (g *Getter) init() {
	g.once.Do(func() {
		cfg, err := g.flags.ToRESTConfig()
		if err != nil {
			g.err = err
			return
		}
		if g.registry != nil {
			g.err = g.initShared(cfg)
			return
		}
		// The same base URL discovery.New derives (scheme://host[/prefix]).
		base, _, err := rest.DefaultServerUrlFor(cfg)
		if err != nil {
			g.err = err
			return
		}
		var dopts []discovery.Option
		var copenOpts []diskcache.Option
		if g.logger != nil {
			// First, so that the caller's discovery options may override it.
			dopts = append(dopts, discovery.WithLogger(g.logger))
			copenOpts = append(copenOpts, diskcache.WithLogger(g.logger))
		}
		dopts = append(dopts, g.discoveryOpts...)
		var store *diskcache.Cache
		// Like kubectl, a cache that cannot be opened is not fatal.
		if c, err := diskcache.Open(cacheRoot(g.flags), base.String(), copenOpts...); err == nil {
			store = c
			dopts = append(dopts, discovery.WithDiskCache(c))
		}
		g.client, g.err = discovery.New(cfg, dopts...)
		if g.err != nil {
			return
		}
		var oopts []openapi3.Option
		if store != nil {
			oopts = append(oopts, openapi3.WithDiskCache(store))
		}
		if g.oc, g.err = openapi3.New(cfg, oopts...); g.err != nil {
			return
		}
		var copts []clientgo.Option
		if !g.noOpenAPI {
			copts = append(copts, clientgo.WithOpenAPIV3(openapi3clientgo.New(g.oc)))
		}
		if g.disc, g.err = clientgo.New(g.client, copts...); g.err != nil {
			return
		}
		g.mapper, g.err = restmapper.New(g.client, g.mapperOpts...)
	})
}

// initShared takes the clients of cfg's shared client.
func (g *Getter) initShared(cfg *rest.Config) error {
	if len(g.discoveryOpts) != 0 || len(g.mapperOpts) != 0 {
		return errors.New("cliruntime: WithDiscoveryOptions or WithWarningHandler with WithShared: give them to the registry (shared.WithDiscoveryOptions, shared.WithMapperOptions)")
	}
	h, err := g.registry.Acquire(cfg)
	if err != nil {
		return err
	}
	g.handle, g.client, g.oc, g.mapper = h, h.Discovery(), h.OpenAPI(), h.Mapper()
	var copts []clientgo.Option
	if !g.noOpenAPI {
		copts = append(copts, clientgo.WithOpenAPIV3(openapi3clientgo.New(g.oc)))
	}
	g.disc, err = clientgo.New(g.client, copts...)
	return err
}

// cacheRoot is the cache directory ConfigFlags picks (--cache-dir, else
// $KUBECACHEDIR, else ~/.kube/cache; its getDefaultCacheDir is unexported)
// with a kubeatlas directory of its own in it.
func cacheRoot(f *genericclioptions.ConfigFlags) string {
	dir := ""
	if f.CacheDir != nil {
		dir = *f.CacheDir
	}
	if dir == "" {
		if kcd := os.Getenv("KUBECACHEDIR"); kcd != "" {
			dir = kcd
		} else {
			dir = filepath.Join(homedir.HomeDir(), ".kube", "cache")
		}
	}
	return filepath.Join(dir, "kubeatlas")
}
