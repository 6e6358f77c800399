package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
	"github.com/kubeatlas/kubeatlas/shared"
)

// roundCounter counts the requests a round sends, discovery's
// (/api, /apis and the group and group-version documents below them)
// apart, and the bytes its connections read (countedConn): on the wire,
// so that a body gzipped on request (kubeatlas asks for it) and one
// that Go's transport unzips on its own (client-go's) count alike.
type roundCounter struct {
	next                               http.RoundTripper
	requests, discoveryRequests, bytes atomic.Int64
}

func (t *roundCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	if isDiscoveryPath(req.URL.Path) {
		t.discoveryRequests.Add(1)
	}
	return t.next.RoundTrip(req)
}

func (t *roundCounter) reset() {
	t.requests.Store(0)
	t.discoveryRequests.Store(0)
	t.bytes.Store(0)
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// heapObjects is the heap's objects, live and not yet swept, now.
func heapObjects() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// heapPeak samples the heap's objects (live and not yet swept) every
// millisecond until stop, and returns the highest sample.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	var peak uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 { close(done); wg.Wait(); return peak }
}

// peakRSS is the process's peak resident set (VmHWM) since resetPeakRSS,
// in bytes; 0 where /proc does not tell.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resetPeakRSS makes VmHWM the current RSS (Linux's clear_refs 5).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClientPerReconcile is crossplane-contrib/provider-kubernetes#541
// on a real kube-apiserver v1.36.3 with KUBEATLAS_BENCH_CRDS CRDs (the
// issue's case is 1,000): a round is 100 reconciles, each of which builds
// a new controller-runtime client (client.New) and Gets a custom
// resource; the client is dropped after the reconcile. Side by side:
// controller-runtime's default (client.Options{}) and kubeatlas's shared
// registry (controllerruntime.ClientOptions, one line), with and without
// the shared client's watch, each round's first client cold (a new
// registry per round). Each side runs its 100 reconciles one at a time
// (workers=1) and on 10 workers at once (workers=10: a controller's
// MaxConcurrentReconciles; Crossplane providers set it from
// --max-reconcile-rate, and #541's transient 2 GiB came from concurrent
// fresh clients each priming discovery). Per round: discovery requests
// in all and after the first reconcile to finish, all requests, bytes
// received on the wire, the peak of the heap's objects (live and not yet
// swept, sampled every millisecond) above the live heap before the
// round, and above the heap once the first reconcile finished (the 99
// after it), peak RSS, CPU.
//
//	KUBEATLAS_KUBE_APISERVER=/path/to/kube-apiserver KUBEATLAS_BENCH_CRDS=1000 \
//	  go test -run '^$' -bench ClientPerReconcile -benchtime 2x -timeout 60m
func BenchmarkClientPerReconcile(b *testing.B) {
	c := startCluster(b)
	n := createBenchCRDs(b, c)
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "g000.bench.kubeatlas.test", Version: "v1", Kind: "Kind0000"}
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		b.Fatal(err)
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(gvk)
	cr.SetNamespace("default")
	cr.SetName("reconciled")
	if _, err := dyn.Resource(gvk.GroupVersion().WithResource("kind0000s")).Namespace("default").Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// Every request of both goes through one counting transport: its
	// pointer is what the registry keys the config's transport by.
	counting := &roundCounter{}
	dialing := rest.CopyConfig(c.config)
	dialing.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{Conn: conn, n: &counting.bytes}, nil
	}
	rt, err := rest.TransportFor(dialing)
	if err != nil {
		b.Fatal(err)
	}
	counting.next = rt
	cfg := &rest.Config{Host: c.url, Transport: counting, QPS: -1}

	const reconciles = 100
	type side struct {
		name     string
		options  func(*shared.Registry) client.Options
		registry []shared.Option
	}
	sharing := func(r *shared.Registry) client.Options {
		return controllerruntime.Sharing{Registry: r}.ClientOptions(cfg, client.Options{})
	}
	sides := []side{
		{"controller-runtime-default", func(*shared.Registry) client.Options { return client.Options{} }, nil},
		{"kubeatlas-shared", sharing, nil},
		// The same without the client's watch (shared.WithoutWatch): what
		// the watch's lists of CRDs and APIServices add to a round.
		{"kubeatlas-shared-no-watch", sharing, []shared.Option{shared.WithoutWatch()}},
	}
	for _, workers := range []int{1, 10} {
		for _, side := range sides {
			b.Run(fmt.Sprintf("crds=%d/workers=%d/%s", n, workers, side.name), func(b *testing.B) {
				benchReconcileRounds(b, cfg, counting, gvk, reconciles, workers, side.options, side.registry)
			})
		}
	}
}

// benchReconcileRounds runs BenchmarkClientPerReconcile's rounds of one
// side: reconciles reconciles, each building its own client with
// options, taken in turn by workers goroutines.
func benchReconcileRounds(b *testing.B, cfg *rest.Config, counting *roundCounter, gvk schema.GroupVersionKind,
	reconciles, workers int, options func(*shared.Registry) client.Options, registry []shared.Option) {
	ctx := context.Background()
	var discovery, after, requests, bytes, peak, peakAfter, rss int64
	var cpu time.Duration
	rounds := 0
	for b.Loop() {
		b.StopTimer()
		// A short linger, so that the round's client is gone
		// before the next round (waited for below); the
		// reconciles of a round are far closer together.
		r, err := shared.New(append([]shared.Option{shared.WithLinger(3 * time.Second)}, registry...)...)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		counting.reset()
		resetPeakRSS()
		cpu0 := cpuTime()
		stop := heapPeak()
		b.StartTimer()
		var first int64
		var stopAfter func() uint64
		var atFirst uint64
		var firstDone sync.Once
		var next atomic.Int64
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(reconciles); i = next.Add(1) - 1 {
					cl, err := client.New(cfg, options(r))
					if err != nil {
						errs <- err
						return
					}
					u := &unstructured.Unstructured{}
					u.SetGroupVersionKind(gvk)
					if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "reconciled"}, u); err != nil {
						errs <- fmt.Errorf("reconcile %d: %w", i, err)
						return
					}
					firstDone.Do(func() {
						first = counting.discoveryRequests.Load()
						atFirst, stopAfter = heapObjects(), heapPeak()
					})
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		p := stop()
		peakAfter += int64(stopAfter()) - int64(atFirst)
		cpu += cpuTime() - cpu0
		discovery += counting.discoveryRequests.Load()
		after += counting.discoveryRequests.Load() - first
		requests += counting.requests.Load()
		bytes += counting.bytes.Load()
		peak += int64(p) - int64(before.HeapAlloc)
		rss += int64(peakRSS())
		rounds++
		for deadline := time.Now().Add(30 * time.Second); r.Len() != 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("the round's shared client outlived its linger by 30s")
			}
			runtime.GC()
		}
		b.StartTimer()
	}
	per := func(v int64) float64 { return float64(v) / float64(rounds) }
	b.ReportMetric(per(discovery), "discovery-req/round")
	b.ReportMetric(per(after), "discovery-req-after-first/round")
	b.ReportMetric(per(requests), "req/round")
	b.ReportMetric(per(bytes)/(1<<20), "MiB-received/round")
	b.ReportMetric(per(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(per(peakAfter)/(1<<20), "peak-heap-after-first-MiB")
	b.ReportMetric(per(rss)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(rounds), "cpu-ms/round")
}
