package openapi3_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/disk"
	"k8s.io/client-go/openapi"
	cgopenapi3 "k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// allSpecs is client-go's way to every document: openapi3.Root.GVSpec for
// each group-version, which parses each whole into spec3 (and, on a client
// without a disk cache, reads the root again for each).
func allSpecs(b *testing.B, client openapi.Client) {
	root := cgopenapi3.NewRoot(client)
	gvs, err := root.GroupVersions()
	if err != nil {
		b.Fatal(err)
	}
	for _, gv := range gvs {
		if _, err := root.GVSpec(gv); err != nil {
			b.Fatal(err)
		}
	}
}

// cachedOpenAPIV3 is client-go's OpenAPI v3 client on a disk cache in dir,
// as kubectl builds it.
func cachedOpenAPIV3(b *testing.B, cfg *rest.Config, dir string) openapi.Client {
	cdc, err := disk.NewCachedDiscoveryClientForConfig(cfg, filepath.Join(dir, "discovery"), filepath.Join(dir, "http"), 6*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	return cdc.OpenAPIV3()
}

// Every group-version document, ready to be asked for schemas, side by
// side with client-go's openapi3.Root, at 3000 CRDs (about 470 documents):
// kubeatlas's FetchAll (each document read and indexed; a schema is parsed
// when asked for), client-go's Root.GVSpec for every group-version (which
// parses each whole document into spec3, and without a disk cache reads the
// root again for each). BenchmarkAllDocumentsParsed parses everything in
// both.
//
//	go test -run '^$' -bench AllDocuments -benchmem -benchtime 3x ./openapi3/
func BenchmarkAllDocuments(b *testing.B) {
	klog.LogToStderr(false)
	srv, base := discoverytest.Start(b, discoverytest.WithCRDs(3000, 250))
	cfg := &rest.Config{Host: base, QPS: -1}
	kubeatlas := func(b *testing.B, dc *diskcache.Cache) {
		var opts []openapi3.Option
		if dc != nil {
			opts = append(opts, openapi3.WithDiskCache(dc))
		}
		if _, err := newClient(b, base, opts...).FetchAll(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(srv.Stats().Requests)/float64(b.N), "req/op")
		srv.ResetRequests()
	}
	kubeatlas(b, nil) // the server generates its documents once, here
	srv.ResetRequests()

	b.Run("no-disk-cache/kubeatlas", func(b *testing.B) {
		for b.Loop() {
			kubeatlas(b, nil)
		}
		report(b)
	})
	b.Run("no-disk-cache/client-go", func(b *testing.B) {
		for b.Loop() {
			allSpecs(b, cgdiscovery.NewDiscoveryClientForConfigOrDie(cfg).OpenAPIV3())
		}
		report(b)
	})
	b.Run("cold-disk-cache/kubeatlas", func(b *testing.B) {
		for b.Loop() {
			dc, err := diskcache.Open(b.TempDir(), base)
			if err != nil {
				b.Fatal(err)
			}
			kubeatlas(b, dc)
		}
		report(b)
	})
	b.Run("cold-disk-cache/client-go", func(b *testing.B) {
		for b.Loop() {
			allSpecs(b, cachedOpenAPIV3(b, cfg, b.TempDir()))
		}
		report(b)
	})
	warm := b.TempDir()
	b.Run("warm-disk-cache/kubeatlas", func(b *testing.B) {
		dc, _ := diskcache.Open(warm, base)
		kubeatlas(b, dc)
		srv.ResetRequests()
		for b.Loop() {
			dc, err := diskcache.Open(warm, base)
			if err != nil {
				b.Fatal(err)
			}
			kubeatlas(b, dc)
		}
		report(b)
	})
	// Every document merged into one (client-go has no counterpart).
	b.Run("warm-disk-cache/kubeatlas-aggregate", func(b *testing.B) {
		dc, _ := diskcache.Open(warm, base)
		docs, err := newClient(b, base, openapi3.WithDiskCache(dc)).FetchAll(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := openapi3.Aggregate(docs); err != nil {
				b.Fatal(err)
			}
		}
	})
	warmCG := b.TempDir()
	b.Run("warm-disk-cache/client-go", func(b *testing.B) {
		allSpecs(b, cachedOpenAPIV3(b, cfg, warmCG))
		srv.ResetRequests()
		for b.Loop() {
			allSpecs(b, cachedOpenAPIV3(b, cfg, warmCG))
		}
		report(b)
	})
}

// BenchmarkAllDocumentsParsed: every document read and parsed whole into
// spec3 with a disk cache (kubeatlas's Document.OpenAPI, one after another
// as client-go's Root.GVSpec does), and every schema parsed one by one
// (Document.Schema), which is what touching every kind costs.
func BenchmarkAllDocumentsParsed(b *testing.B) {
	klog.LogToStderr(false)
	_, base := discoverytest.Start(b, discoverytest.WithCRDs(3000, 250))
	cfg := &rest.Config{Host: base, QPS: -1}
	warmKA, warmCG := b.TempDir(), b.TempDir()
	kubeatlas := func(b *testing.B, root string, each func(*openapi3.Document) error) {
		dc, err := diskcache.Open(root, base)
		if err != nil {
			b.Fatal(err)
		}
		docs, err := newClient(b, base, openapi3.WithDiskCache(dc)).FetchAll(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range docs {
			if err := each(d); err != nil {
				b.Fatal(err)
			}
		}
	}
	whole := func(d *openapi3.Document) error { _, err := d.OpenAPI(); return err }
	bySchema := func(d *openapi3.Document) error {
		for _, name := range d.SchemaNames() {
			if _, err := d.Schema(name); err != nil {
				return err
			}
		}
		return nil
	}
	clientGo := func(b *testing.B, dir string) { allSpecs(b, cachedOpenAPIV3(b, cfg, dir)) }
	kubeatlas(b, warmKA, whole)
	clientGo(b, warmCG)
	b.Run("cold-disk-cache/kubeatlas", func(b *testing.B) {
		for b.Loop() {
			kubeatlas(b, b.TempDir(), whole)
		}
	})
	b.Run("cold-disk-cache/client-go", func(b *testing.B) {
		for b.Loop() {
			clientGo(b, b.TempDir())
		}
	})
	b.Run("warm-disk-cache/kubeatlas", func(b *testing.B) {
		for b.Loop() {
			kubeatlas(b, warmKA, whole)
		}
	})
	b.Run("warm-disk-cache/kubeatlas-by-schema", func(b *testing.B) {
		for b.Loop() {
			kubeatlas(b, warmKA, bySchema)
		}
	})
	// What server-side apply tooling wants: every schema, by name, in one
	// map (managedfields.NewTypeConverter's input): merged, then parsed on
	// all cores. client-go's row above is the same work (GVSpec parses
	// every schema of every document).
	b.Run("warm-disk-cache/kubeatlas-aggregate-schemas", func(b *testing.B) {
		for b.Loop() {
			dc, err := diskcache.Open(warmKA, base)
			if err != nil {
				b.Fatal(err)
			}
			docs, err := newClient(b, base, openapi3.WithDiskCache(dc)).FetchAll(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			agg, err := openapi3.Aggregate(docs)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := agg.Schemas(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm-disk-cache/client-go", func(b *testing.B) {
		for b.Loop() {
			clientGo(b, warmCG)
		}
	})
}

// BenchmarkExplain: what `kubectl explain deployment.spec.template.spec.
// containers` costs a new process with a warm disk cache, at 3000 CRDs:
// kubeatlas reads the root and one cached document, indexes it and parses
// the few schemas on the path; client-go's openapi3.Root (as kubectl uses
// it) reads the root and parses the whole apps/v1 document.
func BenchmarkExplain(b *testing.B) {
	klog.LogToStderr(false)
	_, base := discoverytest.Start(b, discoverytest.WithCRDs(3000, 250))
	cfg := &rest.Config{Host: base, QPS: -1}
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	warmKA, warmCG := b.TempDir(), b.TempDir()
	kubeatlas := func(b *testing.B) {
		dc, err := diskcache.Open(warmKA, base)
		if err != nil {
			b.Fatal(err)
		}
		s, err := newClient(b, base, openapi3.WithDiskCache(dc)).Kind(context.Background(), gvk)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Field("spec", "template", "spec", "containers"); err != nil {
			b.Fatal(err)
		}
	}
	clientGo := func(b *testing.B) {
		doc, err := cgopenapi3.NewRoot(cachedOpenAPIV3(b, cfg, warmCG)).GVSpec(gvk.GroupVersion())
		if err != nil {
			b.Fatal(err)
		}
		if doc.Components.Schemas["io.k8s.api.apps.v1.Deployment"] == nil {
			b.Fatal("no Deployment")
		}
	}
	kubeatlas(b)
	clientGo(b)
	b.Run("kubeatlas", func(b *testing.B) {
		for b.Loop() {
			kubeatlas(b)
		}
	})
	b.Run("client-go", func(b *testing.B) {
		for b.Loop() {
			clientGo(b)
		}
	})
}

// BenchmarkRealAppsV1: the apps/v1 document of a real kube-apiserver
// v1.36.3 as recorded, with every description emptied (223 KB of the 711 KB
// it served; every path, schema and reference kept: see realDocuments),
// from bytes to the schema of deployment.spec.template.spec.containers:
// kubeatlas indexes it and parses the schemas on the path; client-go's
// openapi3.Root.GVSpec parses it whole with json.Unmarshal.
func BenchmarkRealAppsV1(b *testing.B) {
	// The core module's testdata (openapi3/testdata, where its tests read
	// the recorded documents); this module is never published apart from
	// the repository.
	f, err := os.Open(filepath.Join("..", "..", "..", "openapi3", "testdata", "k8s-v1.36.3", "openapi", "v3", "apis", "apps", "v1.json.gz"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("kubeatlas", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			d, err := openapi3.NewDocument("apis/apps/v1", "", body)
			if err != nil {
				b.Fatal(err)
			}
			s, err := d.Kind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := s.Field("spec", "template", "spec", "containers"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client-go", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var doc spec3.OpenAPI
			if err := json.Unmarshal(body, &doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkChangedRound: an OpenAPI round (the root, then every document,
// as FetchAll reads them) at ~400 group-versions, when every document is
// current (warm) and after five of them changed (changed), by a new
// process on a warm disk cache (new-process) and by a long-lived client
// (long-lived: RefreshRoot, then FetchAll). A warm and a changed round run
// in turn, so that both see the same load on the shared cores; each case
// reports the medians of its warm rounds, its changed rounds and each
// pair's difference (one op is one pair). The comparisons, in the same
// run: five plain GETs of changed documents, each body kept in memory as
// the client keeps it, one after another (five-fetches) and all at once
// (five-fetches-parallel, as a round makes them), and the five fetched as
// documents by a client with a disk cache, one after another
// (five-documents: GET, SHA-512, stored, indexed) and all at once
// (five-documents-parallel). A changed round should
// cost at most warm plus the five fetches. Each changed round changes five
// other group-versions; the server builds their documents (its root needs
// their hashes) before the timer starts, as a real server keeps its
// documents built, and the server's garbage is collected before it starts
// too.
//
//	go test -run '^$' -bench ChangedRound -benchtime 20x ./internal/withfake/openapi3/
//
// It needs an iteration count (-benchtime Nx): most of an op is the
// server's untimed work (building five documents over 3,000 CRDs), so a
// time-based -benchtime, such as the default 1s, runs each case for
// minutes (74 to 293 s were seen) and the whole for a quarter of an hour.
// Without one it skips and says so; .ci/run runs it with -benchtime 1x.
func BenchmarkChangedRound(b *testing.B) {
	if bt := flag.Lookup("test.benchtime"); bt == nil || !strings.HasSuffix(bt.Value.String(), "x") {
		b.Skip("BenchmarkChangedRound runs for minutes with a time-based -benchtime (its ops are mostly untimed server work): give an iteration count, e.g. -benchtime 20x (several minutes on 2 cores)")
	}
	klog.LogToStderr(false)
	srv, base := discoverytest.Start(b, discoverytest.WithCRDs(3000, 210))
	dir := b.TempDir()
	round := func(b *testing.B) int {
		dc, err := diskcache.Open(dir, base)
		if err != nil {
			b.Fatal(err)
		}
		docs, err := newClient(b, base, openapi3.WithDiskCache(dc)).FetchAll(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		return len(docs)
	}
	n := round(b)
	var crds []schema.GroupVersion
	for _, gv := range srv.Backends()[0].GroupVersions() {
		if strings.HasSuffix(gv.Group, ".stress.example.com") {
			crds = append(crds, gv)
		}
	}
	next := 0
	// change changes five group-versions, lets the server build their
	// documents, and returns their URLs.
	change := func(b *testing.B) [][2]string {
		b.StopTimer()
		defer b.StartTimer()
		var changed []schema.GroupVersion
		for range 5 {
			gv := crds[next%len(crds)]
			next++
			if err := srv.ChangeSchema(gv); err != nil {
				b.Fatal(err)
			}
			changed = append(changed, gv)
		}
		paths, err := newClient(b, base).Paths(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		var urls [][2]string // path, URL
		for _, gv := range changed {
			urls = append(urls, [2]string{openapi3.PathFor(gv), paths[openapi3.PathFor(gv)]})
		}
		// The server's garbage is not the round's to collect.
		runtime.GC()
		return urls
	}
	// collect collects garbage before a timed round, as change does: a
	// collection the server's garbage brings on is not the round's.
	collect := func(b *testing.B) {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
	}
	// paired runs a warm round and a changed round in turn, so that both
	// see the same load (the two cores are shared), and reports the
	// medians of each and of each pair's difference.
	paired := func(b *testing.B, round func(*testing.B)) {
		var warm, changed, diff medianRound
		for b.Loop() {
			collect(b)
			w := warm.time(func() { round(b) })
			change(b)
			c := changed.time(func() { round(b) })
			diff = append(diff, c-w)
		}
		warm.reportAs(b, "warm-ms")
		changed.reportAs(b, "changed-ms")
		diff.reportAs(b, "changed-warm-ms")
	}
	b.Run("new-process", func(b *testing.B) {
		paired(b, func(b *testing.B) { round(b) })
		b.ReportMetric(float64(n), "documents")
	})
	dc, err := diskcache.Open(dir, base)
	if err != nil {
		b.Fatal(err)
	}
	lived := newClient(b, base, openapi3.WithDiskCache(dc))
	liveRound := func(b *testing.B) {
		if _, err := lived.RefreshRoot(context.Background()); err != nil {
			b.Fatal(err)
		}
		if _, err := lived.FetchAll(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	liveRound(b)
	b.Run("long-lived", func(b *testing.B) { paired(b, liveRound) })
	// What a changed document costs on its own: the five fetched by a
	// client through the warm disk cache (GET, SHA-512, stored in place of
	// the group-version's older document, indexed), one after another.
	other, err := diskcache.Open(dir, base)
	if err != nil {
		b.Fatal(err)
	}
	fetcher := newClient(b, base, openapi3.WithDiskCache(other))
	b.Run("five-documents", func(b *testing.B) {
		var m medianRound
		for b.Loop() {
			urls := change(b)
			m.time(func() {
				for _, pu := range urls {
					if _, err := fetcher.DocumentAt(context.Background(), pu[0], pu[1]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		m.report(b)
	})
	// The same five at once, as a round fetches them: what the changes
	// themselves cost the client, verified and stored.
	// atOnce times fn on five changed documents' paths and URLs at once.
	atOnce := func(b *testing.B, fn func(path, url string) error) {
		var m medianRound
		for b.Loop() {
			urls := change(b)
			m.time(func() {
				var g errgroup.Group
				for _, pu := range urls {
					g.Go(func() error { return fn(pu[0], pu[1]) })
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			})
		}
		m.report(b)
	}
	b.Run("five-documents-parallel", func(b *testing.B) {
		atOnce(b, func(path, url string) error {
			_, err := fetcher.DocumentAt(context.Background(), path, url)
			return err
		})
	})
	// fetch GETs u and keeps its body, in a buffer sized from its
	// Content-Length, as the client reads a document.
	fetch := func(u string) error {
		resp, err := http.Get(base + u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		buf := bytes.NewBuffer(make([]byte, 0, max(resp.ContentLength, 0)+1))
		if _, err := buf.ReadFrom(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d %v", u, resp.StatusCode, err)
		}
		return nil
	}
	b.Run("five-fetches", func(b *testing.B) {
		var m medianRound
		for b.Loop() {
			urls := change(b)
			m.time(func() {
				for _, pu := range urls {
					if err := fetch(pu[1]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		m.report(b)
	})
	// The five GETs at once, as a round makes them (FetchAll runs up to
	// DefaultParallelism at a time): the like-for-like budget.
	b.Run("five-fetches-parallel", func(b *testing.B) {
		atOnce(b, func(_, url string) error { return fetch(url) })
	})
}

// medianRound collects the times of a benchmark's rounds and reports their
// median (ms-median): on two cores shared with other work, one slow round
// moves the mean (ns/op) by more than the effects measured here.
type medianRound []time.Duration

func (m *medianRound) time(f func()) time.Duration {
	start := time.Now()
	f()
	d := time.Since(start)
	*m = append(*m, d)
	return d
}

func (m medianRound) report(b *testing.B) { m.reportAs(b, "ms-median") }

func (m medianRound) reportAs(b *testing.B, unit string) {
	if len(m) == 0 {
		return
	}
	slices.Sort(m)
	b.ReportMetric(float64(m[len(m)/2])/float64(time.Millisecond), unit)
}
