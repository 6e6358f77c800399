package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
)

// BenchmarkWatchMemory: the heap a synced, running watch retains, with
// KUBEATLAS_BENCH_CRDS CRDs (default 200; issue 37's target is for 3,000)
// on the real kube-apiserver, side by side on the same server and CRDs:
//
//   - kubeatlas: discovery/watch's Watcher.Run on a discovery client, until
//     Stats().Watching (its CRD and APIService informers listed and
//     watching). heap-MB is what the watch adds to a client that already
//     has its snapshot; with-client-heap-MB counts the client too.
//   - client-go-typed: the apiextensions clientset's shared informer on
//     customresourcedefinitions (what a controller that follows CRDs
//     runs), synced: full typed CRD objects.
//   - client-go-dynamic: a dynamic shared informer on the same resource,
//     synced: full objects as unstructured maps.
//
// Each has a no-op event handler, as a controller would. heap-MB is the
// live heap (HeapAlloc after two GCs) with the watch running minus the
// same before it started; inuse-MB the same of HeapInuse (spans in use,
// fragmentation included); sync-ms the time to sync. The ratio of
// kubeatlas's heap-MB to each client-go one is printed. Set
// KUBEATLAS_WATCH_HEAP_PROFILE to a directory to get a heap profile of
// each, taken at the measurement.
//
//	KUBEATLAS_KUBE_APISERVER=/path/to/kube-apiserver KUBEATLAS_BENCH_CRDS=3000 \
//	  go test -run '^$' -bench WatchMemory -benchtime 1x -timeout 30m
func BenchmarkWatchMemory(b *testing.B) {
	if os.Getenv("KUBEATLAS_WATCH_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 4096 // the default (512 KiB) hides a heap of a few MB
	}
	c := startCluster(b)
	n := createBenchCRDs(b, c)
	ctx := context.Background()
	heap := map[string]float64{}

	b.Run("kubeatlas", func(b *testing.B) {
		var sum, sumClient, sumInuse, sumSync float64
		for range b.N {
			before := measureHeap()
			dc, err := discovery.New(c.config)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := dc.Snapshot(ctx); err != nil {
				b.Fatal(err)
			}
			withClient := measureHeap()
			w, err := watch.New(dc)
			if err != nil {
				b.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			start := time.Now()
			go func() {
				defer close(done)
				if err := w.Run(wctx); err != nil {
					b.Error(err)
				}
			}()
			eventually(b, "the watch watching", 5*time.Minute, func() (bool, string) {
				s := w.Stats()
				return s.Watching, "not watching"
			})
			sumSync += float64(time.Since(start).Milliseconds())
			settle(w.Stats().Events, func() int64 { return w.Stats().Events })
			after := measureHeap()
			profileHeap(b)
			if ev := w.Stats().Events; ev < int64(n) {
				b.Fatalf("%d events, fewer than the %d CRDs", ev, n)
			}
			sum += mb(after.HeapAlloc - withClient.HeapAlloc)
			sumInuse += mb(after.HeapInuse - withClient.HeapInuse)
			sumClient += mb(after.HeapAlloc - before.HeapAlloc)
			cancel()
			<-done
			runtime.KeepAlive(dc)
		}
		b.ReportMetric(sum/float64(b.N), "heap-MB")
		b.ReportMetric(sumInuse/float64(b.N), "inuse-MB")
		b.ReportMetric(sumClient/float64(b.N), "with-client-heap-MB")
		b.ReportMetric(sumSync/float64(b.N), "sync-ms")
		heap["kubeatlas"] = sum / float64(b.N)
	})

	clientGo := func(name string, informer func() (start func(stop <-chan struct{}), inf cache.SharedIndexInformer)) {
		b.Run(name, func(b *testing.B) {
			var sum, sumInuse, sumSync float64
			for range b.N {
				before := measureHeap()
				startInf, inf := informer()
				var events atomic.Int64
				if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
					AddFunc:    func(any) { events.Add(1) },
					UpdateFunc: func(any, any) { events.Add(1) },
					DeleteFunc: func(any) { events.Add(1) },
				}); err != nil {
					b.Fatal(err)
				}
				stop := make(chan struct{})
				start := time.Now()
				startInf(stop)
				if !cache.WaitForCacheSync(stop, inf.HasSynced) {
					b.Fatal("not synced")
				}
				sumSync += float64(time.Since(start).Milliseconds())
				settle(events.Load(), events.Load)
				after := measureHeap()
				profileHeap(b)
				if got := len(inf.GetStore().ListKeys()); got < n {
					b.Fatalf("%d CRDs in the store, fewer than %d", got, n)
				}
				sum += mb(after.HeapAlloc - before.HeapAlloc)
				sumInuse += mb(after.HeapInuse - before.HeapInuse)
				close(stop)
				runtime.KeepAlive(inf)
			}
			b.ReportMetric(sum/float64(b.N), "heap-MB")
			b.ReportMetric(sumInuse/float64(b.N), "inuse-MB")
			b.ReportMetric(sumSync/float64(b.N), "sync-ms")
			heap[name] = sum / float64(b.N)
		})
	}
	clientGo("client-go-typed", func() (func(<-chan struct{}), cache.SharedIndexInformer) {
		cs, err := apiextensionsclientset.NewForConfig(c.config)
		if err != nil {
			b.Fatal(err)
		}
		f := apiextensionsinformers.NewSharedInformerFactory(cs, 0)
		return f.Start, f.Apiextensions().V1().CustomResourceDefinitions().Informer()
	})
	clientGo("client-go-dynamic", func() (func(<-chan struct{}), cache.SharedIndexInformer) {
		dyn, err := dynamic.NewForConfig(c.config)
		if err != nil {
			b.Fatal(err)
		}
		f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
		return f.Start, f.ForResource(crdGVR).Informer()
	})

	for _, name := range []string{"client-go-typed", "client-go-dynamic"} {
		if heap[name] > 0 {
			// Printed, not logged: a parent benchmark's log is shown with
			// -v only.
			fmt.Printf("BenchmarkWatchMemory: %d CRDs: kubeatlas %.2f MB, %s %.2f MB: ratio %.4f (1/%.0f)", n, heap["kubeatlas"], name, heap[name],
				heap["kubeatlas"]/heap[name], heap[name]/heap["kubeatlas"])
			fmt.Println()
		}
	}
}

// settle waits until count stops changing (no event for 500 ms, at most
// 10 s), so that the handlers' queues have drained before the heap is
// measured.
func settle(last int64, count func() int64) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		now := count()
		if now == last {
			return
		}
		last = now
	}
}

// measureHeap returns the memory statistics after two collections, so that
// HeapAlloc is the live heap.
func measureHeap() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

func mb(bytes uint64) float64 { return float64(int64(bytes)) / (1 << 20) }

// profileHeap writes a heap profile into KUBEATLAS_WATCH_HEAP_PROFILE, if
// set, named after the benchmark.
func profileHeap(b *testing.B) {
	dir := os.Getenv("KUBEATLAS_WATCH_HEAP_PROFILE")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
