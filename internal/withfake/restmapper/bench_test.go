package restmapper_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/metaview"
	"github.com/kubeatlas/kubeatlas/internal/mapperbench"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Side by side with client-go at 3000 CRDs (250 groups, about 400
// group-versions), against one in-process fake server:
//
//	go test -run '^$' -bench . -benchmem ./restmapper/

type benchEnv struct {
	srv  *discoverytest.Server
	base string
}

func newBenchEnv(b *testing.B) benchEnv {
	klog.LogToStderr(false)
	srv, err := discoverytest.NewServer(discoverytest.WithCRDs(3000, 250))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	b.Cleanup(ts.Close)
	return benchEnv{srv: srv, base: ts.URL}
}

func (e benchEnv) kubeatlas(b *testing.B) *restmapper.Mapper {
	c, err := discovery.NewForHTTPClient(nil, e.base)
	if err != nil {
		b.Fatal(err)
	}
	m, err := restmapper.New(c)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// clientGo is client-go's deferred mapper in its shortcut expander over a
// memory-cached discovery client, with the rate limiter off.
func (e benchEnv) clientGo(b *testing.B) (meta.RESTMapper, meta.RESTMapper) {
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(&rest.Config{Host: e.base, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	mc := memory.NewMemCacheClient(dc)
	deferred := cgrestmapper.NewDeferredDiscoveryRESTMapper(mc)
	return deferred, cgrestmapper.NewShortcutExpander(deferred, mc, nil)
}

var (
	benchKind  = schema.GroupVersionResource{Group: "g017.stress.example.com", Resource: "widget1017s"}
	benchGK    = schema.GroupKind{Group: "g017.stress.example.com", Kind: "Widget1017"}
	benchShort = schema.GroupVersionResource{Resource: "w1017"}
	benchMiss  = schema.GroupKind{Group: "nope.example.com", Kind: "DoesNotExist"}
)

// lookup is called in benchmark loops, so it does not call b.Helper (which
// walks the stack and would cost more than a kubeatlas lookup).
func lookup(b *testing.B, m meta.RESTMapper, gvr schema.GroupVersionResource, gk schema.GroupKind) {
	if _, err := m.KindFor(gvr); err != nil {
		b.Fatal(err)
	}
	if _, err := m.RESTMapping(gk); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLookup: KindFor plus RESTMapping of a CRD on a warm mapper.
func BenchmarkLookup(b *testing.B) {
	e := newBenchEnv(b)
	b.Run("kubeatlas", func(b *testing.B) {
		m := e.kubeatlas(b)
		lookup(b, m, benchKind, benchGK)
		b.ReportAllocs()
		for b.Loop() {
			lookup(b, m, benchKind, benchGK)
		}
	})
	b.Run("client-go", func(b *testing.B) {
		deferred, _ := e.clientGo(b)
		lookup(b, deferred, benchKind, benchGK)
		b.ReportAllocs()
		for b.Loop() {
			lookup(b, deferred, benchKind, benchGK)
		}
	})
}

// BenchmarkLookupParallel: the same on every core at once.
func BenchmarkLookupParallel(b *testing.B) {
	e := newBenchEnv(b)
	m := e.kubeatlas(b)
	lookup(b, m, benchKind, benchGK)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			lookup(b, m, benchKind, benchGK)
		}
	})
}

// BenchmarkShortcutLookup: KindFor of a short name, which client-go's
// ShortcutExpander resolves by reading all of discovery on every call.
func BenchmarkShortcutLookup(b *testing.B) {
	e := newBenchEnv(b)
	b.Run("kubeatlas", func(b *testing.B) {
		m := e.kubeatlas(b)
		lookup(b, m, benchShort, benchGK)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.KindFor(benchShort); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client-go", func(b *testing.B) {
		_, expander := e.clientGo(b)
		lookup(b, expander, benchShort, benchGK)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := expander.KindFor(benchShort); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkConstruction: a new mapper, from nothing to its first answer
// (discovery included, as a new process pays it).
func BenchmarkConstruction(b *testing.B) {
	e := newBenchEnv(b)
	b.Run("kubeatlas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lookup(b, e.kubeatlas(b), benchKind, benchGK)
		}
	})
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			deferred, _ := e.clientGo(b)
			lookup(b, deferred, benchKind, benchGK)
		}
	})
}

