package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	cgopenapi "k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
	atlastyped "github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// requestCounter counts a client's requests by URL path.
type requestCounter struct {
	mu    sync.Mutex
	paths map[string]int
}

func (r *requestCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			r.mu.Lock()
			if r.paths == nil {
				r.paths = map[string]int{}
			}
			r.paths[req.URL.Path]++
			r.mu.Unlock()
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

// documents is how many group-version documents (OpenAPI v3 paths other
// than the root) were requested since the last reset, and which.
func (r *requestCounter) documents() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	var paths []string
	for p, c := range r.paths {
		if strings.HasPrefix(p, "/openapi/v3/") {
			n += c
			paths = append(paths, p)
		}
	}
	return n, paths
}

func (r *requestCounter) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.paths {
		n += c
	}
	return n
}

func (r *requestCounter) reset() {
	r.mu.Lock()
	r.paths = nil
	r.mu.Unlock()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// peakHeap runs f and returns the peak of the live-and-garbage heap
// (runtime/metrics' /memory/classes/heap/objects:bytes, what the process's
// heap must hold), sampled every millisecond, above what it was after a GC
// before f.
func peakHeap(f func()) float64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		peak := base
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	return mb(<-done - base)
}

// benchTypedObjects is KUBEATLAS_BENCH_TYPED_OBJECTS, or 2264 (the
// kubectl apply of kubernetes/kubernetes#127095).
func benchTypedObjects() int {
	if v, err := strconv.Atoi(os.Getenv("KUBEATLAS_BENCH_TYPED_OBJECTS")); err == nil && v > 0 {
		return v
	}
	return 2264
}

// typedBenchKind is one kind of the typed benchmark's objects.
type typedBenchKind struct {
	gvr    schema.GroupVersionResource
	object func(name string) map[string]any
}

// typedBenchKinds are 10 built-in kinds and up to 40 of the bench CRDs'
// (the first n): 50 kinds with 3,000 CRDs.
func typedBenchKinds(n int) []typedBenchKind {
	meta := func(name string) map[string]any {
		return map[string]any{"name": name, "labels": map[string]any{"app": name}}
	}
	podSpec := map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "c", "image": "busybox", "args": []any{"sleep", "1"},
		"ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}}, "env": []any{map[string]any{"name": "A", "value": "a"}}}}}
	kinds := []typedBenchKind{
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(n), "data": map[string]any{"a": "1", "b": "2"}}
		}},
		{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": meta(n), "stringData": map[string]any{"a": "1"}}
		}},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": meta(n), "spec": map[string]any{"clusterIP": "None", "selector": map[string]any{"app": n},
				"ports": []any{map[string]any{"port": int64(80), "protocol": "TCP", "targetPort": "http"}}}}
		}},
		{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(n)}
		}},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(n),
				"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get", "list"}}}}
		}},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(n),
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": n},
				"subjects": []any{map[string]any{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}}}
		}},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(n), "spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"app": n}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": n}}, "spec": map[string]any{
					"containers": []any{map[string]any{"name": "c", "image": "busybox", "ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}}}}}}}}
		}},
		{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(n), "spec": map[string]any{"suspend": true, "template": map[string]any{"spec": podSpec}}}
		}},
		{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta(n), "spec": map[string]any{
				"podSelector": map[string]any{"matchLabels": map[string]any{"app": n}},
				"ingress":     []any{map[string]any{"ports": []any{map[string]any{"port": int64(80), "protocol": "TCP"}}}}}}
		}},
		{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, func(n string) map[string]any {
			return map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta(n), "spec": map[string]any{"holderIdentity": n, "leaseDurationSeconds": int64(15)}}
		}},
	}
	for i := range min(40, n) {
		group := fmt.Sprintf("g%03d.bench.kubeatlas.test", i/10)
		kind := fmt.Sprintf("Kind%04d", i)
		kinds = append(kinds, typedBenchKind{schema.GroupVersionResource{Group: group, Version: "v1", Resource: lower(kind) + "s"}, func(n string) map[string]any {
			spec := map[string]any{}
			for f := range 5 {
				spec[fmt.Sprintf("field%02d", f)] = map[string]any{"name": n, "enabled": true,
					"items": []any{map[string]any{"key": "a", "value": int64(1)}, map[string]any{"key": "b", "value": int64(2)}}}
			}
			return map[string]any{"apiVersion": group + "/v1", "kind": kind, "metadata": meta(n), "spec": spec}
		}})
	}
	return kinds
}

