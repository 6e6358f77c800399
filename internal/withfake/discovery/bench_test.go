package discovery_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// Benchmarks run kubeatlas and client-go side by side against one fake
// server per size. Each reports, besides ns/op, B/op and allocs/op, the
// requests and response bytes one operation cost the server.
//
//	go test -run '^$' -bench . -benchmem ./discovery/

var benchSizes = []int{0, 1000, 3000}

type benchServer struct {
	srv *discoverytest.Server
	cfg *rest.Config
}

// With KUBEATLAS_BENCH_EXTERNAL=1 the fake server runs as a separate process
// (examples/fake-apiserver), so that B/op and allocs/op count the client
// alone; req/op is then not reported.
func newBenchServer(b *testing.B, crds int) benchServer {
	b.Helper()
	if os.Getenv("KUBEATLAS_BENCH_EXTERNAL") != "" {
		return benchServer{cfg: &rest.Config{Host: externalServer(b, crds)}}
	}
	klog.LogToStderr(false) // the real handlers log every group they add
	// Groups scale with CRDs as in the measurements (3000 CRDs,
	// about 400 group-versions).
	srv, err := discoverytest.NewServer(discoverytest.WithCRDs(crds, max(1, crds/12)))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	b.Cleanup(ts.Close)
	return benchServer{srv: srv, cfg: &rest.Config{Host: ts.URL}}
}

// measure runs fn b.N times and reports the server's requests and bytes per op.
func (s benchServer) measure(b *testing.B, fn func()) {
	b.Helper()
	if s.srv == nil {
		b.ReportAllocs()
		for b.Loop() {
			fn()
		}
		return
	}
	s.srv.ResetRequests()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		fn()
	}
	b.StopTimer()
	st := s.srv.Stats()
	b.ReportMetric(float64(st.Requests)/float64(b.N), "req/op")
	b.ReportMetric(float64(st.Bytes)/float64(b.N), "resp-B/op")
	s.srv.ResetRequests()
}

func kubeatlasClient(b *testing.B, cfg *rest.Config, opts ...discovery.Option) *discovery.Client {
	c, err := discovery.New(cfg, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// clientGoClient is client-go's discovery client with its client-side rate
// limiter off: the setting most favourable to client-go, so that these
// numbers measure work, not the limiter (with the default limiter, repeated
// refreshes of one client queue behind it).
func clientGoClient(b *testing.B, cfg *rest.Config) *cgdiscovery.DiscoveryClient {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	d, err := cgdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkCold: a new client to a ready view of every group, version and
// resource.
func BenchmarkCold(b *testing.B) {
	for _, n := range benchSizes {
		s := newBenchServer(b, n)
		b.Run(fmt.Sprintf("crds=%d/kubeatlas-protobuf", n), func(b *testing.B) {
			s.measure(b, func() {
				if _, err := kubeatlasClient(b, s.cfg).Snapshot(context.Background()); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("crds=%d/kubeatlas-json", n), func(b *testing.B) {
			s.measure(b, func() {
				if _, err := kubeatlasClient(b, s.cfg, discovery.WithJSONOnly()).Snapshot(context.Background()); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("crds=%d/client-go", n), func(b *testing.B) {
			s.measure(b, func() {
				if _, _, err := clientGoClient(b, s.cfg).ServerGroupsAndResources(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkRefreshUnchanged: revalidating a warm client when nothing
// changed. client-go's memory cache can only Invalidate and download again.
func BenchmarkRefreshUnchanged(b *testing.B) {
	for _, n := range benchSizes {
		s := newBenchServer(b, n)
		b.Run(fmt.Sprintf("crds=%d/kubeatlas", n), func(b *testing.B) {
			c := kubeatlasClient(b, s.cfg)
			if _, err := c.Snapshot(context.Background()); err != nil {
				b.Fatal(err)
			}
			s.measure(b, func() {
				if _, err := c.Refresh(context.Background()); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("crds=%d/client-go-memcache", n), func(b *testing.B) {
			mc := memory.NewMemCacheClient(clientGoClient(b, s.cfg))
			if _, _, err := mc.ServerGroupsAndResources(); err != nil {
				b.Fatal(err)
			}
			s.measure(b, func() {
				mc.Invalidate()
				if _, _, err := mc.ServerGroupsAndResources(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkRetainedHeap: the heap a ready view keeps alive, reported as
// retained-B (ns/op here is the cost of one cold read plus two GCs).
func BenchmarkRetainedHeap(b *testing.B) {
	for _, n := range benchSizes {
		s := newBenchServer(b, n)
		b.Run(fmt.Sprintf("crds=%d/kubeatlas", n), func(b *testing.B) {
			retained(b, func() any {
				c := kubeatlasClient(b, s.cfg)
				if _, err := c.Snapshot(context.Background()); err != nil {
					b.Fatal(err)
				}
				return c
			})
		})
		b.Run(fmt.Sprintf("crds=%d/client-go-memcache", n), func(b *testing.B) {
			retained(b, func() any {
				mc := memory.NewMemCacheClient(clientGoClient(b, s.cfg))
				if _, _, err := mc.ServerGroupsAndResources(); err != nil {
					b.Fatal(err)
				}
				return mc
			})
		})
	}
}

// retained measures the live heap a value adds. Two GCs each time empty the
// sync.Pools (the in-process server pools its gzip writers) so that only
// what the value keeps alive is counted.
func retained(b *testing.B, build func() any) {
	var total uint64
	var ms runtime.MemStats
	gc := func() {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
	}
	for b.Loop() {
		gc()
		before := ms.HeapAlloc
		v := build()
		gc()
		if ms.HeapAlloc > before {
			total += ms.HeapAlloc - before
		}
		runtime.KeepAlive(v)
	}
	b.ReportMetric(float64(total)/float64(b.N), "retained-B")
}

// externalServer builds and starts examples/fake-apiserver for the
// benchmark and returns its URL.
func externalServer(b *testing.B, crds int) string {
	bin := filepath.Join(b.TempDir(), "fake-apiserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../examples/fake-apiserver").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--crds", strconv.Itoa(crds), "--groups", strconv.Itoa(max(1, crds/12)))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(line)
}
