// Command fake-apiserver serves kubeatlas's fake Kubernetes API server on
// loopback, for kubectl and for trying kubeatlas by hand:
//
//	go run ./examples/fake-apiserver --crds 200 --groups 20
//	kubectl --server "$(first line of its output)" api-resources
//
// It prints its base URL as the first line of stdout and serves until
// interrupted (or, with --exit-when-stdin-closes, until its stdin closes:
// the example commands run it so as their embedded cluster).
//
// With --fleet it serves many clusters instead, each under
// /k8s/clusters/<id> as a fleet proxy does (discoverytest.Fleet), on
// --surfaces distinct API surfaces; --write-kubeconfig writes a kubeconfig
// with one context per cluster, for examples/fleet:
//
//	go run ./examples/fake-apiserver --fleet 1000 --surfaces 1 --crds 3000 --write-kubeconfig /tmp/fleet.kubeconfig
//	go run ./examples/fleet --kubeconfig /tmp/fleet.kubeconfig --stats
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fake-apiserver:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		addr       = flag.String("addr", "127.0.0.1:0", "address to listen on (loopback only by default)")
		crds       = flag.Int("crds", 0, "number of synthetic CRDs")
		groups     = flag.Int("groups", 10, "number of groups the synthetic CRDs are spread over")
		generation = flag.String("generation", "v2", "discovery formats served: v2 (1.33+), v2+v2beta1 (1.30-1.32), v2beta1 (1.26-1.29), legacy (<1.26)")
		backends   = flag.Int("backends", 1, "API servers behind the one URL (HA)")
		sticky     = flag.Bool("sticky", false, "with --backends: route each connection to one backend instead of round-robin")
		upgraded   = flag.Bool("upgraded-backend", false, "with --backends: the last backend also serves upgraded.example.com/v1 (one CRD), as the first server of an upgrade does")
		versions   = flag.String("backend-versions", "", "with --backends: each backend's /version, comma-separated (e.g. v1.36.3,v1.37.1)")
		peer       = flag.Bool("peer-aggregated", false, "serve peer-aggregated discovery (KEP-4020) across the backends")
		stale      = flag.String("stale", "", "a group/version to mark Stale, as an unreachable aggregated API server (e.g. metrics.k8s.io/v1beta1, added if absent)")
		logRequest = flag.Bool("log-requests", false, "log each request to stderr")
		token      = flag.String("token", "", "require this bearer token, as a kube-apiserver with a token file does (anonymous: 403, wrong token: 401)")
		stdinEOF   = flag.Bool("exit-when-stdin-closes", false, "exit when stdin closes (run as a child process that must not outlive its parent)")
		demoEvery  = flag.Duration("demo-crd-every", 0, "create a demo CRD (demos.demo.example.com), delete it, and so on, this often")
		fleet      = flag.Int("fleet", 0, "serve this many clusters (c0000, c0001, ...) under /k8s/clusters/<id>, as a fleet proxy does")
		surfaces   = flag.Int("surfaces", 1, "with --fleet: distinct API surfaces, surface i spreading the --crds over --groups+i groups; cluster i serves surface i % surfaces")
		kubeconfig = flag.String("write-kubeconfig", "", "write a kubeconfig with a context per cluster (one with --fleet, named by cluster id; else one named fake-apiserver) to this file before printing the URL")
	)
	flag.Parse()

	// The real handlers log through klog; a fake server has nothing to say.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)

	gen, err := discoverytest.ParseGeneration(*generation)
	if err != nil {
		return err
	}
	opts := []discoverytest.Option{discoverytest.WithGeneration(gen)}
	if *backends > 1 {
		routing := discoverytest.RoundRobin
		if *sticky {
			routing = discoverytest.Sticky
		}
		opts = append(opts, discoverytest.WithBackends(*backends, routing))
	}
	if *peer {
		opts = append(opts, discoverytest.WithPeerAggregation())
	}
	if *versions != "" {
		opts = append(opts, discoverytest.WithBackendVersions(strings.Split(*versions, ",")...))
	}
	if *token != "" {
		opts = append(opts, discoverytest.WithBearerToken(*token))
	}
	// servers are the Servers that --stale and --demo-crd-every change: the
	// one server, or a fleet's surfaces.
	var servers []*discoverytest.Server
	var serve http.Handler
	var clusterPaths map[string]string // context name → path under the URL
	if *fleet < 0 {
		return fmt.Errorf("--fleet must not be negative, got %d", *fleet)
	}
	if *fleet > 0 {
		f, err := newFleet(*fleet, *surfaces, *crds, *groups, opts)
		if err != nil {
			return err
		}
		servers, serve = f.Surfaces(), f
		clusterPaths = map[string]string{}
		for _, c := range f.Clusters() {
			clusterPaths[c.ID()] = c.Path()
		}
	} else {
		if *surfaces != 1 {
			return errors.New("--surfaces needs --fleet")
		}
		srv, err := discoverytest.NewServer(append(opts, discoverytest.WithCRDs(*crds, *groups))...)
		if err != nil {
			return err
		}
		servers, serve = []*discoverytest.Server{srv}, srv
		clusterPaths = map[string]string{"fake-apiserver": ""}
		if *upgraded {
			if *backends < 2 {
				return errors.New("--upgraded-backend needs --backends 2 or more")
			}
			last := srv.Backends()[*backends-1]
			if err := last.AddCRD(discoverytest.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "Upgrade"}); err != nil {
				return err
			}
		}
	}
	if *stale != "" {
		for _, srv := range servers {
			if err := markStale(srv, *stale); err != nil {
				return err
			}
		}
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://%s", ln.Addr())
	if *backends > 1 && *fleet == 0 {
		// Each backend at an address of its own too, which its identity
		// lease names, as a real HA cluster's servers are.
		host, _, _ := net.SplitHostPort(ln.Addr().String())
		stopBackends, err := servers[0].ServeBackends(host)
		if err != nil {
			return err
		}
		defer stopBackends()
	}
	if *kubeconfig != "" {
		if err := writeKubeconfig(*kubeconfig, url, clusterPaths, *token); err != nil {
			return err
		}
	}
	handler := serve
	if *logRequest {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serve.ServeHTTP(w, r)
			fmt.Fprintf(os.Stderr, "%s %s Accept=%q\n", r.Method, r.URL.RequestURI(), r.Header.Get("Accept"))
		})
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Println(url)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	parentGone := make(chan struct{})
	if *stdinEOF {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(parentGone)
			cancel()
		}()
	}
	if *demoEvery > 0 {
		go demo(ctx, servers[0], *demoEvery) // with --fleet, the clusters of the first surface
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	select {
	case <-parentGone:
		// The CLI that started us is done with us: close at once. A
		// graceful Shutdown waits up to 5 s for a connection the client
		// opened but sent nothing on (net/http counts a new connection as
		// idle only after 5 s), which made embedded runs hang after
		// printing.
		return hs.Close()
	default:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newFleet serves n clusters on k surfaces of crds CRDs each (surface i
// spreading them over groups+i groups), each surface with opts too.
func newFleet(n, k, crds, groups int, opts []discoverytest.Option) (*discoverytest.Fleet, error) {
	if k < 1 {
		return nil, fmt.Errorf("--surfaces must be at least 1, got %d", k)
	}
	surfaces := []discoverytest.Surface{{discoverytest.WithCRDs(crds, groups)}}
	if k > 1 {
		var err error
		if surfaces, err = discoverytest.DistinctSurfaces(k, crds, groups); err != nil {
			return nil, fmt.Errorf("--surfaces %d needs --crds of at least --groups+%d: %w", k, k-1, err)
		}
	}
	for i := range surfaces {
		surfaces[i] = append(surfaces[i], opts...)
	}
	return discoverytest.NewFleet(discoverytest.ClusterIDs(n), surfaces)
}

// writeKubeconfig writes a kubeconfig with a context, cluster and user per
// entry of paths (context name → path under url), the first one current.
func writeKubeconfig(file, url string, paths map[string]string, token string) error {
	cfg := clientcmdapi.NewConfig()
	names := slices.Sorted(maps.Keys(paths))
	for _, name := range names {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: url + paths[name]}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = names[0]
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		return fmt.Errorf("--write-kubeconfig: %w", err)
	}
	return nil
}

// markStale marks gv Stale, first adding it as a metrics-server-like API
// when the server does not serve it.
func markStale(srv *discoverytest.Server, s string) error {
	gv, err := schema.ParseGroupVersion(s)
	if err != nil || gv.Group == "" || gv.Version == "" {
		return fmt.Errorf("--stale wants group/version, got %q", s)
	}
	if !slices.Contains(srv.Backends()[0].GroupVersions(), gv) {
		metrics := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version}
		for _, r := range []struct {
			plural, kind string
			namespaced   bool
		}{{"nodes", "NodeMetrics", false}, {"pods", "PodMetrics", true}} {
			scope := apidiscoveryv2.ScopeCluster
			if r.namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			metrics.Resources = append(metrics.Resources, apidiscoveryv2.APIResourceDiscovery{
				Resource:     r.plural,
				ResponseKind: &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: r.kind},
				Scope:        scope,
				Verbs:        []string{"get", "list"},
			})
		}
		if err := srv.SetGroupVersion(gv.Group, metrics); err != nil {
			return err
		}
	}
	return srv.SetStale(gv, true)
}

// demo creates and deletes a CRD by turns, every interval, so that a
// watcher has something to see.
func demo(ctx context.Context, srv *discoverytest.Server, every time.Duration) {
	crd := discoverytest.CRD{Group: "demo.example.com", Versions: []string{"v1"}, Kind: "Demo", Namespaced: true}
	steps := []func() error{
		func() error { return srv.AddCRD(crd) },
		func() error { return srv.RemoveCRD(crd.Group, "demos") },
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := steps[i%len(steps)](); err != nil {
			fmt.Fprintln(os.Stderr, "fake-apiserver: demo:", err)
		}
	}
}