// createTypedBenchObjects applies benchTypedObjects objects spread over
// typedBenchKinds in the namespace "typed", as the field manager
// "bench", and returns them as read back (with their managed fields).
func createTypedBenchObjects(b *testing.B, c *cluster, n int) []*unstructured.Unstructured {
	b.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		b.Fatal(err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "typed"}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	kinds := typedBenchKinds(n)
	total := benchTypedObjects()
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 8 {
		wg.Go(func() {
			for i := range work {
				k := kinds[i%len(kinds)]
				u := &unstructured.Unstructured{Object: k.object(fmt.Sprintf("o%04d", i))}
				if _, err := dyn.Resource(k.gvr).Namespace("typed").Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "bench"}); err != nil {
					failed.Store(fmt.Errorf("apply %s %s: %w", k.gvr, u.GetName(), err))
				}
			}
		})
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	var objects []*unstructured.Unstructured
	for _, k := range kinds {
		l, err := dyn.Resource(k.gvr).Namespace("typed").List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range l.Items {
			objects = append(objects, &l.Items[i])
		}
	}
	if len(objects) != total {
		b.Fatalf("%d objects read back, %d applied", len(objects), total)
	}
	b.Logf("%d objects of %d kinds", len(objects), len(kinds))
	return objects
}

// BenchmarkTypedRealServer: openapi3/typed and client-go side by side on
// the real kube-apiserver v1.36.3 with KUBEATLAS_BENCH_CRDS CRDs (default
// 200; issue 35's targets are for 3,000) and KUBEATLAS_BENCH_TYPED_OBJECTS
// objects (default 2264) of 50 kinds (10 built-in, 40 CRDs), applied by
// the field manager "bench":
//
//   - first-typed: a new client's first typed value of one CRD kind's
//     object: ours (openapi3.New, typed.New, ObjectToTyped) against
//     client-go's openapi.NewTypeConverter (every v3 document) and
//     ObjectToTyped.
//   - first-extract: a new client's first Extract of that object: ours
//     (Converter.Extractor) against client-go's NewUnstructuredExtractor
//     (the v2 document).
//   - extract-all: a new client extracting every object.
//   - schema-change: one CRD's schema changes; our converter (kept) extracts
//     every object again: the documents it requests and the kinds whose
//     types were built anew are counted (both must be that CRD's alone).
//   - warm-first-typed: a new process's first typed value from a warm disk
//     cache (a new client, disk cache and documents table), against
//     parse-one-document: json.Unmarshal of that one document into
//     spec3.OpenAPI, as client-go parses each.
//
// peak-heap-MB is the peak heap during an iteration above the heap
// before it (peakHeap); doc-requests the OpenAPI documents requested in
// an iteration.
//
//	KUBEATLAS_KUBE_APISERVER=/path/to/kube-apiserver KUBEATLAS_BENCH_CRDS=3000 \
//	  go test -run '^$' -bench TypedRealServer -benchtime 3x -timeout 60m
func BenchmarkTypedRealServer(b *testing.B) {
	c := startCluster(b)
	n := createBenchCRDs(b, c)
	objects := createTypedBenchObjects(b, c, n)
	ctx := context.Background()
	var first *unstructured.Unstructured
	for _, o := range objects {
		if o.GetKind() == "Kind0000" {
			first = o
			break
		}
	}
	firstGVK := first.GroupVersionKind()

	oursClient := func(b *testing.B, counter *requestCounter, opts ...openapi3.Option) (*atlastyped.Converter, *openapi3.Client) {
		cfg := c.config
		if counter != nil {
			cfg = counter.wrap(cfg)
		}
		oc, err := openapi3.New(cfg, opts...)
		if err != nil {
			b.Fatal(err)
		}
		conv, err := atlastyped.New(oc)
		if err != nil {
			b.Fatal(err)
		}
		return conv, oc
	}
	ours := func(b *testing.B, counter *requestCounter, opts ...openapi3.Option) *atlastyped.Converter {
		conv, _ := oursClient(b, counter, opts...)
		return conv
	}
	// client-go's discovery client bounds a request by 32 s unless the
	// config sets a timeout; the server's first OpenAPI v2 document after
	// thousands of CRDs takes longer than that to build, so the v2
	// document is requested once (warmV2) and client-go given more time:
	// what is measured is the client's work, not the server's build.
	warmV2(b, c)
	cgConfig := rest.CopyConfig(c.config)
	cgConfig.Timeout = 10 * time.Minute
	clientGoDiscovery := func(b *testing.B) *cgdiscovery.DiscoveryClient {
		dc, err := cgdiscovery.NewDiscoveryClientForConfig(cgConfig)
		if err != nil {
			b.Fatal(err)
		}
		return dc
	}
	// run measures f's time (the benchmark's) and peak heap in each
	// iteration, and reports the largest peak.
	results := map[string][2]float64{}
	run := func(name string, f func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			var peak float64
			start := time.Now()
			for b.Loop() {
				peak = max(peak, peakHeap(func() { f(b) }))
			}
			b.ReportMetric(peak, "peak-heap-MB")
			results[name] = [2]float64{float64(time.Since(start).Microseconds()) / 1000 / float64(b.N), peak}
		})
	}

	run("first-typed/kubeatlas", func(b *testing.B) {
		if _, err := ours(b, nil).ObjectToTyped(first); err != nil {
			b.Fatal(err)
		}
	})
	run("first-typed/client-go", func(b *testing.B) {
		tc, err := cgopenapi.NewTypeConverter(clientGoDiscovery(b).OpenAPIV3(), false)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tc.ObjectToTyped(first); err != nil {
			b.Fatal(err)
		}
	})
	run("first-extract/kubeatlas", func(b *testing.B) {
		u, err := ours(b, nil).Extractor().Extract(first, "bench")
		if err != nil || len(u.Object) < 4 {
			b.Fatalf("%v %v", u, err)
		}
	})
	run("first-extract/client-go", func(b *testing.B) {
		ex, err := metav1ac.NewUnstructuredExtractor(clientGoDiscovery(b))
		if err != nil {
			b.Fatal(err)
		}
		if u, err := ex.Extract(first, "bench"); err != nil || len(u.Object) < 4 {
			b.Fatalf("%v %v", u, err)
		}
	})
	extractAll := func(b *testing.B, extract func(*unstructured.Unstructured, string) (*unstructured.Unstructured, error)) {
		for _, o := range objects {
			if _, err := extract(o, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	}
	run("extract-all/kubeatlas", func(b *testing.B) {
		extractAll(b, ours(b, nil).Extractor().Extract)
	})
	run("extract-all/client-go", func(b *testing.B) {
		ex, err := metav1ac.NewUnstructuredExtractor(clientGoDiscovery(b))
		if err != nil {
			b.Fatal(err)
		}
		extractAll(b, ex.Extract)
	})

	b.Run("schema-change/kubeatlas", func(b *testing.B) {
		counter := &requestCounter{}
		conv, oc := oursClient(b, counter, openapi3.WithMaxAge(time.Second))
		extractAll(b, conv.Extractor().Extract)
		dyn, err := dynamic.NewForConfig(c.config)
		if err != nil {
			b.Fatal(err)
		}
		changed := openapi3.PathFor(firstGVK.GroupVersion())
		var docs, rebuilt float64
		for i := 0; b.Loop(); i++ {
			types := map[schema.GroupVersionKind]any{}
			for _, o := range objects {
				if _, ok := types[o.GroupVersionKind()]; !ok {
					t, err := conv.Type(ctx, o.GroupVersionKind())
					if err != nil {
						b.Fatal(err)
					}
					types[o.GroupVersionKind()] = t.Schema
				}
			}
			b.StopTimer()
			before := paths(b, oc)[changed]
			changeBenchCRD(b, dyn, fmt.Sprintf("added%d", i))
			// The client's root, past its max age, is read again in the
			// background: wait until it has the new hash.
			eventually(b, "the root gives "+changed+" a new hash", 2*time.Minute, func() (bool, string) {
				return paths(b, oc)[changed] != before, "not yet"
			})
			counter.reset()
			b.StartTimer()
			extractAll(b, conv.Extractor().Extract)
			b.StopTimer()
			n, paths := counter.documents()
			if n != 1 || !strings.HasSuffix(paths[0], changed) {
				b.Errorf("after %s changed: %d documents requested: %v", changed, n, paths)
			}
			docs += float64(n)
			for gvk, s := range types {
				t, err := conv.Type(ctx, gvk)
				if err != nil {
					b.Fatal(err)
				}
				if t.Schema != s {
					rebuilt++
					if openapi3.PathFor(gvk.GroupVersion()) != changed {
						b.Errorf("%s's types were built anew; only %s changed", gvk, changed)
					}
				}
			}
			b.StartTimer()
		}
		b.ReportMetric(docs/float64(b.N), "doc-requests")
		b.ReportMetric(rebuilt/float64(b.N), "kinds-rebuilt")
	})

	// A warm disk cache with the first kind's document.
	dir := b.TempDir()
	disk := func(b *testing.B) openapi3.Option {
		d, err := diskcache.Open(dir, c.url)
		if err != nil {
			b.Fatal(err)
		}
		return openapi3.WithDiskCache(d)
	}
	if _, err := ours(b, nil, disk(b)).ObjectToTyped(first); err != nil {
		b.Fatal(err)
	}
	b.Run("warm-first-typed/kubeatlas", func(b *testing.B) {
		var docs float64
		for b.Loop() {
			counter := &requestCounter{}
			conv := ours(b, counter, disk(b), openapi3.WithDocuments(openapi3.NewDocuments()))
			if _, err := conv.ObjectToTyped(first); err != nil {
				b.Fatal(err)
			}
			n, paths := counter.documents()
			if n != 0 {
				b.Errorf("warm: %d documents requested: %v", n, paths)
			}
			docs += float64(n)
		}
		b.ReportMetric(docs/float64(b.N), "doc-requests")
	})
	body := documentBody(b, c, firstGVK.GroupVersion())
	b.Run("warm-first-typed/parse-one-document", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var doc spec3.OpenAPI
			if err := json.Unmarshal(body, &doc); err != nil {
				b.Fatal(err)
			}
		}
	})

	for _, name := range []string{"first-typed", "first-extract", "extract-all"} {
		o, g := results[name+"/kubeatlas"], results[name+"/client-go"]
		if o[0] > 0 && g[0] > 0 {
			b.Logf("%s: kubeatlas %.1f ms, %.1f MB peak heap; client-go %.1f ms, %.1f MB: time 1/%.0f, heap 1/%.0f", name, o[0], o[1], g[0], g[1], g[0]/o[0], g[1]/max(o[1], 0.01))
		}
	}
}

