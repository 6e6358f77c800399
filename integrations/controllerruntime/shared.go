package controllerruntime

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeatlas/kubeatlas/restmapper"
	"github.com/kubeatlas/kubeatlas/shared"
)

// ClientOptions is o with the mapper and HTTP client of the process's
// shared client for cfg (package shared's Default registry), where o
// sets none: a client built per reconcile then costs no discovery
// request after the first.
//
//	c, err := client.New(cfg, controllerruntime.ClientOptions(cfg, client.Options{Scheme: scheme}))
//
// The client gives its reference back when the garbage collector finds
// it unreachable (it holds the HTTP client, which holds the reference).
// When cfg cannot be acquired (a bad host, an unreadable CA file), o is
// returned as it is and client.New reports what is wrong with cfg.
func ClientOptions(cfg *rest.Config, o client.Options) client.Options {
	return Sharing{}.ClientOptions(cfg, o)
}

// ClusterOption is the cluster.Option that gives a cluster (cluster.New)
// the process's shared mapper and HTTP client for cfg, the cluster's
// config:
//
//	cl, err := cluster.New(cfg, controllerruntime.ClusterOption(cfg))
func ClusterOption(cfg *rest.Config) cluster.Option { return Sharing{}.ClusterOption(cfg) }

// ManagerOptions is o with the process's shared mapper for cfg, the
// manager's config, where o sets no MapperProvider (manager.Options
// takes no HTTP client; the manager builds its own, through client-go's
// cache of transports):
//
//	mgr, err := ctrl.NewManager(cfg, controllerruntime.ManagerOptions(cfg, ctrl.Options{Scheme: scheme}))
func ManagerOptions(cfg *rest.Config, o manager.Options) manager.Options {
	return Sharing{}.ManagerOptions(cfg, o)
}

// Sharing hands a registry's shared clients to controller-runtime.
// Registry nil means shared.Default(); the package functions
// ClientOptions, ClusterOption and ManagerOptions are Sharing{}'s.
type Sharing struct{ Registry *shared.Registry }

func (s Sharing) acquire(cfg *rest.Config) *shared.Handle {
	r := s.Registry
	if r == nil {
		r = shared.Default()
	}
	h, err := r.Acquire(cfg)
	if err != nil {
		return nil
	}
	return h
}

// ClientOptions: see the package function.
func (s Sharing) ClientOptions(cfg *rest.Config, o client.Options) client.Options {
	if o.Mapper != nil || o.HTTPClient != nil {
		return o // the caller's own: sharing one without the other would mix two connections
	}
	if h := s.acquire(cfg); h != nil {
		o.Mapper, o.HTTPClient = heldMapper(h), h.HTTPClient()
	}
	return o
}

// ClusterOption: see the package function.
func (s Sharing) ClusterOption(cfg *rest.Config) cluster.Option {
	return func(o *cluster.Options) {
		if o.MapperProvider != nil || o.HTTPClient != nil {
			return
		}
		if h := s.acquire(cfg); h != nil {
			o.MapperProvider, o.HTTPClient = providerOf(h), h.HTTPClient()
		}
	}
}

// ManagerOptions: see the package function.
func (s Sharing) ManagerOptions(cfg *rest.Config, o manager.Options) manager.Options {
	if o.MapperProvider != nil {
		return o
	}
	if h := s.acquire(cfg); h != nil {
		o.MapperProvider = providerOf(h)
	}
	return o
}

// providerOf is a MapperProvider that answers with h's mapper whatever
// it is asked: the cluster and manager ask for their own config, the one
// h was acquired for.
func providerOf(h *shared.Handle) func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
	m := heldMapper(h)
	return func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return m, nil }
}

// held is the shared mapper with the handle it came from: whatever holds
// it holds the handle, so the garbage collector gives the reference back
// only with the last holder (a client, a cluster). It is a
// meta.ResettableRESTMapper, as the mapper it embeds.
type held struct {
	*restmapper.Mapper
	h *shared.Handle
}

var _ meta.ResettableRESTMapper = held{}

func heldMapper(h *shared.Handle) held { return held{Mapper: h.Mapper(), h: h} }
