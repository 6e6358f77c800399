package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	apirest "k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/compatibility"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/apiserver/openapi"
)

// NewScheme returns the scheme of the served API.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err) // registering types into a new scheme cannot fail
	}
	_ = s.SetVersionPriority(v1alpha1.SchemeGroupVersion)
	unversioned := schema.GroupVersion{Version: "v1"}
	metav1.AddToGroupVersion(s, unversioned)
	s.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	return s
}

// Options are the command's options: k8s.io/apiserver's recommended ones
// (secure serving, delegated authentication and authorization; no etcd, no
// admission: the API is read-only and kept in memory), and local mode.
type Options struct {
	Recommended *genericoptions.RecommendedOptions
	// Local serves on loopback without authentication or authorization,
	// for development: anyone who can reach the port reads the API.
	Local bool
	// LocalKubeconfig is where local mode writes a kubeconfig that reaches
	// the server (default: kubeconfig in the certificate directory).
	LocalKubeconfig string
	// CheckInterval is how often the consistency check runs.
	CheckInterval time.Duration
	// APIServers are addresses (host:port) the consistency check sends the
	// upstream credentials to when it asks an API server directly, beside
	// those the kubernetes EndpointSlices list (consistency.WithAPIServers).
	APIServers []string
}

// LocalPort is the port local mode serves on when --secure-port is left at
// its default (443, which only root may bind).
const LocalPort = 8443

// NewOptions returns the default options.
func NewOptions() *Options {
	r := genericoptions.NewRecommendedOptions("", nil)
	r.Etcd = nil
	r.Admission = nil
	r.SecureServing.BindPort = 443
	r.SecureServing.ServerCert.PairName = "kubeatlas-apiserver"
	// Not k8s.io/apiserver's default, apiserver.local.config/certificates
	// in the working directory (`go run` from a checkout wrote it into the
	// repository): --local without --cert-dir writes to a new temporary
	// directory (Config), and a server with neither --cert-dir nor
	// --tls-cert-file keeps its self-signed certificate in memory.
	r.SecureServing.ServerCert.CertDirectory = ""
	return &Options{Recommended: r, CheckInterval: DefaultCheckInterval}
}

// AddFlags adds the options' flags. --kubeconfig (the recommended options'
// core API kubeconfig) also names the upstream cluster; in-cluster
// configuration when it is empty.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Recommended.AddFlags(fs)
	fs.BoolVar(&o.Local, "local", o.Local, "serve on 127.0.0.1 (port 8443 unless --secure-port is set to another than 443) without authentication or authorization (development); writes a kubeconfig for kubectl (--local-kubeconfig)")
	fs.StringVar(&o.LocalKubeconfig, "local-kubeconfig", o.LocalKubeconfig, "where --local writes a kubeconfig that reaches this server (default: kubeconfig in --cert-dir)")
	fs.DurationVar(&o.CheckInterval, "consistency-check-interval", o.CheckInterval, "how often the API servers' consistency is checked (and a moment after each discovery change); negative turns it off")
	fs.StringSliceVar(&o.APIServers, "consistency-api-server", o.APIServers, "host:port of an API server the consistency check may send the upstream credentials to when it asks it directly, beside those the kubernetes EndpointSlices list (which cannot list loopback addresses); repeatable")
}

// Upstream returns the configuration of the upstream cluster: --kubeconfig,
// or the in-cluster configuration.
func (o *Options) Upstream() (*rest.Config, error) {
	path := ""
	if o.Recommended.CoreAPI != nil {
		path = o.Recommended.CoreAPI.CoreAPIKubeconfigPath
	}
	if path == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// Config builds the generic server's configuration for scheme (NewScheme)
// and its codecs.
func (o *Options) Config(scheme *runtime.Scheme, codecs serializer.CodecFactory) (*genericapiserver.RecommendedConfig, error) {
	r := o.Recommended
	if o.Local && r.SecureServing != nil {
		if r.SecureServing.Listener == nil {
			r.SecureServing.BindAddress = net.IPv4(127, 0, 0, 1)
			if r.SecureServing.BindPort == 443 {
				r.SecureServing.BindPort = LocalPort // a port a user may bind
			}
		}
		if r.SecureServing.ServerCert.CertDirectory == "" {
			dir, err := os.MkdirTemp("", "kubeatlas-apiserver")
			if err != nil {
				return nil, err
			}
			r.SecureServing.ServerCert.CertDirectory = dir
		}
	}
	if o.Local {
		r.Authentication, r.Authorization, r.CoreAPI = nil, nil, nil
		if r.Features != nil {
			r.Features.EnablePriorityAndFairness = false // needs the core API
		}
	}
	if r.SecureServing != nil {
		if err := r.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
			return nil, fmt.Errorf("self-signed serving certificate: %w", err)
		}
	}
	validated := r
	if r.SecureServing == nil {
		// RecommendedOptions.Validate dereferences SecureServing; without
		// a listener there is nothing of it to validate.
		copied := *r
		copied.SecureServing = genericoptions.NewSecureServingOptions().WithLoopback()
		validated = &copied
	}
	if errs := validated.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c := genericapiserver.NewRecommendedConfig(codecs)
	c.EffectiveVersion = compatibility.NewEffectiveVersionFromString("1.37", "", "")
	namer := openapinamer.NewDefinitionNamer(scheme)
	c.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	c.OpenAPIConfig.Info.Title = "kubeatlas"
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	c.OpenAPIV3Config.Info.Title = "kubeatlas"
	if err := r.ApplyTo(c); err != nil {
		return nil, err
	}
	// Open watches end at shutdown (their clients resume elsewhere or after
	// the restart) instead of holding the process for the request timeout.
	c.ShutdownWatchTerminationGracePeriod = 2 * time.Second
	if o.Local {
		c.Authentication.Authenticator = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
			return &authenticator.Response{User: &user.DefaultInfo{Name: "local", Groups: []string{user.AllAuthenticated}}}, true, nil
		})
		c.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	}
	return c, nil
}

