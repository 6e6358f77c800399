package prometheus_test

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/diskcache"
	kprom "github.com/kubeatlas/kubeatlas/integrations/prometheus"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// scrape reads the registry as Prometheus does: GET /metrics, parsed.
func scrape(t *testing.T, reg *prom.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// value is the sample of name whose labels include want ("k=v" pairs),
// and whether there is one.
func value(families map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, w := range want {
			k, v, _ := strings.Cut(w, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// TestScrape: the metrics a scrape shows move as a user of the clients
// would expect: a refresh counts one more refresh, a revalidation two
// 304s, a mapper miss a miss (and the refresh it made), a corrupt disk
// entry a corrupt entry; the snapshot's age grows with time and resets
// when the server confirms it; a client that cannot reach its server
// counts failed refreshes, under its own label.
func TestScrape(t *testing.T) {
	_, base := discoverytest.Start(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	dir := t.TempDir()
	cache, err := diskcache.Open(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewForHTTPClient(nil, base, discovery.WithClock(clk), discovery.WithDiskCache(cache))
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(dc)
	if err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	broken, err := discovery.NewForHTTPClient(nil, down.URL)
	if err != nil {
		t.Fatal(err)
	}

	col := kprom.NewCollector(kprom.WithClock(clk))
	if err := col.Add("fake", kprom.Source{Discovery: dc, Mapper: m, DiskCache: cache}); err != nil {
		t.Fatal(err)
	}
	if err := col.Add("fake", kprom.Source{Discovery: broken}); err == nil {
		t.Error("a second source under one name was accepted")
	}
	if err := col.Add("down", kprom.Source{Discovery: broken}); err != nil {
		t.Fatal(err)
	}
	reg := prom.NewPedanticRegistry()
	reg.MustRegister(col)
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}

	get := func(f map[string]*dto.MetricFamily, name string, labels ...string) float64 {
		t.Helper()
		v, ok := value(f, name, labels...)
		if !ok {
			t.Fatalf("no %s%v in the scrape", name, labels)
		}
		return v
	}
	before := scrape(t, reg)
	if _, ok := value(before, "kubeatlas_discovery_snapshot_generation", "client=fake"); ok {
		t.Error("a snapshot generation before any snapshot")
	}
	if v := get(before, "kubeatlas_discovery_refreshes_total", "client=fake", "result=success"); v != 0 {
		t.Errorf("refreshes before any: %v", v)
	}

	ctx := context.Background()
	if _, err := dc.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(30 * time.Second)
	first := scrape(t, reg)
	if v := get(first, "kubeatlas_discovery_refreshes_total", "client=fake", "result=success"); v != 1 {
		t.Errorf("refreshes after the first snapshot: %v, want 1", v)
	}
	if v := get(first, "kubeatlas_discovery_requests_total", "client=fake"); v < 2 {
		t.Errorf("requests after the first snapshot: %v, want /api and /apis at least", v)
	}
	if v := get(first, "kubeatlas_discovery_response_bytes_total", "client=fake"); v <= 0 {
		t.Errorf("bytes after the first snapshot: %v", v)
	}
	if v := get(first, "kubeatlas_discovery_snapshot_generation", "client=fake"); v < 1 {
		t.Errorf("generation: %v", v)
	}
	if v := get(first, "kubeatlas_discovery_snapshot_age_seconds", "client=fake"); v != 30 {
		t.Errorf("age 30 s after the snapshot: %v", v)
	}
	if v := get(first, "kubeatlas_discovery_snapshot_complete", "client=fake"); v != 1 {
		t.Errorf("complete: %v", v)
	}
	if v := get(first, "kubeatlas_diskcache_writes_total", "client=fake"); v < 1 {
		t.Errorf("disk writes after the first snapshot: %v", v)
	}

	if _, err := dc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	second := scrape(t, reg)
	if v := get(second, "kubeatlas_discovery_refreshes_total", "client=fake", "result=success"); v != 2 {
		t.Errorf("refreshes after a revalidation: %v, want 2", v)
	}
	if d := get(second, "kubeatlas_discovery_not_modified_total", "client=fake") - get(first, "kubeatlas_discovery_not_modified_total", "client=fake"); d != 2 {
		t.Errorf("304s of a revalidation: %v, want 2", d)
	}
	if v := get(second, "kubeatlas_discovery_snapshot_age_seconds", "client=fake"); v != 0 {
		t.Errorf("age after the server confirmed the snapshot: %v, want 0", v)
	}

	if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "nope.example.com", Kind: "Nope"}); err == nil {
		t.Fatal("a kind that does not exist was mapped")
	}
	third := scrape(t, reg)
	for result, want := range map[string]float64{"hit": 1, "miss": 1, "error": 0} {
		if v := get(third, "kubeatlas_restmapper_lookups_total", "client=fake", "result="+result); v != want {
			t.Errorf("lookups{result=%q}: %v, want %v", result, v, want)
		}
	}
	if v := get(third, "kubeatlas_restmapper_miss_refreshes_total", "client=fake"); v != 1 {
		t.Errorf("miss refreshes: %v, want 1", v)
	}

	// Every entry torn: a new client's warm start finds them corrupt.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") {
			err = os.WriteFile(p, []byte("torn"), 0o600)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cache2, err := diskcache.Open(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	dc2, err := discovery.NewForHTTPClient(nil, base, discovery.WithDiskCache(cache2))
	if err != nil {
		t.Fatal(err)
	}
	if err := col.Add("warm", kprom.Source{Discovery: dc2, DiskCache: cache2}); err != nil {
		t.Fatal(err)
	}
	if _, err := dc2.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Snapshot(ctx); err == nil {
		t.Fatal("a closed server answered")
	}
	fourth := scrape(t, reg)
	if v := get(fourth, "kubeatlas_diskcache_corrupt_total", "client=warm"); v < 1 {
		t.Errorf("corrupt entries after a warm start on torn files: %v", v)
	}
	if v := get(fourth, "kubeatlas_discovery_disk_loads_total", "client=warm"); v != 0 {
		t.Errorf("disk loads from torn files: %v, want 0", v)
	}
	if v := get(fourth, "kubeatlas_discovery_refreshes_total", "client=down", "result=error"); v != 1 {
		t.Errorf("failed refreshes of a client whose server is down: %v, want 1", v)
	}
	if _, ok := value(fourth, "kubeatlas_discovery_snapshot_generation", "client=down"); ok {
		t.Error("a generation for a client that never had a snapshot")
	}

	col.Remove("down")
	if _, ok := value(scrape(t, reg), "kubeatlas_discovery_refreshes_total", "client=down"); ok {
		t.Error("a removed source is still scraped")
	}
}

// TestScrapeWatch: a source's Watcher is scraped as the discovery_watch
// series: not watching before it runs, then watching, its lists and
// watches of CRDs and APIServices counted, not forbidden.
func TestScrapeWatch(t *testing.T) {
	_, base := discoverytest.Start(t)
	dc, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	w, err := watch.New(dc, watch.WithUpgradePoll(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	col := kprom.NewCollector()
	if err := col.Add("fake", kprom.Source{Discovery: dc, Watch: w}); err != nil {
		t.Fatal(err)
	}
	reg := prom.NewPedanticRegistry()
	reg.MustRegister(col)
	if v, ok := value(scrape(t, reg), "kubeatlas_discovery_watching", "client=fake"); !ok || v != 0 {
		t.Errorf("watching before Run: %v (in the scrape: %v), want 0", v, ok)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); !w.Stats().Watching; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Watcher is not watching after 30s")
		}
	}
	f := scrape(t, reg)
	for name, want := range map[string]func(float64) bool{
		"kubeatlas_discovery_watching":             func(v float64) bool { return v == 1 },
		"kubeatlas_discovery_watch_requests_total": func(v float64) bool { return v >= 2 }, // a list of CRDs and one of APIServices, at least
		"kubeatlas_discovery_watch_forbidden":      func(v float64) bool { return v == 0 },
		"kubeatlas_discovery_watch_events_total":   func(v float64) bool { return v >= 0 },
	} {
		if v, ok := value(f, name, "client=fake"); !ok || !want(v) {
			t.Errorf("%s: %v (in the scrape: %v)", name, v, ok)
		}
	}
}