// paths is oc's root now (openapi3.Client.Paths).
func paths(b *testing.B, oc *openapi3.Client) map[string]string {
	b.Helper()
	p, err := oc.Paths(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// changeBenchCRD adds the field named to the spec of the first bench CRD
// (Kind0000) in every version it serves.
func changeBenchCRD(b *testing.B, dyn dynamic.Interface, field string) {
	b.Helper()
	name := "kind0000s.g000.bench.kubeatlas.test"
	crd, err := dyn.Resource(crdGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if err := unstructured.SetNestedField(v.(map[string]any), map[string]any{"type": "string"},
			"schema", "openAPIV3Schema", "properties", "spec", "properties", field); err != nil {
			b.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		b.Fatal(err)
	}
	if _, err := dyn.Resource(crdGVR).Update(context.Background(), crd, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// warmV2 requests the server's OpenAPI v2 document (in protobuf, as
// client-go does) until the server answers it (with 3,000 CRDs its first
// build outlasts the server's own 60 s request timeout: 504s, or a
// dropped connection, while it goes on building), and logs how long that
// took.
func warmV2(b *testing.B, c *cluster) {
	b.Helper()
	cfg := rest.CopyConfig(c.config)
	cfg.Timeout = 10 * time.Minute
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest(http.MethodGet, c.url+"/openapi/v2", nil)
		req.Header.Set("Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
		status := ""
		resp, err := hc.Do(req)
		if err == nil {
			var n int64
			n, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				b.Logf("the server's first OpenAPI v2 document: %.1f MB after %v (%d requests)", float64(n)/1e6, time.Since(start).Round(time.Millisecond), attempt)
				return
			}
			status = resp.Status
		}
		// A connection the server drops while it builds (seen on a loaded
		// machine: "http2: client connection lost") is tried again too.
		if time.Since(start) > 15*time.Minute {
			b.Fatalf("/openapi/v2: %v %s after %v", err, status, time.Since(start))
		}
	}
}

// documentBody is the JSON of gv's OpenAPI v3 document as served.
func documentBody(b *testing.B, c *cluster, gv schema.GroupVersion) []byte {
	b.Helper()
	hc, err := rest.HTTPClientFor(c.config)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := hc.Get(c.url + "/openapi/v3/" + openapi3.PathFor(gv))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %v %s", gv, err, resp.Status)
	}
	return body
}
