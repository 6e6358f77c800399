package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const group = "things.kubeatlas.test"

func crd(scope string, versions ...string) *unstructured.Unstructured {
	var vs []any
	for i, v := range versions {
		vs = append(vs, map[string]any{
			"name": v, "served": true, "storage": i == 0,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object",
				"properties": map[string]any{"spec": map[string]any{
					"type": "object", "description": "The thing's wishes.",
					"properties": map[string]any{"size": map[string]any{"type": "integer", "description": "How big, in " + v + "."}},
				}},
			}},
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "things." + group},
		"spec": map[string]any{
			"group": group, "scope": scope,
			"names":    map[string]any{"plural": "things", "singular": "thing", "kind": "Thing", "shortNames": []any{"th"}, "categories": []any{"all"}},
			"versions": vs,
		},
	}}
}

// TestFollowsCRDs: discovery, the REST mapper and OpenAPI v3 follow a CRD
// through install, a new preferred version, deletion and re-creation with
// another scope, on a real API server, without new clients.
func TestFollowsCRDs(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(crdGVR)
	dc, err := discovery.New(c.config)
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(dc, restmapper.WithMissRefreshInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	oc, err := openapi3.New(c.config)
	if err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: group, Kind: "Thing"}
	mappingIs := func(version string, scope meta.RESTScopeName) func() (bool, string) {
		return func() (bool, string) {
			mp, err := m.RESTMapping(gk)
			if err != nil {
				return false, err.Error()
			}
			return mp.GroupVersionKind.Version == version && mp.Scope.Name() == scope, fmt.Sprintf("%+v", mp)
		}
	}

	if _, err := crds.Create(ctx, crd("Namespaced", "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "discovery lists the new CRD", 30*time.Second, func() (bool, string) {
		s, _ := dc.Refresh(ctx)
		v, ok := s.Version(schema.GroupVersion{Group: group, Version: "v1"})
		return ok && len(v.Resources) == 1 && v.Resources[0].Name == "things", "not yet"
	})
	eventually(t, "the mapper maps it", 30*time.Second, mappingIs("v1", meta.RESTScopeNameNamespace))
	if gvr, err := m.ResourceFor(schema.GroupVersionResource{Resource: "th"}); err != nil || gvr.Group != group {
		t.Errorf("short name: %v %v", gvr, err)
	}
	// No RefreshRoot: a kind whose group-version the root did not list
	// makes the client read the root again (at most once a second).
	eventually(t, "OpenAPI v3 describes it", 30*time.Second, func() (bool, string) {
		s, err := oc.Kind(ctx, schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Thing"})
		if err != nil {
			return false, err.Error()
		}
		f, description, err := s.Field("spec", "size")
		return err == nil && f.Type.Contains("integer") && strings.Contains(description, "in v1"), fmt.Sprint(err)
	})

	// A new version that sorts first becomes the preferred one.
	cur, err := crds.Get(ctx, "things."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := crd("Namespaced", "v1", "v2")
	next.SetResourceVersion(cur.GetResourceVersion())
	if _, err := crds.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mapper prefers v2", 30*time.Second, func() (bool, string) {
		m.Reset()
		return mappingIs("v2", meta.RESTScopeNameNamespace)()
	})

	if err := crds.Delete(ctx, "things."+group, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mapper forgets the deleted CRD", 60*time.Second, func() (bool, string) {
		m.Reset()
		_, err := m.RESTMapping(gk)
		return meta.IsNoMatchError(err), fmt.Sprint(err)
	})
	eventually(t, "the CRD object is gone", 60*time.Second, func() (bool, string) {
		_, err := crds.Get(ctx, "things."+group, metav1.GetOptions{})
		return err != nil, "still there"
	})
	if _, err := crds.Create(ctx, crd("Cluster", "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mapper sees the new scope", 30*time.Second, mappingIs("v1", meta.RESTScopeNameRoot))
}

