package tests

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

type countingTransport struct {
	next     http.RoundTripper
	requests *atomic.Int32
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	return c.next.RoundTrip(r)
}

// TestOpenAPIFromTheDiskCache: against the real server (HTTP/2, gzip above
// 128 KiB, Expires in its own format), every document is stored on the
// first read and costs no request afterwards, in JSON and in protobuf; the
// index of each agrees with kube-openapi's parse of it. Through a store
// that is not a *diskcache.Cache (as Redis is not), the JSON documents
// still cost nothing (checked against the hashes the server's root names),
// and the protobuf one, which no hash can check, is the server's.
func TestOpenAPIFromTheDiskCache(t *testing.T) {
	c := startCluster(t)
	dir := t.TempDir()
	var requests atomic.Int32
	clientOf := func(store func(*diskcache.Cache) diskcache.Store) *openapi3.Client {
		cfg := rest.CopyConfig(c.config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &requests} }
		disk, err := diskcache.Open(dir, c.url)
		if err != nil {
			t.Fatal(err)
		}
		oc, err := openapi3.New(cfg, openapi3.WithDiskCache(store(disk)))
		if err != nil {
			t.Fatal(err)
		}
		return oc
	}
	client := func() *openapi3.Client {
		return clientOf(func(disk *diskcache.Cache) diskcache.Store { return disk })
	}
	ctx := context.Background()
	docs, err := client().FetchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		full, err := d.OpenAPI()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if full.Components != nil {
			n = len(full.Components.Schemas)
		}
		if len(d.SchemaNames()) != n {
			t.Errorf("%s: %d schemas indexed, %d parsed", d.Path, len(d.SchemaNames()), n)
		}
	}
	apps := openapi3.PathFor(schema.GroupVersion{Group: "apps", Version: "v1"})
	if _, err := client().Gnostic(ctx, apps); err != nil {
		t.Fatal(err)
	}

	requests.Store(0)
	warm := client()
	again, err := warm.FetchAll(ctx)
	if err != nil || len(again) != len(docs) {
		t.Fatalf("warm: %d documents, %v", len(again), err)
	}
	pb, err := warm.Gnostic(ctx, apps)
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("warm: %d requests for %d documents, want the root only", n, len(docs))
	}
	var names []string
	for _, s := range pb.GetComponents().GetSchemas().GetAdditionalProperties() {
		names = append(names, s.GetName())
	}
	sort.Strings(names)
	d, _ := warm.Document(ctx, apps)
	if !slices.Equal(names, d.SchemaNames()) {
		t.Errorf("apps/v1: protobuf names %d, JSON names %d", len(names), len(d.SchemaNames()))
	}
	s, err := warm.Kind(ctx, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil {
		t.Fatal(err)
	}
	if _, description, err := s.Field("spec", "replicas"); err != nil || !strings.Contains(description, "desired pods") {
		t.Errorf("spec.replicas: %q %v", description, err)
	}

	requests.Store(0)
	shared := clientOf(func(disk *diskcache.Cache) diskcache.Store { return struct{ diskcache.Store }{disk} })
	if again, err := shared.FetchAll(ctx); err != nil || len(again) != len(docs) {
		t.Fatalf("through a shared store: %d documents, %v", len(again), err)
	}
	if _, err := shared.Gnostic(ctx, apps); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("through a shared store: %d requests for %d documents, want the root and %s's protobuf", n, len(docs), apps)
	}
}

// TestEveryDocumentWithinLimits pins, against the real kube-apiserver, that
// the default DocumentLimits refuse none of its documents in any form:
// Gnostic's, and Raw's in JSON and in protobuf as openapi3/clientgo asks
// for it (ProtobufTypeDeprecated), which are now bounded as Document is.
func TestEveryDocumentWithinLimits(t *testing.T) {
	c := startCluster(t)
	oc, err := openapi3.New(c.config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root, err := oc.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(root) < 40 {
		t.Fatalf("%d paths", len(root))
	}
	for p, u := range root {
		if _, err := oc.Gnostic(ctx, p); err != nil {
			t.Errorf("Gnostic: %v", err)
		}
		if _, err := oc.Raw(ctx, u, openapi3.ProtobufTypeDeprecated); err != nil {
			t.Errorf("Raw, protobuf: %v", err)
		}
		if _, err := oc.Raw(ctx, u, "application/json"); err != nil {
			t.Errorf("Raw, JSON: %v", err)
		}
	}
}
