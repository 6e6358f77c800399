package tests

// What crmapper_test.go (controller-runtime's mapper tests, ported) needs
// that upstream's envtest gave it, and the mappers it runs against.

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	gmg "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
)

type mapperUnderTest struct {
	name     string
	upstream bool // controller-runtime's own mapper
	watching bool // kubeatlas's Provider runs as a Runnable (watches CRDs and APIServices)
}

var mappersUnderTest = []mapperUnderTest{
	{name: "controller-runtime", upstream: true},
	{name: "kubeatlas"},
	{name: "kubeatlas-runnable", watching: true},
}

// kaRule is what a request count protects, for kubeatlas's mapper (see
// crmapper_test.go's header).
type kaRule int

const (
	kaNone    kaRule = iota // no request since the last check
	kaCold                  // one cold read of all of discovery since the last check
	kaRefresh               // at most one conditional refresh since the last check
)

type mapperOnCluster struct {
	mapperUnderTest
	new            func(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error)
	expectRequests func(g gmg.Gomega, crt *countingRoundTripper, n int, rule kaRule)
}

// forCluster makes m's mappers for the cluster at cfg.
func (m mapperUnderTest) forCluster(t *testing.T, cfg *rest.Config, aggregated bool) mapperOnCluster {
	on := mapperOnCluster{mapperUnderTest: m}
	switch {
	case m.upstream:
		on.new = apiutil.NewDynamicRESTMapper
	case m.watching:
		p := controllerruntime.New()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Start(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		on.new = p.MapperProvider
	default:
		on.new = controllerruntime.New().MapperProvider
	}
	on.expectRequests = func(g gmg.Gomega, crt *countingRoundTripper, n int, rule kaRule) {
		paths := crt.sinceCheck()
		// A read of discovery asks each document once: /api and /apis, and
		// under legacy discovery each group-version they list (what they
		// list may lag a change by a moment, so it is not counted here).
		oneRead := func() {
			for p, times := range paths {
				g.Expect(times).To(gmg.Equal(1), "kubeatlas asked %s %d times", p, times)
			}
			if aggregated {
				g.Expect(len(paths)).To(gmg.BeNumerically("<=", 2), "kubeatlas asked %v", paths)
			}
		}
		switch {
		case m.upstream:
			g.Expect(crt.GetRequestCount()).To(gmg.Equal(n), "controller-runtime's mapper's requests (upstream's assertion)")
		case m.watching:
			// The watch may refresh discovery at any time: not asserted.
		case rule == kaNone:
			g.Expect(paths).To(gmg.BeEmpty(), "kubeatlas sent requests for what it knows")
		case rule == kaCold:
			g.Expect(paths).To(gmg.HaveKeyWithValue("/api", 1), "kubeatlas's first lookup: one read of discovery")
			g.Expect(paths).To(gmg.HaveKeyWithValue("/apis", 1), "kubeatlas's first lookup: one read of discovery")
			oneRead()
		case rule == kaRefresh:
			oneRead() // at most one refresh
		}
	}
	return on
}

// isDiscoveryPath says whether path is discovery: /api, /api/v1, /apis,
// /apis/<group> or /apis/<group>/<version>.
func isDiscoveryPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch parts[0] {
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return false
}

// setupEnvtest is upstream's envtest set-up on the integration tier: a
// real kube-apiserver with the CRD of testdata/crmapper installed and
// served. With disableAggregatedDiscovery the returned config reaches it
// through a proxy that strips the aggregated discovery media types from
// Accept, so that it answers with legacy discovery (upstream runs a v1.28.0
// server with the AggregatedDiscoveryEndpoint feature off).
func setupEnvtest(t *testing.T, disableAggregatedDiscovery bool) *rest.Config {
	t.Helper()
	c := startCluster(t)
	cfg := rest.CopyConfig(c.config)
	if disableAggregatedDiscovery {
		cfg = legacyDiscoveryProxy(t, c.config)
	}

	b, err := os.ReadFile("testdata/crmapper/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CRD of testdata/crmapper served", 30*time.Second, func() (bool, string) {
		for _, gv := range []string{"crew.example.com/v1", "crew.example.com/v2"} {
			if _, err := dc.ServerResourcesForGroupVersion(gv); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
	return cfg
}

// legacyDiscoveryProxy serves cfg's cluster on a loopback address of its
// own, with the aggregated discovery media types taken out of every
// request's Accept, and returns a config for it.
func legacyDiscoveryProxy(t *testing.T, cfg *rest.Config) *rest.Config {
	t.Helper()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			var kept []string
			for _, a := range strings.Split(r.In.Header.Get("Accept"), ",") {
				if a = strings.TrimSpace(a); a != "" && !strings.Contains(a, "g=apidiscovery.k8s.io") {
					kept = append(kept, a)
				}
			}
			if len(kept) == 0 {
				kept = []string{"application/json"}
			}
			r.Out.Header.Set("Accept", strings.Join(kept, ", "))
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
	}
	// TLS as the real server: over plain http, rest.HTTPClientFor returns
	// http.DefaultClient, whose Transport upstream's test would replace.
	srv := httptest.NewTLSServer(proxy)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &rest.Config{Host: srv.URL, QPS: -1, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}
