package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/disk"
	"k8s.io/client-go/dynamic"
	cgopenapi3 "k8s.io/client-go/openapi3"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/metaview"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/mapperbench"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// benchCRD is a CRD with a schema shaped like real ones: nested objects,
// lists of objects, descriptions; every third has a short name and is in
// the category "all", and the CRDs of every fifth group are served in two
// versions (as in the shared fixtures' capture).
func benchCRD(group, kind string, i int) *unstructured.Unstructured {
	props := map[string]any{}
	for i := range 20 {
		props[fmt.Sprintf("field%02d", i)] = map[string]any{
			"type": "object", "description": fmt.Sprintf("Field %d of the %s, with a description as long as real ones tend to be: it says what the field is for, what its default is, and which versions honour it.", i, kind),
			"properties": map[string]any{
				"name":    map[string]any{"type": "string", "description": "The name."},
				"enabled": map[string]any{"type": "boolean", "description": "Whether it applies."},
				"items": map[string]any{"type": "array", "description": "The items.", "items": map[string]any{
					"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}, "value": map[string]any{"type": "integer"}},
				}},
			},
		}
	}
	plural := fmt.Sprintf("%ss", lower(kind))
	names := map[string]any{"plural": plural, "singular": lower(kind), "kind": kind}
	if i%3 == 0 {
		names["shortNames"] = []any{fmt.Sprintf("bk%d", i)}
		names["categories"] = []any{"all"}
	}
	schema := map[string]any{"openAPIV3Schema": map[string]any{
		"type":       "object",
		"properties": map[string]any{"spec": map[string]any{"type": "object", "description": "The desired state.", "properties": props}},
	}}
	versions := []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": schema}}
	if (i/10)%5 == 0 {
		versions = append(versions, map[string]any{"name": "v1beta1", "served": true, "storage": false, "schema": schema})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced", "names": names, "versions": versions,
		},
	}}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// benchCRDCount is KUBEATLAS_BENCH_CRDS, or 200.
func benchCRDCount() int {
	if v, err := strconv.Atoi(os.Getenv("KUBEATLAS_BENCH_CRDS")); err == nil && v > 0 {
		return v
	}
	return 200
}

