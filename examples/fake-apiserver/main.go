// Command fake-apiserver serves kubeatlas's fake Kubernetes API server on
// loopback, for kubectl and for trying kubeatlas by hand:
//
//	go run ./examples/fake-apiserver --crds 200 --groups 20
//	kubectl --server "$(first line of its output)" api-resources
//
// It prints its base URL as the first line of stdout and serves until
// interrupted (or, with --exit-when-stdin-closes, until its stdin closes:
// the example commands run it so as their embedded cluster).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
		peer       = flag.Bool("peer-aggregated", false, "serve peer-aggregated discovery (KEP-4020) across the backends")
		stale      = flag.String("stale", "", "a group/version to mark Stale, as an unreachable aggregated API server (e.g. metrics.k8s.io/v1beta1, added if absent)")
		logRequest = flag.Bool("log-requests", false, "log each request to stderr")
		token      = flag.String("token", "", "require this bearer token, as a kube-apiserver with a token file does (anonymous: 403, wrong token: 401)")
		stdinEOF   = flag.Bool("exit-when-stdin-closes", false, "exit when stdin closes (run as a child process that must not outlive its parent)")
		demoEvery  = flag.Duration("demo-crd-every", 0, "create a demo CRD (demos.demo.example.com), delete it, and so on, this often")
	)
	flag.Parse()

	// The real handlers log through klog; a fake server has nothing to say.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)

	gen, err := discoverytest.ParseGeneration(*generation)
	if err != nil {
		return err
	}
	opts := []discoverytest.Option{
		discoverytest.WithGeneration(gen),
		discoverytest.WithCRDs(*crds, *groups),
	}
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
	if *token != "" {
		opts = append(opts, discoverytest.WithBearerToken(*token))
	}
	srv, err := discoverytest.NewServer(opts...)
	if err != nil {
		return err
	}
	if *stale != "" {
		if err := markStale(srv, *stale); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	var handler http.Handler = srv
	if *logRequest {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			srv.ServeHTTP(w, r)
			fmt.Fprintf(os.Stderr, "%s %s Accept=%q\n", r.Method, r.URL.RequestURI(), r.Header.Get("Accept"))
		})
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("http://%s\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *stdinEOF {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	if *demoEvery > 0 {
		go demo(ctx, srv, *demoEvery)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
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
