package diskcache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/disk"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Side by side with client-go's disk-cached discovery on one fake server:
//
//	go test -run '^$' -bench . -benchmem ./diskcache/

func benchServer(b *testing.B, crds int) (*discoverytest.Server, string) {
	klog.LogToStderr(false)
	srv, err := discoverytest.NewServer(discoverytest.WithCRDs(crds, max(1, crds/12)))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	b.Cleanup(ts.Close)
	return srv, ts.URL
}

var warmGK = schema.GroupKind{Group: "g017.stress.example.com", Kind: "Widget1017"}

// diskUsage counts the files and bytes below dir.
func diskUsage(dir string) (files int, bytes int64) {
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				files++
				bytes += info.Size()
			}
		}
		return nil
	})
	return files, bytes
}

// measure runs start once to fill the cache in root, then times it, and
// reports the requests it made and what the cache holds on disk.
func measure(b *testing.B, srv *discoverytest.Server, root string, start func()) {
	start()
	srv.ResetRequests()
	b.ReportAllocs()
	for b.Loop() {
		start()
	}
	files, bytes := diskUsage(root)
	b.ReportMetric(float64(srv.Stats().Requests)/float64(b.N), "req/op")
	b.ReportMetric(float64(files), "files")
	b.ReportMetric(float64(bytes), "disk-B")
}

// BenchmarkWarmStart: a new process with a warm disk cache, to its first
// REST mapping (the max age / TTL has not passed, so no request is needed).
// kubeatlas-shared-store is the same cache behind a Store that is not a
// *diskcache.Cache, as Redis is: its entry is answered once the server
// confirms it (two 304s, 2 req/op).
func BenchmarkWarmStart(b *testing.B) {
	srv, base := benchServer(b, 3000)
	for _, tc := range []struct {
		name  string
		store func(*diskcache.Cache) diskcache.Store
	}{
		{"kubeatlas", func(dc *diskcache.Cache) diskcache.Store { return dc }},
		{"kubeatlas-shared-store", func(dc *diskcache.Cache) diskcache.Store { return struct{ diskcache.Store }{dc} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			root := b.TempDir()
			start := func() {
				dc, err := diskcache.Open(root, base)
				if err != nil {
					b.Fatal(err)
				}
				c, err := discovery.NewForHTTPClient(nil, base, discovery.WithDiskCache(tc.store(dc)), discovery.WithMaxAge(time.Hour))
				if err != nil {
					b.Fatal(err)
				}
				m, err := restmapper.New(c)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := m.RESTMapping(warmGK); err != nil {
					b.Fatal(err)
				}
			}
			measure(b, srv, root, start)
		})
	}
	b.Run("client-go", func(b *testing.B) {
		root := b.TempDir()
		start := func() {
			cdc, err := disk.NewCachedDiscoveryClientForConfig(&rest.Config{Host: base, QPS: -1}, filepath.Join(root, "discovery"), filepath.Join(root, "http"), 6*time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			var m meta.RESTMapper = cgrestmapper.NewDeferredDiscoveryRESTMapper(cdc)
			if _, err := m.RESTMapping(warmGK); err != nil {
				b.Fatal(err)
			}
		}
		measure(b, srv, root, start)
	})
}

// BenchmarkSchemaChurn: rounds of five changed OpenAPI schemas, each round
// fetching the root and the changed documents through the disk cache, as an
// explain or apply after a CRD upgrade would. Reported: files and bytes on
// disk after the rounds (one op is one round). Rounds are a second apart
// (not timed): the root is revalidated by Last-Modified, with one-second
// resolution. Run it with -benchtime 10x.
func BenchmarkSchemaChurn(b *testing.B) {
	srv, base := benchServer(b, 120)
	gvs := srv.Backends()[0].GroupVersions()
	gvs = gvs[len(gvs)-5:] // five CRD group-versions
	nextRound := func(b *testing.B) {
		b.StopTimer()
		time.Sleep(1050 * time.Millisecond)
		b.StartTimer()
	}
	fetchChanged := func(b *testing.B, hc *http.Client) {
		nextRound(b)
		for _, gv := range gvs {
			if err := srv.ChangeSchema(gv); err != nil {
				b.Fatal(err)
			}
		}
		root := fetchJSON(b, hc, base+"/openapi/v3")
		for _, gv := range gvs {
			p := "apis/" + gv.String()
			get(b, hc, base+root[p])
		}
	}
	b.Run("kubeatlas", func(b *testing.B) {
		dir := b.TempDir()
		dc, err := diskcache.Open(dir, base, diskcache.WithMaxBytes(2<<20))
		if err != nil {
			b.Fatal(err)
		}
		hc := &http.Client{Transport: diskcache.NewTransport(nil, dc)}
		for b.Loop() {
			fetchChanged(b, hc)
		}
		files, bytes := diskUsage(dir)
		b.ReportMetric(float64(files), "files")
		b.ReportMetric(float64(bytes), "disk-B")
	})
	b.Run("client-go", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			// A new client per round, as each kubectl invocation is: one
			// client keeps the root it read first, and with it the old
			// hashes, for its whole life.
			nextRound(b)
			cdc, err := disk.NewCachedDiscoveryClientForConfig(&rest.Config{Host: base, QPS: -1}, filepath.Join(dir, "discovery"), filepath.Join(dir, "http"), 6*time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			for _, gv := range gvs {
				if err := srv.ChangeSchema(gv); err != nil {
					b.Fatal(err)
				}
			}
			paths, err := cdc.OpenAPIV3().Paths()
			if err != nil {
				b.Fatal(err)
			}
			for _, gv := range gvs {
				if _, err := paths["apis/"+gv.String()].Schema("application/json"); err != nil {
					b.Fatal(err)
				}
			}
		}
		files, bytes := diskUsage(dir)
		b.ReportMetric(float64(files), "files")
		b.ReportMetric(float64(bytes), "disk-B")
	})
}

func get(b *testing.B, hc *http.Client, url string) []byte {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return body
}

func fetchJSON(b *testing.B, hc *http.Client, url string) map[string]string {
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(get(b, hc, url), &root); err != nil {
		b.Fatal(fmt.Errorf("%s: %w", url, err))
	}
	out := map[string]string{}
	for k, v := range root.Paths {
		out[k] = v.ServerRelativeURL
	}
	return out
}
