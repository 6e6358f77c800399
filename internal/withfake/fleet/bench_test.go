package fleet_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/fleet"
)

// benchSize is a fleet to measure: clusters over 5 distinct surfaces of
// crds CRDs each.
type benchSize struct{ clusters, crds int }

// benchSizes are the fleets BenchmarkFleet measures: small by default, so
// that CI's one pass is quick; KUBEATLAS_FLEET_BENCH lists others
// ("1000x3000,10000x3000"). client-go is measured up to
// KUBEATLAS_FLEET_BENCH_CLIENTGO_MAX clusters (default 100: it holds a
// full copy per cluster, about 1.7 GiB at 100 clusters of 3,000 CRDs, so
// the README's 1000x3000 would want about 17 GiB; the README multiplies
// the 100 clusters' figure by 10).
func benchSizes(b *testing.B) (sizes []benchSize, clientGoMax int) {
	spec := os.Getenv("KUBEATLAS_FLEET_BENCH")
	if spec == "" {
		spec = "100x300"
	}
	for _, s := range strings.Split(spec, ",") {
		n, c, ok := strings.Cut(strings.TrimSpace(s), "x")
		clusters, err1 := strconv.Atoi(n)
		crds, err2 := strconv.Atoi(c)
		if !ok || err1 != nil || err2 != nil || clusters < 5 || crds < 10 {
			b.Fatalf("KUBEATLAS_FLEET_BENCH: %q is not CLUSTERSxCRDS (at least 5x10)", s)
		}
		sizes = append(sizes, benchSize{clusters, crds})
	}
	clientGoMax = 100
	if v := os.Getenv("KUBEATLAS_FLEET_BENCH_CLIENTGO_MAX"); v != "" {
		var err error
		if clientGoMax, err = strconv.Atoi(v); err != nil {
			b.Fatalf("KUBEATLAS_FLEET_BENCH_CLIENTGO_MAX: %v", err)
		}
	}
	return sizes, clientGoMax
}

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fakeFleet serves size.clusters clusters over 5 surfaces, under
// /k8s/clusters/<id> of one loopback server, as a fleet proxy does.
type fakeFleet struct {
	proxy *discoverytest.Fleet
	base  string
	ids   []string
}

