package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// largeAPIService is an APIService whose spec holds pad bytes of caBundle
// and pad bytes of a field discovery does not read, with labels, a
// service's and a condition's field and managed fields beside what
// discovery reads.
func largeAPIService(i, pad int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(largeAPIServiceJSON(i, strings.Repeat("A", pad))); err != nil {
		panic(err)
	}
	return u
}

func largeAPIServiceJSON(i int, padding string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",`+
		`"metadata":{"name":"v1.g%d.example.com","uid":"u%d","resourceVersion":"%d","labels":{"team":"a"},"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},`+
		`"spec":{"group":"g%d.example.com","version":"v1","service":{"namespace":"ns","name":"svc","port":443,"extra":"x"},"caBundle":"%s","groupPriorityMinimum":1000,"versionPriority":15,"insecureSkipTLSVerify":false,"padding":"%s"},`+
		`"status":{"conditions":[{"type":"Available","status":"True","message":"unreachable"},{"type":"Other","status":"False"}]}}`,
		i, i, i+2, i, padding, padding)
}

// An APIService's slim form keeps what decides discovery, and nothing of
// the bytes of its spec that discovery does not read (its caBundle, a
// field a server adds); each slim form is its own fixed point, so that
// slimming it again, in the informer's transform, changes nothing.
func TestSlimAPIService(t *testing.T) {
	in := largeAPIService(7, 1<<20)
	out := slimAPIService(in).(*unstructured.Unstructured)
	want := map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.g7.example.com", "uid": "u7", "resourceVersion": "9"},
		"spec": map[string]any{"group": "g7.example.com", "version": "v1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": "ns", "name": "svc", "port": int64(443)}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": "True"}}},
	}
	if !reflect.DeepEqual(out.Object, want) {
		t.Errorf("slim APIService:\n%#v\nwant\n%#v", out.Object, want)
	}
	if b, _ := json.Marshal(out); len(b) > 1024 {
		t.Errorf("the slim form of an APIService of 2 MiB is %d bytes", len(b))
	}
	if available(out) != "True" {
		t.Errorf("slim form's availability %q", available(out))
	}
	local := largeAPIService(1, 10)
	delete(local.Object["spec"].(map[string]any), "service")
	unstructured.RemoveNestedField(local.Object, "status")
	if s := slimAPIService(local).(*unstructured.Unstructured); s.Object["spec"].(map[string]any)["service"] != nil || s.Object["status"] != nil {
		t.Errorf("a local APIService without a condition: %#v", s.Object)
	}
	for name, tc := range map[string]struct {
		slim func(kruntime.Object) kruntime.Object
		in   kruntime.Object
	}{
		"APIService": {slimAPIService, in},
		"local":      {slimAPIService, local},
		"served":     {slimServed, in},
		"CRD": {slimCRD, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Generation: 2, Labels: map[string]string{"a": "b"}}}},
		"a status": {slimAPIService, &metav1.Status{Message: "m"}},
	} {
		once := tc.slim(tc.in)
		if twice := tc.slim(once); !reflect.DeepEqual(once, twice) {
			t.Errorf("%s: slimmed twice %#v, once %#v", name, twice, once)
		}
	}
	if s := slimServed(in).(*unstructured.Unstructured); len(s.Object) != 3 || s.GetName() != "v1.g7.example.com" {
		t.Errorf("a served API object's slim form %#v", s.Object)
	}

	// Slimmed as they arrive, before a watch-list's own store keeps them.
	fake := apiwatch.NewFakeWithChanSize(1, false)
	w := newObjectBound(slimAPIService).watch(fake, true, nil)
	fake.Add(largeAPIService(8, 1<<20))
	if e := <-w.ResultChan(); !reflect.DeepEqual(e.Object, slimAPIService(largeAPIService(8, 1))) {
		t.Errorf("a watch passed on %d bytes of an APIService", sizeOf(e.Object))
	}
	w.Stop()
}

// apiServiceServer answers the lists and watches of APIServices with n
// objects of pad bytes of spec each, written as they are sent (the
// server holds one of them at most): by a watch-list (the initial events,
// then the bookmark that ends them) where watchList, else by a list (a
// watch-list request is refused, as by a server without the feature).
type apiServiceServer struct {
	n, pad    int
	watchList bool
	lists     atomic.Int64
	streamed  atomic.Int64
}

