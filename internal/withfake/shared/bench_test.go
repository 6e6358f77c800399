package shared_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/internal/liveheap"
	"github.com/kubeatlas/kubeatlas/shared"
)

// BenchmarkIdentitiesWatched: identities (bearer tokens) held at once on
// one server with 1,000 CRDs, the watch on, each with its client
// acquired and a lookup made (issue 45's targets, on the fake; requests
// counted at the server, per token):
//   - heap-x-one: the live heap with every identity held over the heap
//     with the first one held, both above the heap before the first,
//     each read once the process has settled (the watch's informers
//     synced, every identity following it, the goroutines steady) as the
//     median of three readings after collections (internal/liveheap):
//     the median over the rounds (-benchtime Nx), with the least and
//     greatest (heap-x-one-min, -max); the one identity has made as
//     many lookups as all of them make (the mapper's index of the
//     server's kinds, which they share, is built at a generation's ninth
//     lookup), and heap-x-one-1-lookup is the median ratio over the heap
//     after its first lookup, without the index; goroutines-over-one the
//     same for goroutines; heap-MiB/1-identity and heap-MiB/all are the
//     medians;
//   - first-use-req/other: the discovery requests (and 304s) each
//     identity after the first sent at its first use, and watch-req/other
//     its lists and watches of CRDs and APIServices;
//   - idle-req/10min: what every identity sent while held ten minutes (a
//     fake clock, stepped a minute at a time; the watch is idle);
//   - after a CRD is added and the watch has refreshed for it: the
//     requests and documents (200s) of each identity that looks the new
//     kind up (every other one), its lookup's time, and what those that
//     do not look sent (idle-after-change-req).
//
// KUBEATLAS_SHARED_BENCH_IDENTITIES sets how many (default 1000).
// KUBEATLAS_SHARED_BENCH_HEAPPROFILE names a file for the heap profile
// taken while every identity is held (after the GC that heap-MiB/all
// reads), which -memprofile, written once they are released, cannot
// show; with -memprofilerate 1 it counts every allocation still live:
//
//	KUBEATLAS_SHARED_BENCH_HEAPPROFILE=/tmp/held.pprof go test -run '^$' \
//	  -bench IdentitiesWatched -benchtime 1x -memprofilerate 1 ./internal/withfake/shared/
//	go tool pprof -sample_index=inuse_space -top /tmp/held.pprof
func BenchmarkIdentitiesWatched(b *testing.B) {
	n := 1000
	if v := os.Getenv("KUBEATLAS_SHARED_BENCH_IDENTITIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			b.Fatalf("KUBEATLAS_SHARED_BENCH_IDENTITIES: %q is not a number of at least 2", v)
		}
	}
	d := startDoor(b, discoverytest.WithCRDs(1000, 100))
	liveHeap := func(settled ...func() bool) uint64 {
		liveheap.Settle(b, time.Minute, settled...)
		// The fake's request log grows with every request: the
		// server's memory, not the identities'.
		d.srv.ResetRequests()
		return liveheap.Read(3)
	}
	// watching: the watch runs with the first identity's credentials,
	// its informers synced, and each of hs follows it.
	watching := func(hs ...*shared.Handle) func() bool {
		return func() bool {
			if w := hs[0].Watcher(); w == nil || !w.Stats().Watching {
				return false
			}
			for _, h := range hs {
				if !h.Discovery().Following() {
					return false
				}
			}
			return true
		}
	}
	var ones, ones1, alls, ratios, ratios1 []float64
	var m struct {
		g1, gAll                   int
		firstReq, first304, watchR float64
		idle                       int
		lookReq, lookDocs, notLook float64
		lookTime                   time.Duration
	}
	round := 0
	for b.Loop() {
		round++
		clk := clocktesting.NewFakeClock(time.Now())
		r := newRegistry(b, clk)
		tokens := make([]string, n)
		handles := make([]*shared.Handle, n)
		// The door's tally of each token is the server's memory, not
		// the identities': made before the heap is first read. Each
		// identity's config gets a token of its own, made after.
		d.mu.Lock()
		for i := range tokens {
			tokens[i] = fmt.Sprintf("tok-%d-%d", round, i)
			d.tally(tokens[i])
		}
		d.mu.Unlock()
		base, g0 := liveHeap(), runtime.NumGoroutine()
		for i := range handles {
			handles[i] = acquire(b, r, d, strings.Clone(tokens[i]))
			if _, err := handles[i].Mapper().RESTMapping(widget, "v1"); err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				first := liveHeap(watching(handles[0]))
				ones1 = append(ones1, float64(first-min(base, first)))
				// The mapper's index of the server's kinds is built
				// at a generation's ninth lookup, by any identity
				// (restmapper's scansBeforeIndex), and shared: the
				// identities' lookups build it before the heap with
				// all held is read. The one identity makes as many
				// lookups first, so that what the server's identities
				// share is alike in both readings.
				for range n - 1 {
					if _, err := handles[0].Mapper().RESTMapping(widget, "v1"); err != nil {
						b.Fatal(err)
					}
				}
				one := liveHeap(watching(handles[0]))
				ones = append(ones, float64(one-min(base, one)))
				m.g1 += runtime.NumGoroutine() - g0
			}
		}
		all := liveHeap(watching(handles...))
		alls = append(alls, float64(all-min(base, all)))
		ratios = append(ratios, alls[len(alls)-1]/max(ones[len(ones)-1], 1))
		ratios1 = append(ratios1, alls[len(alls)-1]/max(ones1[len(ones1)-1], 1))
		b.Logf("round %d: one identity %.2f MiB (%.2f after its first lookup), all %.2f MiB, %.3fx (%.3fx)", round,
			ones[len(ones)-1]/(1<<20), ones1[len(ones1)-1]/(1<<20), alls[len(alls)-1]/(1<<20), ratios[len(ratios)-1], ratios1[len(ratios1)-1])
		if path := os.Getenv("KUBEATLAS_SHARED_BENCH_HEAPPROFILE"); path != "" && round == 1 {
			writeHeapProfile(b, path)
		}
		m.gAll += runtime.NumGoroutine() - g0
		for _, tok := range tokens[1:] {
			t := d.of(tok)
			m.firstReq += float64(t.discovery) / float64(n-1)
			m.first304 += float64(t.notModified) / float64(n-1)
			m.watchR += float64(t.watches) / float64(n-1)
		}

		before := d.all()
		for range 10 {
			clk.Step(time.Minute)
			time.Sleep(10 * time.Millisecond)
		}
		after := d.all()
		for _, tok := range tokens {
			m.idle += diff(after[tok], before[tok]).discovery + diff(after[tok], before[tok]).watches
		}

		added := discoverytest.CRD{Group: fmt.Sprintf("round%d.example.com", round), Versions: []string{"v1"}, Kind: "Gadget"}
		if err := d.srv.AddCRD(added); err != nil {
			b.Fatal(err)
		}
		waitFor(b, "the watch's refresh", func() bool {
			_, ok := handles[0].Discovery().Current().Group(added.Group)
			return ok
		})
		before = d.all()
		gk := schema.GroupKind{Group: added.Group, Kind: added.Kind}
		start := time.Now()
		for i := 1; i < n; i += 2 {
			if _, err := handles[i].Mapper().RESTMapping(gk); err != nil {
				b.Fatalf("%s: %v", tokens[i], err)
			}
		}
		m.lookTime += time.Since(start) / time.Duration(n/2)
		after = d.all()
		for i := 1; i < n; i++ {
			sent := diff(after[tokens[i]], before[tokens[i]])
			if i%2 == 1 {
				m.lookReq += float64(sent.discovery) / float64(n/2)
				m.lookDocs += float64(sent.documents) / float64(n/2)
			} else {
				m.notLook += float64(sent.discovery + sent.watches)
			}
		}
		for _, h := range handles {
			h.Release()
		}
		waitWatchStopped(b)
	}
	k := float64(b.N)
	one, _, _ := liveheap.Spread(ones)
	all, _, _ := liveheap.Spread(alls)
	b.ReportMetric(one/(1<<20), "heap-MiB/1-identity")
	b.ReportMetric(all/(1<<20), "heap-MiB/all")
	med, lo, hi := liveheap.Spread(ratios)
	b.ReportMetric(med, "heap-x-one")
	b.ReportMetric(lo, "heap-x-one-min")
	b.ReportMetric(hi, "heap-x-one-max")
	med1, _, _ := liveheap.Spread(ratios1)
	b.ReportMetric(med1, "heap-x-one-1-lookup")
	b.ReportMetric(float64(m.gAll-m.g1)/k, "goroutines-over-one")
	b.ReportMetric(m.firstReq/k, "first-use-req/other")
	b.ReportMetric(m.first304/k, "first-use-304s/other")
	b.ReportMetric(m.watchR/k, "watch-req/other")
	b.ReportMetric(float64(m.idle)/k, "idle-req/10min")
	b.ReportMetric(m.lookReq/k, "change-req/looker")
	b.ReportMetric(m.lookDocs/k, "change-docs/looker")
	b.ReportMetric(float64(m.lookTime.Microseconds())/k, "change-lookup-µs")
	b.ReportMetric(m.notLook/k, "idle-after-change-req")
}

// writeHeapProfile writes the heap profile as of the last GC to path.
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
