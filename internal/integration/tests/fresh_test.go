package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
	"github.com/kubeatlas/kubeatlas/shared"
)

// openAPICounter counts the OpenAPI requests a client sends through the
// transports it wraps: the root and group-version documents.
type openAPICounter struct{ root, docs atomic.Int64 }

func (c *openAPICounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch {
		case r.URL.Path == "/openapi/v3":
			c.root.Add(1)
		case strings.HasPrefix(r.URL.Path, "/openapi/v3/"):
			c.docs.Add(1)
		}
		return next.RoundTrip(r)
	})
}

// servedAt polls the server's OpenAPI root (another connection, every
// 5ms) and says when path's ?hash= first differs from old's, or path
// appears or goes, as present says.
func servedAt(t *testing.T, cfg *rest.Config, path, old string) func() time.Time {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var at time.Time
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/openapi/v3", nil)
			resp, err := hc.Do(req)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var root struct {
					Paths map[string]struct {
						URL string `json:"serverRelativeURL"`
					} `json:"paths"`
				}
				if json.Unmarshal(body, &root) == nil && root.Paths[path].URL != old {
					mu.Lock()
					at = time.Now()
					mu.Unlock()
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() time.Time {
		<-done
		cancel()
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

// TestSchemasFollowCRDs: on the real v1.36.3 server, a shared handle's
// typed.Converter and explain (Client.Kind and Schema.Field), both made
// once and kept, follow CRD changes through the handle's watch: 20 schema
// changes (a field added to spec), a kind added to a group-version, a new
// group-version, and a group-version removed. The OpenAPI root's max age
// is an hour and no object is converted (Type alone, which has no miss
// of its own for a field), so only the watch can make them see a change.
// Each change is timed from the update to the server serving it (its
// root's ?hash=, polled on another connection) and to the converter and
// explain seeing it; the times are logged, not asserted, with the
// OpenAPI requests the handle sent per change.
func TestSchemasFollowCRDs(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	const group, others = "fresh.kubeatlas.test", 20
	for i := range others { // a modest cluster around it
		if _, err := dyn.Resource(crdGVR).Create(ctx, benchCRD(fmt.Sprintf("g%02d.around.kubeatlas.test", i%5), fmt.Sprintf("Around%02d", i), i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crd := benchCRD(group, "Fresh", 1)
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Fresh"}
	path := openapi3.PathFor(gvk.GroupVersion())

	counter := &openAPICounter{}
	cfg := rest.CopyConfig(c.config)
	cfg.WrapTransport = counter.wrap
	r, err := shared.New(shared.WithLinger(0), shared.WithOpenAPIOptions(openapi3.WithMaxAge(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.Acquire(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	oc := h.OpenAPI()
	conv, err := typed.New(oc)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "watching", 30*time.Second, func() bool { return h.Watcher().Stats().Watching })
	waitUntil(t, "the CRD's type", 30*time.Second, func() bool { _, err := conv.Type(ctx, gvk); return err == nil })
	time.Sleep(3 * time.Second) // the rounds of the creations end

	// typedHas says whether the converter's type of gvk declares spec.<field>;
	// explainHas whether explain finds it.
	typedHas := func(gvk schema.GroupVersionKind, field string) bool {
		tp, err := conv.Type(ctx, gvk)
		if err != nil {
			return false
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetName("x")
		_ = unstructured.SetNestedField(u.Object, "v", "spec", field)
		_, err = tp.FromUnstructured(u.Object)
		return err == nil
	}
	explainHas := func(gvk schema.GroupVersionKind, field string) bool {
		k, err := oc.Kind(ctx, gvk)
		if err != nil {
			return false
		}
		_, _, err = k.Field("spec", field)
		return err == nil
	}
	root := func() map[string]string {
		p, err := oc.Paths(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	const changes = 20
	var toServed, toTyped, toExplain, servedToTyped, servedToExplain []time.Duration
	var roots, docs int64
	var perRoot []int64
	for i := range changes {
		field := fmt.Sprintf("added%02d", i)
		live, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(live.Object, "spec", "versions")
		for _, v := range versions {
			props := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
			props[field] = map[string]any{"type": "string"}
		}
		if err := unstructured.SetNestedSlice(live.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		r0, d0 := counter.root.Load(), counter.docs.Load()
		served := servedAt(t, c.config, path, root()[path])
		start := time.Now()
		if _, err := dyn.Resource(crdGVR).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var typedAt, explainAt time.Time
		for deadline := start.Add(10 * time.Second); typedAt.IsZero() || explainAt.IsZero(); time.Sleep(2 * time.Millisecond) {
			if typedAt.IsZero() && typedHas(gvk, field) {
				typedAt = time.Now()
			}
			if explainAt.IsZero() && explainHas(gvk, field) {
				explainAt = time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatalf("change %d: the converter and explain do not see %s after 10s (the server served it %v after the update; %d root reads, %d documents since)",
					i, field, served().Sub(start), counter.root.Load()-r0, counter.docs.Load()-d0)
			}
		}
		at := served()
		toServed = append(toServed, at.Sub(start))
		toTyped, toExplain = append(toTyped, typedAt.Sub(start)), append(toExplain, explainAt.Sub(start))
		servedToTyped, servedToExplain = append(servedToTyped, typedAt.Sub(at)), append(servedToExplain, explainAt.Sub(at))
		time.Sleep(3 * time.Second) // the watch's settle rounds for the change end
		perRoot = append(perRoot, counter.root.Load()-r0)
		roots, docs = roots+counter.root.Load()-r0, docs+counter.docs.Load()-d0
	}
	t.Logf("%d schema changes (a field added):", changes)
	t.Logf("  update -> served (the root's new ?hash=): %s", spread(toServed))
	t.Logf("  update -> typed.Converter: %s; served -> typed.Converter: %s", spread(toTyped), spread(servedToTyped))
	t.Logf("  update -> explain: %s; served -> explain: %s", spread(toExplain), spread(servedToExplain))
	t.Logf("  OpenAPI requests: %d root reads and %d documents for %d changes (root reads per change: %v)", roots, docs, changes, perRoot)

	// A kind added to the group-version, a new group-version, and the
	// group-version removed.
	timed := func(what string, change func() error, seen func() bool) {
		t.Helper()
		start := time.Now()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, what, 10*time.Second, seen)
		t.Logf("%s -> seen by the converter: %v", what, time.Since(start).Round(time.Millisecond))
	}
	second := benchCRD(group, "Second", 2)
	timed("a kind added to the group-version", func() error {
		_, err := dyn.Resource(crdGVR).Create(ctx, second, metav1.CreateOptions{})
		return err
	}, func() bool { _, err := conv.Type(ctx, gvk.GroupVersion().WithKind("Second")); return err == nil })
	newGV := schema.GroupVersionKind{Group: "newgv.kubeatlas.test", Version: "v1", Kind: "Newcomer"}
	third := benchCRD(newGV.Group, newGV.Kind, 3)
	timed("a new group-version", func() error {
		_, err := dyn.Resource(crdGVR).Create(ctx, third, metav1.CreateOptions{})
		return err
	}, func() bool { _, err := conv.Type(ctx, newGV); return err == nil })
	time.Sleep(3 * time.Second)
	timed("the group-version removed", func() error {
		return dyn.Resource(crdGVR).Delete(ctx, third.GetName(), metav1.DeleteOptions{})
	}, func() bool {
		_, err := conv.Type(ctx, newGV)
		return errors.Is(err, openapi3.ErrNotFound)
	})
}