// createBenchCRDs creates benchCRDCount CRDs (benchCRD, ten a group) on c
// and waits until discovery serves every one and the OpenAPI root
// describes every group, and returns how many it created.
func createBenchCRDs(b testing.TB, c *cluster) int {
	b.Helper()
	n := benchCRDCount()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		group := fmt.Sprintf("g%03d.bench.kubeatlas.test", i/10)
		if _, err := dyn.Resource(crdGVR).Create(ctx, benchCRD(group, fmt.Sprintf("Kind%04d", i), i), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	groups := (n + 9) / 10
	eventually(b, "every CRD served and described", 15*time.Minute, func() (bool, string) {
		dc, err := discovery.New(c.config)
		if err != nil {
			return false, err.Error()
		}
		s, err := dc.Snapshot(ctx)
		if err != nil {
			return false, err.Error()
		}
		resources := 0
		for _, g := range s.Groups() {
			for _, v := range g.Versions {
				if strings.HasSuffix(g.Name, ".bench.kubeatlas.test") && v.Version == "v1" {
					resources += len(v.Resources)
				}
			}
		}
		oc, err := openapi3.New(c.config)
		if err != nil {
			return false, err.Error()
		}
		root, err := oc.Paths(ctx)
		if err != nil {
			return false, err.Error()
		}
		described := 0
		for g := range groups {
			if _, ok := root[fmt.Sprintf("apis/g%03d.bench.kubeatlas.test/v1", g)]; ok {
				described++
			}
		}
		return resources == n && described == groups, fmt.Sprintf("%d of %d resources, %d of %d groups described", resources, n, described, groups)
	})
	return n
}

// BenchmarkRealServer: kubeatlas and client-go side by side against a real
// kube-apiserver v1.36.3 (HTTP/2 over TLS, gzip above 128 KiB, real
// documents) with KUBEATLAS_BENCH_CRDS CRDs (default 200, ten a group):
// cold discovery; a REST mapper's first sight of every name a user may type
// (KindFor, then RESTMapping of the kind found, each input once, on a new
// mapper over discovery already read: ns/input); and every OpenAPI v3
// document ready to use without a
// disk cache, with a cold one and with a warm one (kubeatlas's FetchAll,
// client-go's openapi3.Root.GVSpec for each group-version); and a warm
// `api-resources -o name` of ours against kubectl's as whole processes
// (benchCLI: medians of wall time and peak RSS). The server
// shares the machine's cores with the client.
//
//	KUBEATLAS_KUBE_APISERVER=/path/to/kube-apiserver go test -run '^$' -bench RealServer -benchtime 5x
func BenchmarkRealServer(b *testing.B) {
	c := startCluster(b)
	createBenchCRDs(b, c)
	ctx := context.Background()

	b.Run("discovery-cold/kubeatlas", func(b *testing.B) {
		for b.Loop() {
			dc, err := discovery.New(c.config)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := dc.Snapshot(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("discovery-cold/client-go", func(b *testing.B) {
		for b.Loop() {
			dc, err := cgdiscovery.NewDiscoveryClientForConfig(c.config)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := dc.ServerGroupsAndResources(); err != nil {
				b.Fatal(err)
			}
		}
	})

	benchFirstSight(b, c)
	b.Run("cli-warm-api-resources-name", func(b *testing.B) { benchCLI(b, c) })

	kubeatlas := func(b *testing.B, dir string) {
		var opts []openapi3.Option
		if dir != "" {
			dcache, err := diskcache.Open(dir, c.url)
			if err != nil {
				b.Fatal(err)
			}
			opts = append(opts, openapi3.WithDiskCache(dcache))
		}
		oc, err := openapi3.New(c.config, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := oc.FetchAll(ctx); err != nil {
			b.Fatal(err)
		}
	}
	clientGo := func(b *testing.B, dir string) {
		var root cgopenapi3.Root
		if dir == "" {
			dc, err := cgdiscovery.NewDiscoveryClientForConfig(c.config)
			if err != nil {
				b.Fatal(err)
			}
			root = cgopenapi3.NewRoot(dc.OpenAPIV3())
		} else {
			cdc, err := disk.NewCachedDiscoveryClientForConfig(c.config, filepath.Join(dir, "discovery"), filepath.Join(dir, "http"), 6*time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			root = cgopenapi3.NewRoot(cdc.OpenAPIV3())
		}
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
	for name, run := range map[string]func(*testing.B, string){"kubeatlas": kubeatlas, "client-go": clientGo} {
		b.Run("openapi-no-disk-cache/"+name, func(b *testing.B) {
			for b.Loop() {
				run(b, "")
			}
		})
		b.Run("openapi-cold-disk-cache/"+name, func(b *testing.B) {
			for b.Loop() {
				run(b, b.TempDir())
			}
		})
		warm := b.TempDir()
		run(b, warm)
		b.Run("openapi-warm-disk-cache/"+name, func(b *testing.B) {
			for b.Loop() {
				run(b, warm)
			}
		})
	}
}

// benchFirstSight measures a new mapper's first answer to every input form
// (see mapperbench), kubeatlas and client-go on the live server.
func benchFirstSight(b *testing.B, c *cluster) {
	dc, err := discovery.New(c.config)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := dc.Snapshot(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	inputs := mapperbench.Inputs(metaview.Of(snap).Resources)
	b.Run("mapper-first-sight/kubeatlas", func(b *testing.B) {
		mapperbench.FirstSight(b, inputs, func() meta.RESTMapper {
			// A new client, its discovery read outside the timer, as
			// client-go's is.
			dc, err := discovery.New(c.config)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := dc.Snapshot(context.Background()); err != nil {
				b.Fatal(err)
			}
			m, err := restmapper.New(dc)
			if err != nil {
				b.Fatal(err)
			}
			return m
		})
	})
	b.Run("mapper-first-sight/client-go", func(b *testing.B) {
		mapperbench.FirstSight(b, inputs, func() meta.RESTMapper { return mapperbench.ClientGo(b, c.config) })
	})
	b.Logf("%d inputs", len(inputs))
}