func startFakeFleet(b *testing.B, size benchSize) fakeFleet {
	surfaces, err := discoverytest.DistinctSurfaces(5, size.crds, max(10, size.crds/10))
	if err != nil {
		b.Fatal(err)
	}
	ids := discoverytest.ClusterIDs(size.clusters)
	proxy, err := discoverytest.NewFleet(ids, surfaces)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(proxy)
	b.Cleanup(srv.Close)
	ff := fakeFleet{proxy: proxy, base: srv.URL, ids: ids}
	// The fake server serializes each surface's documents on the first
	// request for them, and keeps them: read each surface once, as
	// kubeatlas and as client-go do, before any heap is measured.
	seen := map[int]bool{}
	for _, id := range ids {
		if s := proxy.Cluster(id).Surface(); !seen[s] {
			seen[s] = true
			c, err := discovery.NewForHTTPClient(nil, ff.base+discoverytest.ClusterPath(id), discovery.WithJSONOnly())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Snapshot(context.Background()); err != nil {
				b.Fatal(err)
			}
			if _, _, err := cgdiscovery.NewDiscoveryClientForConfigOrDie(ff.config(id)).ServerGroupsAndResources(); err != nil {
				b.Fatal(err)
			}
			// And its OpenAPI root, which a cold start without a hint
			// probes (a real server keeps it; the fake builds every
			// group-version's document to hash it, seconds at 3,000 CRDs).
			resp, err := http.Get(ff.base + discoverytest.ClusterPath(id) + "/openapi/v3")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	return ff
}

func (ff fakeFleet) config(id string) *rest.Config {
	return &rest.Config{Host: ff.base + discoverytest.ClusterPath(id), QPS: -1}
}

// BenchmarkFleet measures, for each size, kubeatlas's fleet (without and
// with Like naming a cluster of the same surface) and client-go (a
// memory-cached discovery client and a deferred REST mapper per cluster)
// on the same fake fleet: a cold start of every cluster (ns/op), the body
// bytes the server sent, the heap held afterwards, an unchanged refresh
// round, and a round after one cluster changed.
func BenchmarkFleet(b *testing.B) {
	sizes, clientGoMax := benchSizes(b)
	for _, size := range sizes {
		ff := startFakeFleet(b, size)
		name := fmt.Sprintf("clusters=%d/crds=%d", size.clusters, size.crds)
		b.Run(name+"/kubeatlas", func(b *testing.B) { benchKubeatlas(b, ff, false) })
		b.Run(name+"/kubeatlas-like", func(b *testing.B) { benchKubeatlas(b, ff, true) })
		b.Run(name+"/one-cluster", func(b *testing.B) {
			one := fakeFleet{proxy: ff.proxy, base: ff.base, ids: ff.ids[:1]}
			benchKubeatlas(b, one, false)
		})
		// The clusters of one surface: their heap less one cluster's is
		// what each cluster costs of its own.
		b.Run(name+"/one-surface-like", func(b *testing.B) {
			var ids []string
			for _, id := range ff.ids {
				if ff.proxy.Cluster(id).Surface() == 0 {
					ids = append(ids, id)
				}
			}
			benchKubeatlas(b, fakeFleet{proxy: ff.proxy, base: ff.base, ids: ids}, true)
		})
		if size.clusters <= clientGoMax {
			b.Run(name+"/client-go", func(b *testing.B) { benchClientGo(b, ff) })
		}
	}
}

var deployments = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// changes names each benchmark's change of a cluster anew (the fake
// fleet lives across sub-benchmarks).
var changes int

// unchangedRounds is how many refresh rounds of an unchanged fleet are
// timed (a benchmark cannot nest testing.Benchmark: it would deadlock).
const unchangedRounds = 3

// rounds runs round unchangedRounds times and returns the mean duration.
func rounds(b *testing.B, round func()) time.Duration {
	b.Helper()
	start := time.Now()
	for range unchangedRounds {
		round()
	}
	return time.Since(start) / unchangedRounds
}

func benchKubeatlas(b *testing.B, ff fakeFleet, like bool) {
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		ff.proxy.ResetStats()
		before := heap()
		f, err := fleet.New()
		if err != nil {
			b.Fatal(err)
		}
		first := map[int]string{} // surface -> its first cluster
		for _, id := range ff.ids {
			var opts []fleet.ClusterOption
			s := ff.proxy.Cluster(id).Surface()
			if l, ok := first[s]; ok && like {
				opts = append(opts, fleet.WithLike(l))
			} else if !ok {
				first[s] = id
			}
			if _, err := f.Add(id, ff.config(id), opts...); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := f.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		for _, id := range ff.ids {
			if _, err := must(f.Cluster(id)).Mapper().RESTMapping(deployments.GroupKind(), deployments.Version); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cold := ff.proxy.Stats()
		ff.proxy.ResetStats() // its request logs are the fake server's, not the fleet's
		held := heap() - before
		st := f.Stats()
		b.ReportMetric(float64(cold.Bytes)/(1<<20), "cold-MiB-received")
		b.ReportMetric(float64(held)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(held)/float64(len(ff.ids))/1024, "heap-KiB/cluster")
		b.ReportMetric(float64(st.SurfaceHits), "cold-304-starts")
		b.ReportMetric(float64(st.Surfaces), "surfaces")

		perRound := rounds(b, func() {
			if err := f.Refresh(ctx); err != nil {
				b.Fatal(err)
			}
		})
		unchanged := ff.proxy.Stats()
		b.ReportMetric(float64(perRound)/1e6, "unchanged-round-ms")
		b.ReportMetric(float64(unchanged.Requests)/unchangedRounds/float64(len(ff.ids)), "unchanged-requests/cluster")
		b.ReportMetric(float64(unchanged.Requests-unchanged.NotModified), "unchanged-non-304s")

		// One cluster changes: its round costs its new /apis.
		changed := ff.proxy.Cluster(ff.ids[len(ff.ids)-1])
		changes++
		if err := changed.AddCRD(discoverytest.CRD{Group: "bench.example.com", Versions: []string{"v1"}, Kind: fmt.Sprintf("Change%d", changes)}); err != nil {
			b.Fatal(err)
		}
		ff.proxy.ResetStats()
		if err := f.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(ff.proxy.Stats().Bytes)/1024, "change-round-KiB")
		// Undone, so that the next benchmark sees five surfaces again (the
		// cluster keeps a server of its own, serving its surface's bytes).
		if err := changed.RemoveCRD("bench.example.com", strings.ToLower(fmt.Sprintf("Change%d", changes))+"s"); err != nil {
			b.Fatal(err)
		}
		runtime.KeepAlive(f)
		b.StartTimer()
	}
}

func benchClientGo(b *testing.B, ff fakeFleet) {
	type cluster struct {
		disc   cgdiscovery.CachedDiscoveryInterface
		mapper *cgrestmapper.DeferredDiscoveryRESTMapper
	}
	each := func(clusters []cluster, fn func(c cluster) error) {
		var wg sync.WaitGroup
		work := make(chan cluster)
		for range fleet.DefaultConcurrency {
			wg.Go(func() {
				for c := range work {
					if err := fn(c); err != nil {
						b.Error(err)
					}
				}
			})
		}
		for _, c := range clusters {
			work <- c
		}
		close(work)
		wg.Wait()
	}
	for b.Loop() {
		b.StopTimer()
		ff.proxy.ResetStats()
		before := heap()
		clusters := make([]cluster, len(ff.ids))
		for i, id := range ff.ids {
			d := memory.NewMemCacheClient(cgdiscovery.NewDiscoveryClientForConfigOrDie(ff.config(id)))
			clusters[i] = cluster{disc: d, mapper: cgrestmapper.NewDeferredDiscoveryRESTMapper(d)}
		}
		b.StartTimer()
		each(clusters, func(c cluster) error {
			_, err := c.mapper.RESTMapping(deployments.GroupKind(), deployments.Version)
			return err
		})
		b.StopTimer()
		cold := ff.proxy.Stats()
		ff.proxy.ResetStats()
		held := heap() - before
		b.ReportMetric(float64(cold.Bytes)/(1<<20), "cold-MiB-received")
		b.ReportMetric(float64(held)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(held)/float64(len(ff.ids))/1024, "heap-KiB/cluster")

		// client-go's refresh: Invalidate, then read again (the mapper's
		// Reset does the same).
		perRound := rounds(b, func() {
			each(clusters, func(c cluster) error {
				c.mapper.Reset()
				_, err := c.mapper.RESTMapping(deployments.GroupKind(), deployments.Version)
				return err
			})
		})
		unchanged := ff.proxy.Stats()
		b.ReportMetric(float64(perRound)/1e6, "unchanged-round-ms")
		b.ReportMetric(float64(unchanged.Requests)/unchangedRounds/float64(len(ff.ids)), "unchanged-requests/cluster")
		b.ReportMetric(float64(unchanged.Bytes)/unchangedRounds/(1<<20), "unchanged-round-MiB")
		runtime.KeepAlive(clusters)
		b.StartTimer()
	}
}