func (s *apiServiceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/apis/apiregistration.k8s.io/v1/apiservices" {
		http.NotFound(w, r)
		return
	}
	padding := strings.Repeat("QUJD", s.pad/4) // base64, in caBundle and the padding field
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		if !s.watchList {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`)
			return
		}
		s.streamed.Add(1)
		for i := range s.n {
			fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", largeAPIServiceJSON(i, padding))
		}
		fmt.Fprintf(w, `{"type":"BOOKMARK","object":{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"resourceVersion":"%d","annotations":{%q:"true"}}}}`+"\n",
			s.n+2, metav1.InitialEventsAnnotationKey)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case q.Get("watch") == "true":
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		s.lists.Add(1)
		fmt.Fprintf(w, `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIServiceList","metadata":{"resourceVersion":"%d"},"items":[`, s.n+2)
		for i := range s.n {
			if i > 0 {
				fmt.Fprint(w, ",")
			}
			_, _ = w.Write(largeAPIServiceJSON(i, padding))
		}
		fmt.Fprint(w, "]}")
	}
}

// syncAPIServices runs the APIService informer against srv until it has
// synced, and returns its store's objects and the live heap then.
func syncAPIServices(tb testing.TB, srv http.Handler) (objects []any, heap uint64) {
	tb.Helper()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	dc, err := dynamic.NewForConfig(&rest.Config{Host: ts.URL})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := discovery.NewForHTTPClient(nil, ts.URL)
	if err != nil {
		tb.Fatal(err)
	}
	inf := informerFor(dc.Resource(apiServiceResource), dc, &unstructured.Unstructured{}, apiServiceResource, slimAPIService, newPacer(), newFollower(c).stream())
	ctx, cancel := context.WithCancel(tb.Context())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		tb.Fatal("the informer did not sync")
	}
	return inf.GetStore().List(), liveHeap()
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Many APIServices with large specs cost the watch a small heap, whether
// they come as a watch-list's initial events or as a list: what the
// informer keeps holds none of their spec's bytes but what discovery
// reads. With the spec kept (but its caBundle), 400 of 1 MiB took a
// process to 587 MB of RSS, 561 MB as a watch-list; here 16 of 2 x 128
// KiB, small enough to decode quickly, so the live heap is logged, and
// BenchmarkLargeAPIServices measures it at 400 of 1 MiB.
func TestLargeAPIServicesStaySmall(t *testing.T) {
	const n, pad = 16, 128 << 10
	for _, watchList := range []bool{true, false} {
		t.Run(fmt.Sprint("watch-list ", watchList), func(t *testing.T) {
			srv := &apiServiceServer{n: n, pad: pad, watchList: watchList}
			before := liveHeap()
			objects, after := syncAPIServices(t, srv)
			if watchList && (srv.streamed.Load() == 0 || srv.lists.Load() != 0) || !watchList && srv.lists.Load() == 0 {
				t.Fatalf("%d watch-lists, %d lists: not the path under test", srv.streamed.Load(), srv.lists.Load())
			}
			if len(objects) != n {
				t.Fatalf("%d objects in the store, want %d", len(objects), n)
			}
			for _, o := range objects {
				if b, _ := json.Marshal(o); len(b) > 1024 || strings.Contains(string(b), "QUJD") {
					t.Fatalf("the store holds %d bytes of an APIService (its padding: %v)", len(b), strings.Contains(string(b), "QUJD"))
				}
			}
			t.Logf("%d APIServices of 2 x %d KiB: live heap grew by %d KiB", n, pad>>10, (int64(after)-int64(before))>>10)
		})
	}
}

// BenchmarkLargeAPIServices syncs the APIService informer on 400
// APIServices of 1 MiB of spec each (512 KiB of caBundle, 512 KiB of a
// field discovery does not read) (KUBEATLAS_WATCH_BENCH_APISERVICES
// sets the number), and reports the live heap after it and the process's
// peak RSS:
//
//	go test -run '^$' -bench LargeAPIServices -benchtime 1x ./discovery/watch/
func BenchmarkLargeAPIServices(b *testing.B) {
	n := 400
	if v := os.Getenv("KUBEATLAS_WATCH_BENCH_APISERVICES"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			b.Fatal(err)
		}
	}
	for _, watchList := range []bool{true, false} {
		b.Run(fmt.Sprint("watch-list=", watchList), func(b *testing.B) {
			var heap uint64
			for b.Loop() {
				_, heap = syncAPIServices(b, &apiServiceServer{n: n, pad: 512 << 10, watchList: watchList})
			}
			b.ReportMetric(float64(heap)/(1<<20), "live-heap-MiB")
			b.ReportMetric(float64(peakRSS())/(1<<10), "peak-RSS-MiB")
		})
	}
}

// peakRSS is the process's peak resident set in KiB (VmHWM), 0 where /proc
// does not say.
func peakRSS() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int
			_, _ = fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb
		}
	}
	return 0
}
