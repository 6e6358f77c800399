package openapi3_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/disk"
	"k8s.io/client-go/openapi"
	cgopenapi3 "k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// Every group-version document's bytes, side by side with client-go's
// OpenAPI v3 client used as its openapi3.Root uses it (the root read again
// for every group-version), at 3000 CRDs (about 470 documents). Parsing is
// left out of both: kubeatlas parses a document when it is asked for, and
// parsing all 470 into spec3 costs about 2.3 s in either.
//
//	go test -run '^$' -bench . -benchmem -benchtime 3x ./openapi3/
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
	clientGo := func(b *testing.B, client openapi.Client) {
		paths, err := client.Paths()
		if err != nil {
			b.Fatal(err)
		}
		for p := range paths {
			again, err := client.Paths() // as openapi3.Root.GVSpec does
			if err != nil {
				b.Fatal(err)
			}
			if _, err := again[p].Schema("application/json"); err != nil {
				b.Fatal(err)
			}
		}
	}
	cachedClientGo := func(b *testing.B, dir string) openapi.Client {
		cdc, err := disk.NewCachedDiscoveryClientForConfig(cfg, filepath.Join(dir, "discovery"), filepath.Join(dir, "http"), 6*time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		return cdc.OpenAPIV3()
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
			clientGo(b, cgdiscovery.NewDiscoveryClientForConfigOrDie(cfg).OpenAPIV3())
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
			clientGo(b, cachedClientGo(b, b.TempDir()))
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
	warmCG := b.TempDir()
	b.Run("warm-disk-cache/client-go", func(b *testing.B) {
		clientGo(b, cachedClientGo(b, warmCG))
		srv.ResetRequests()
		for b.Loop() {
			clientGo(b, cachedClientGo(b, warmCG))
		}
		report(b)
	})
}

// BenchmarkAllDocumentsParsed: the same, with every document parsed into
// spec3 (kubeatlas's Document.OpenAPI, client-go's openapi3.Root.GVSpec).
// Parsing dominates both.
func BenchmarkAllDocumentsParsed(b *testing.B) {
	klog.LogToStderr(false)
	srv, base := discoverytest.Start(b, discoverytest.WithCRDs(3000, 250))
	cfg := &rest.Config{Host: base, QPS: -1}
	warmKA, warmCG := b.TempDir(), b.TempDir()
	kubeatlas := func(b *testing.B, root string) {
		dc, err := diskcache.Open(root, base)
		if err != nil {
			b.Fatal(err)
		}
		docs, err := newClient(b, base, openapi3.WithDiskCache(dc)).FetchAll(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range docs {
			if _, err := d.OpenAPI(); err != nil {
				b.Fatal(err)
			}
		}
	}
	clientGo := func(b *testing.B, dir string) {
		cdc, err := disk.NewCachedDiscoveryClientForConfig(cfg, filepath.Join(dir, "discovery"), filepath.Join(dir, "http"), 6*time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		root := cgopenapi3.NewRoot(cdc.OpenAPIV3())
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
	kubeatlas(b, warmKA)
	clientGo(b, warmCG)
	srv.ResetRequests()
	b.Run("cold-disk-cache/kubeatlas", func(b *testing.B) {
		for b.Loop() {
			kubeatlas(b, b.TempDir())
		}
	})
	b.Run("cold-disk-cache/client-go", func(b *testing.B) {
		for b.Loop() {
			clientGo(b, b.TempDir())
		}
	})
	b.Run("warm-disk-cache/kubeatlas", func(b *testing.B) {
		for b.Loop() {
			kubeatlas(b, warmKA)
		}
	})
	b.Run("warm-disk-cache/client-go", func(b *testing.B) {
		for b.Loop() {
			clientGo(b, warmCG)
		}
	})
}
