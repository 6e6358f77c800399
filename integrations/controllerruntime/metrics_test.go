package controllerruntime_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
)

// sum adds the samples of name in controller-runtime's registry (what a
// manager serves on /metrics) whose labels include want ("k=v").
func sum(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			if has(m, want) {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return total
}

func has(m *dto.Metric, want []string) bool {
	labels := map[string]string{}
	for _, l := range m.Label {
		labels[l.GetName()] = l.GetValue()
	}
	for _, w := range want {
		k, v, _ := strings.Cut(w, "=")
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestManagerMetricsCountKubeatlas: in a process with controller-runtime,
// the discovery requests of a mapper the Provider made are counted in
// rest_client_requests_total (method GET, the server's host, 200s and the
// 304s of a revalidation under their codes), as many as kubeatlas sent, and kubeatlas's own metrics are in the same
// registry, moving as lookups hit and miss.
func TestManagerMetricsCountKubeatlas(t *testing.T) {
	_, base := discoverytest.Start(t)
	u, _ := url.Parse(base)
	p := controllerruntime.New()
	cl, err := cluster.New(&rest.Config{Host: base}, func(o *cluster.Options) { o.MapperProvider = p.MapperProvider })
	if err != nil {
		t.Fatal(err)
	}
	client := "client=" + u.Host
	restBefore := sum(t, "rest_client_requests_total", "method=GET", "host="+u.Host)
	notModifiedBefore := sum(t, "rest_client_requests_total", "code=304", "host="+u.Host)
	ownBefore := sum(t, "kubeatlas_discovery_requests_total", client)
	if _, err := cl.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}); err == nil {
		t.Fatal("a kind that does not exist was mapped")
	}
	counted := sum(t, "rest_client_requests_total", "method=GET", "host="+u.Host) - restBefore
	own := sum(t, "kubeatlas_discovery_requests_total", client) - ownBefore
	if counted < 2 || counted != own {
		t.Errorf("rest_client_requests_total counted %v of kubeatlas's discovery requests; kubeatlas sent %v (at least /api and /apis)", counted, own)
	}
	// The miss revalidated discovery: two 304s, counted under their code.
	if v := sum(t, "rest_client_requests_total", "code=304", "host="+u.Host) - notModifiedBefore; v != 2 {
		t.Errorf("rest_client_requests_total{code=304} counted %v of the miss's revalidation, want 2", v)
	}
	if v := sum(t, "kubeatlas_restmapper_lookups_total", client, "result=hit"); v != 1 {
		t.Errorf("kubeatlas_restmapper_lookups_total{result=hit}: %v, want 1", v)
	}
	if v := sum(t, "kubeatlas_restmapper_lookups_total", client, "result=miss"); v != 1 {
		t.Errorf("kubeatlas_restmapper_lookups_total{result=miss}: %v, want 1", v)
	}
	if v := sum(t, "kubeatlas_discovery_refreshes_total", client, "result=success"); v < 2 {
		t.Errorf("kubeatlas_discovery_refreshes_total{result=success}: %v, want the first read and the miss's refresh", v)
	}

	// A second mapper of the same server, from another Provider, is
	// exposed beside the first, not refused.
	p2 := controllerruntime.New()
	m2, err := p2.MapperProvider(&rest.Config{Host: base}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m2.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
		t.Fatal(err)
	}
	if v := sum(t, "kubeatlas_restmapper_lookups_total", "client="+u.Host+"#2", "result=hit"); v != 1 {
		t.Errorf("the second mapper's hits: %v, want 1", v)
	}

	// WithoutMetrics: the requests are still counted where client-go's
	// are, but there is no series of the mapper's own.
	_, base3 := discoverytest.Start(t)
	u3, _ := url.Parse(base3)
	m3, err := controllerruntime.New(controllerruntime.WithoutMetrics()).MapperProvider(&rest.Config{Host: base3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m3.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
		t.Fatal(err)
	}
	if v := sum(t, "rest_client_requests_total", "host="+u3.Host); v < 2 {
		t.Errorf("WithoutMetrics: rest_client_requests_total counted %v requests, want /api and /apis at least", v)
	}
	if v := sum(t, "kubeatlas_restmapper_lookups_total", "client="+u3.Host, "result=hit"); v != 0 {
		t.Errorf("WithoutMetrics: kubeatlas_restmapper_lookups_total{result=hit} %v, want no series", v)
	}
}

// TestWithLogger: discovery logs through the logr.Logger given, as a
// manager's components do: a server that cannot be reached is said there.
func TestWithLogger(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	l := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	p := controllerruntime.New(controllerruntime.WithLogger(l.WithName("test")), controllerruntime.WithoutMetrics())
	m, err := p.MapperProvider(&rest.Config{Host: down.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err == nil {
		t.Fatal("a server that is down answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "test ") || !strings.Contains(strings.Join(lines, "\n"), strings.TrimPrefix(down.URL, "http://")) {
		t.Errorf("logged %q, want the failed refresh, naming the server, through the logger given", lines)
	}
}