// BenchmarkRepeatedMiss: `get doesnotexist` in a loop. client-go's deferred
// mapper invalidates and re-reads discovery on every miss; kubeatlas
// refreshes (two 304s) at most once per backoff period.
func BenchmarkRepeatedMiss(b *testing.B) {
	e := newBenchEnv(b)
	miss := func(b *testing.B, m meta.RESTMapper) {
		if _, err := m.RESTMapping(benchMiss); !meta.IsNoMatchError(err) {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, m meta.RESTMapper) {
		miss(b, m)
		e.srv.ResetRequests()
		b.ReportAllocs()
		for b.Loop() {
			miss(b, m)
		}
		b.ReportMetric(float64(e.srv.Stats().Requests)/float64(b.N), "req/op")
	}
	b.Run("kubeatlas", func(b *testing.B) { run(b, e.kubeatlas(b)) })
	b.Run("client-go", func(b *testing.B) {
		deferred, _ := e.clientGo(b)
		run(b, deferred)
	})
}

// readMapper is a kubeatlas mapper over c, its discovery read (outside
// mapperbench.FirstSight's timer, as client-go's is).
func readMapper(b *testing.B, c *discovery.Client) meta.RESTMapper {
	if _, err := c.Snapshot(context.Background()); err != nil {
		b.Fatal(err)
	}
	m, err := restmapper.New(c)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkFirstSight: a new mapper's first answer to every input form a
// user types (see mapperbench), on discovery captured from a real
// kube-apiserver with 500 CRDs. The integration tier runs the same
// benchmark against a live server with 3000.
func BenchmarkFirstSight(b *testing.B) {
	klog.LogToStderr(false)
	base := serveCapture(b, "../../../restmapper/testdata/crd500")
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	inputs := mapperbench.Inputs(metaview.Of(snap).Resources)
	b.Run("kubeatlas", func(b *testing.B) {
		mapperbench.FirstSight(b, inputs, func() meta.RESTMapper {
			c, err := discovery.NewForHTTPClient(nil, base)
			if err != nil {
				b.Fatal(err)
			}
			return readMapper(b, c)
		})
	})
	b.Run("client-go", func(b *testing.B) {
		mapperbench.FirstSight(b, inputs, func() meta.RESTMapper { return mapperbench.ClientGo(b, &rest.Config{Host: base, QPS: -1}) })
	})
	b.Logf("%d inputs", len(inputs))
}

// headerRecorder keeps the headers of the last request sent through it.
type headerRecorder struct {
	mu     sync.Mutex
	header http.Header
}

func (r *headerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.header = req.Header.Clone()
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// BenchmarkColdFirstMapping: from nothing to the first RESTMapping of a
// kind (a new discovery client, restmapper.New, the lookup), against the
// floor under it: the same two GETs of /api and /apis, in parallel as the
// client sends them, with the Accept header it negotiates (recorded from
// it), bodies read whole (net/http asking for gzip and decompressing as
// the body arrives, as it does by default, and as kubeatlas asks) and
// nothing decoded. Each iteration runs both, so that the load of a shared
// machine weighs on both alike: raw-ms and kubeatlas-ms are each one's
// time per iteration, x-raw the ratio (the target is at most 2).
// raw-identity-ms is the same GETs without gzip, which on loopback costs
// the server and the client more than it saves: the floor of a client
// that would not ask for it (client-go does, as kubeatlas does);
// kubeatlas-identity-ms is kubeatlas not asking for it either (a
// rest.Config with DisableCompression, whose transport then does not ask
// either), and x-raw-identity that ratio.
func BenchmarkColdFirstMapping(b *testing.B) {
	e := newBenchEnv(b)
	rec := &headerRecorder{}
	hc := &http.Client{Transport: rec}
	identityTransport := http.DefaultTransport.(*http.Transport).Clone()
	identityTransport.DisableCompression = true
	hcIdentity := &http.Client{Transport: identityTransport}
	b.Cleanup(identityTransport.CloseIdleConnections)
	coldMappingWith := func(identity bool) {
		c, err := discovery.NewForHTTPClient(hc, e.base)
		if identity {
			c, err = discovery.NewForConfigAndClient(&rest.Config{Host: e.base, DisableCompression: true}, hcIdentity)
		}
		if err != nil {
			b.Fatal(err)
		}
		m, err := restmapper.New(c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.RESTMapping(benchGK, "v1"); err != nil {
			b.Fatal(err)
		}
	}
	coldMapping := func() { coldMappingWith(false) }
	coldMapping() // records the Accept header the client negotiates with
	rec.mu.Lock()
	accept := rec.header.Get("Accept")
	rec.mu.Unlock()
	get := func(path, encoding string) error {
		req, err := http.NewRequest(http.MethodGet, e.base+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", accept)
		if encoding != "" {
			req.Header.Set("Accept-Encoding", encoding) // and net/http leaves it to us
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	rawGets := func(encoding string) {
		var g errgroup.Group
		g.Go(func() error { return get("/api", encoding) })
		g.Go(func() error { return get("/apis", encoding) })
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	var raw, identity, kubeatlas, kubeatlasIdentity time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		rawGets("")
		t1 := time.Now()
		rawGets("identity")
		t2 := time.Now()
		coldMapping()
		t3 := time.Now()
		coldMappingWith(true)
		raw, identity, kubeatlas, kubeatlasIdentity = raw+t1.Sub(t0), identity+t2.Sub(t1), kubeatlas+t3.Sub(t2), kubeatlasIdentity+time.Since(t3)
	}
	perOp := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(perOp(raw), "raw-ms")
	b.ReportMetric(perOp(identity), "raw-identity-ms")
	b.ReportMetric(perOp(kubeatlas), "kubeatlas-ms")
	b.ReportMetric(perOp(kubeatlasIdentity), "kubeatlas-identity-ms")
	b.ReportMetric(float64(kubeatlas)/float64(raw), "x-raw")
	b.ReportMetric(float64(kubeatlasIdentity)/float64(identity), "x-raw-identity")
}
