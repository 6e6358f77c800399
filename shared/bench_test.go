package shared_test

import (
	"fmt"
	"net/http/httptest"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/shared"
)

// BenchmarkIdentities: 50 identities (bearer tokens) on one server with
// 1,000 CRDs, each with its client acquired and a lookup made, against
// one identity: the live heap each holds (after a GC), their ratio, and
// what each identity after the first sent (two conditional requests,
// answered 304).
func BenchmarkIdentities(b *testing.B) {
	srv, err := docserver.NewServer(docserver.WithCRDs(1000, 100))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	a := &authServer{url: ts.URL}
	gk := schema.GroupKind{Group: "g000.stress.example.com", Kind: "Widget0000"}
	// held acquires 50 identities' clients, each with a lookup made, on a
	// new registry, and returns the live heap above the registry's
	// baseline once the first is held and once all are held, and what the
	// 49 after the first sent.
	held := func(b *testing.B) (one, fifty uint64, requests, notModified int64) {
		r, err := shared.New(shared.WithLinger(0), shared.WithoutWatch())
		if err != nil {
			b.Fatal(err)
		}
		liveHeap := func() uint64 {
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			return ms.HeapAlloc
		}
		base := liveHeap()
		handles := make([]*shared.Handle, 50)
		for i := range handles {
			h, err := r.Acquire(a.config(fmt.Sprintf("tok-%d", i)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.Mapper().RESTMapping(gk); err != nil {
				b.Fatal(err)
			}
			handles[i] = h
			if i == 0 {
				one = liveHeap() - min(base, liveHeap())
				continue
			}
			st := h.Discovery().Stats()
			requests, notModified = requests+st.Requests, notModified+st.NotModified
		}
		fifty = liveHeap() - min(base, liveHeap())
		for _, h := range handles {
			h.Release()
		}
		return one, fifty, requests, notModified
	}
	held(b) // once before: what a process allocates once (encoders' caches, pools) is not counted
	var one, fifty uint64
	var requests, notModified int64
	for b.Loop() {
		h1, h50, req, nm := held(b)
		one, fifty = one+h1, fifty+h50
		requests, notModified = requests+req, notModified+nm
	}
	n := float64(b.N)
	b.ReportMetric(float64(one)/n/(1<<20), "heap-MiB/1-identity")
	b.ReportMetric(float64(fifty)/n/(1<<20), "heap-MiB/50-identities")
	b.ReportMetric(float64(fifty)/float64(max(one, 1)), "x-one-identity")
	b.ReportMetric(float64(requests)/n/49, "req/other-identity")
	b.ReportMetric(float64(notModified)/n/49, "304s/other-identity")
}
