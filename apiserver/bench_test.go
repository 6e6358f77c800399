package apiserver_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
)

// BenchmarkWatchers: N watchers of apigroups on one server process; an
// operation is a CRD of a new group created in the fake upstream until the
// last watcher has its ADDED event (ns/op is that latency). heap-B/watcher
// is the heap the open watches took, server and clients together (both are
// in this process), divided by N.
//
// Past five changes in a row, discovery/watch.Run refreshes at most once a
// second, so with -benchtime above 5x most of ns/op is that rate limit;
// BenchmarkFanout times the served side alone.
func BenchmarkWatchers(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			benchmarkWatchers(b, n, func(fake *discoverytest.Server, _ *served, group string) error {
				return fake.AddCRD(discoverytest.CRD{Group: group, Versions: []string{"v1"}, Kind: "Bench"})
			})
		})
	}
}

// BenchmarkFanout: as BenchmarkWatchers, but the change is put in the
// apigroups store directly: from the store's upsert to the last of N
// watchers' events, over HTTPS, through k8s.io/apiserver's watch handler.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			benchmarkWatchers(b, n, func(_ *discoverytest.Server, s *served, group string) error {
				s.Stores.Groups.Upsert(&v1alpha1.Group{ObjectMeta: metav1.ObjectMeta{Name: group}, Status: v1alpha1.GroupStatus{Group: group}})
				return nil
			})
		})
	}
}

func benchmarkWatchers(b *testing.B, n int, change func(*discoverytest.Server, *served, string) error) {
	fake, url := startFake(b)
	s := serve(b, url, serveOptions{})
	cfg := *s.Config
	cfg.QPS, cfg.Burst = -1, -1
	dc, err := dynamic.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rv := strconv.FormatUint(s.Stores.Groups.ResourceVersion(), 10)
	got := make(chan string, n*4)
	var wg sync.WaitGroup
	for range n {
		w, err := dc.Resource(apigroupsGVR).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer w.Stop()
			for e := range w.ResultChan() {
				if m, ok := e.Object.(metav1.Object); ok {
					select {
					case got <- m.GetName():
					case <-ctx.Done():
						return
					}
				} else if ctx.Err() == nil {
					b.Errorf("watch event %v %v", e.Type, e.Object)
				}
			}
			if ctx.Err() == nil {
				b.Errorf("a watch ended")
			}
		})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		group := fmt.Sprintf("g%d.bench.example.com", i)
		if err := change(fake, s, group); err != nil {
			b.Fatal(err)
		}
		deadline := time.After(30 * time.Second)
		for seen := 0; seen < n; {
			select {
			case name := <-got:
				if name == group {
					seen++
				}
			case <-deadline:
				b.Fatalf("%d of %d watchers saw %s", seen, n, group)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(heap, "heap-B/watcher") // after the loop: ResetTimer drops metrics
	cancel()
	wg.Wait()
}