// TestWarmStartRevalidates: a new client on a warm disk cache reads one
// file and revalidates with two 304s against the real server; inside the
// max age it sends nothing, unless the store is not a *diskcache.Cache
// (as Redis is not), whose entry the real server confirms with two 304s
// before it is answered.
func TestWarmStartRevalidates(t *testing.T) {
	c := startCluster(t)
	root := t.TempDir()
	openStore := func(maxAge time.Duration, store func(*diskcache.Cache) diskcache.Store) *discovery.Client {
		disk, err := diskcache.Open(root, c.url)
		if err != nil {
			t.Fatal(err)
		}
		dc, err := discovery.New(c.config, discovery.WithDiskCache(store(disk)), discovery.WithMaxAge(maxAge))
		if err != nil {
			t.Fatal(err)
		}
		return dc
	}
	own := func(disk *diskcache.Cache) diskcache.Store { return disk }
	open := func(maxAge time.Duration) *discovery.Client { return openStore(maxAge, own) }
	first := open(time.Hour)
	want, err := first.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, src := want.Sources(); src.Format != surface.FormatAggregatedV2 || !src.Protobuf {
		t.Fatalf("first read from %v", src)
	}
	second := open(0)
	got, err := second.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := second.Stats()
	if st.DiskLoads != 1 || st.Requests != 2 || st.NotModified != 2 || len(got.Groups()) != len(want.Groups()) {
		t.Errorf("warm start: %+v", st)
	}
	for _, tc := range []struct {
		name     string
		store    func(*diskcache.Cache) diskcache.Store
		requests int64
	}{
		{"own cache", own, 0},
		{"shared store", func(disk *diskcache.Cache) diskcache.Store { return struct{ diskcache.Store }{disk} }, 2},
	} {
		dc := openStore(time.Hour, tc.store)
		got, err := dc.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st := dc.Stats()
		if st.DiskLoads != 1 || st.Requests != tc.requests || st.NotModified != tc.requests || len(got.Groups()) != len(want.Groups()) {
			t.Errorf("%s, inside the max age: %+v, want %d requests answered 304", tc.name, st, tc.requests)
		}
	}
}

// TestAPIResourcesMatchesKubectl: the example CLI prints what kubectl
// prints against the real server, byte for byte, in each table format and
// with each filter.
func TestAPIResourcesMatchesKubectl(t *testing.T) {
	kubectl := testenv.Tool(t, "kubectl")
	c := startCluster(t)
	bin := filepath.Join(t.TempDir(), "api-resources")
	if out, err := buildExample(bin, "api-resources"); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, format := range [][]string{{"-o", "name"}, {}, {"-o", "wide"}} {
		for _, filter := range [][]string{nil, {"--api-group", "apps"}, {"--api-group", ""}, {"--namespaced=false"}, {"--namespaced"},
			{"--verbs", "list,watch"}, {"--verbs", "create", "--verbs", "list"}, {"--categories", "all"}, {"--sort-by", "name"}, {"--sort-by", "kind"}, {"--no-headers"}} {
			args := append(append([]string{}, format...), filter...)
			got, want, err, werr := sideBySide(t, c, bin, kubectl, "api-resources", args)
			if err != nil || werr != nil {
				t.Fatalf("api-resources %v: %v; kubectl: %v", args, err, werr)
			}
			if string(got) != string(want) || len(want) < 20 {
				t.Errorf("api-resources %v: not kubectl's bytes:\n got:\n%s\nwant:\n%s", args, got, want)
			}
		}
	}
}

// fieldLines are the lines after "FIELDS:", each as its indentation and
// fields (kubectl aligns with a tab writer, we with tabs).
func fieldLines(out string) []string {
	_, fields, ok := strings.Cut(out, "FIELDS:\n")
	if !ok {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(fields, "\n"), "\n") {
		indent := len(l) - len(strings.TrimLeft(l, " "))
		lines = append(lines, fmt.Sprintf("%d %s", indent, strings.Join(strings.Fields(l), " ")))
	}
	return lines
}

// buildExample builds a command of examples/ in the kubeatlas module, with
// that module's requirements (not this one's).
func buildExample(bin, name string) ([]byte, error) {
	cmd := exec.Command("go", "build", "-o", bin, "./examples/"+name)
	cmd.Dir = filepath.Join("..", "..", "..")
	return cmd.CombinedOutput()
}

// sideBySide runs our example command bin and kubectl's command of the same
// name with args against the cluster, each with a fresh cache and no
// kubeconfig, and returns both outputs and errors.
func sideBySide(t *testing.T, c *cluster, bin, kubectl, command string, args []string) (got, want []byte, err, werr error) {
	t.Helper()
	args = append([]string{"--server", c.url, "--token", token, "--insecure-skip-tls-verify"}, args...)
	ours := exec.Command(bin, args...)
	ours.Env = append(os.Environ(), "KUBECACHEDIR="+t.TempDir(), "KUBECONFIG=", "HOME="+t.TempDir())
	got, err = ours.Output()
	theirs := exec.Command(kubectl, append([]string{command, "--cache-dir", t.TempDir()}, args...)...)
	theirs.Env = append(os.Environ(), "KUBECONFIG=", "HOME="+t.TempDir())
	want, werr = theirs.Output()
	return got, want, err, werr
}