// Server is the served API and its feed.
type Server struct {
	Generic *genericapiserver.GenericAPIServer
	Feed    *Feed

	// unlistened: built by NewUnlistened, prepared, serving no listener.
	unlistened bool
}

// NewUnlistened builds the served API over feed without a listener of its
// own, for a program that routes requests to it itself, as
// servedtest.WithServedAPI does in the kube-aggregator's place: Handler
// serves it, ready when NewUnlistened returns, with local mode's
// authentication and authorization (every request is an authenticated
// user's, and allowed). Run feeds the stores until ctx ends, then closes
// every open watch at once (no listener's close ends them) and releases
// the server's storage; it returns when all that is done. The generic
// server's post-start hooks do not run: they maintain a listening server's
// flow control and health checks, and k8s.io/apiserver's own run loop
// waits for a listener that is not there.
func NewUnlistened(feed *Feed) (*Server, error) {
	o := NewOptions()
	o.Local = true
	o.Recommended.SecureServing = nil
	scheme := NewScheme()
	codecs := serializer.NewCodecFactory(scheme)
	c, err := o.Config(scheme, codecs)
	if err != nil {
		return nil, err
	}
	// Completing the config derives it from the listener otherwise; it
	// only names the server in legacy discovery's
	// serverAddressByClientCIDRs.
	c.ExternalAddress = "localhost:443"
	// New requires a loopback configuration; without authentication,
	// authorization, priority and fairness or post-start hooks, nothing
	// uses it.
	c.LoopbackClientConfig = &rest.Config{Host: "https://" + c.ExternalAddress}
	s, err := New(c, scheme, codecs, feed)
	if err != nil {
		return nil, err
	}
	s.Generic.PrepareRun() // installs the routes Handler serves
	s.unlistened = true
	return s, nil
}

// Handler serves the API through the generic server's whole filter chain.
// Serve it only after NewUnlistened (or, after New, once Run has begun).
func (s *Server) Handler() http.Handler { return s.Generic.Handler }

// New builds the server over c, serving the feed's stores.
func New(c *genericapiserver.RecommendedConfig, scheme *runtime.Scheme, codecs serializer.CodecFactory, feed *Feed) (*Server, error) {
	g, err := c.Complete().New("kubeatlas-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	info := genericapiserver.NewDefaultAPIGroupInfo(v1alpha1.GroupName, scheme, metav1.ParameterCodec, codecs)
	info.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]apirest.Storage{
		"apigroups":            feed.Stores.Groups,
		"apiservers":           feed.Stores.Servers,
		"clusterconsistencies": feed.Stores.Consistency,
	}
	if err := g.InstallAPIGroup(&info); err != nil {
		return nil, err
	}
	return &Server{Generic: g, Feed: feed}, nil
}

// Run feeds the stores and serves until ctx ends; it returns once both have
// stopped.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Feed.Run(ctx) })
	defer wg.Wait()
	if s.unlistened {
		<-ctx.Done()
		s.Feed.Stores.closeWatches()
		s.Generic.Destroy()
		return nil
	}
	err := s.Generic.PrepareRun().RunWithContext(ctx)
	cancel()
	return err
}

// WriteLocalKubeconfig writes a kubeconfig that reaches a local-mode server
// at url, trusting the serving certificate in certFile.
func WriteLocalKubeconfig(path, url, certFile string) error {
	ca, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeatlas"] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: ca}
	// Local mode authenticates nobody; a token stops kubectl from asking
	// for a user name.
	cfg.AuthInfos["local"] = &clientcmdapi.AuthInfo{Token: "local"}
	cfg.Contexts["kubeatlas"] = &clientcmdapi.Context{Cluster: "kubeatlas", AuthInfo: "local"}
	cfg.CurrentContext = "kubeatlas"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}
