package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
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

// servedAt reads the server's OpenAPI root for path's current URL, then
// polls it (another connection, every 5ms) and says when path's ?hash=
// first differs from it, or path appears or goes.
func servedAt(t *testing.T, cfg *rest.Config, path string) func() time.Time {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/openapi/v3", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var root struct {
			Paths map[string]struct {
				URL string `json:"serverRelativeURL"`
			} `json:"paths"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&root); err != nil {
			return "", err
		}
		return root.Paths[path].URL, nil
	}
	old, err := read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var at time.Time
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if u, err := read(ctx); err == nil && u != old {
				mu.Lock()
				at = time.Now()
				mu.Unlock()
				return
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

// sinceEach is how long after served each of at was (rounded; zero for
// one not seen).
func sinceEach(served time.Time, at []time.Time) []time.Duration {
	out := make([]time.Duration, len(at))
	for i, a := range at {
		if !a.IsZero() {
			out[i] = a.Sub(served).Round(time.Millisecond)
		}
	}
	return out
}

// series is the times from changes served to a check seeing them, and
// how many it did not see.
type series struct {
	d      []time.Duration
	missed int
}

func (s *series) add(served, seen time.Time) {
	if seen.IsZero() {
		s.missed++
		return
	}
	s.d = append(s.d, seen.Sub(served))
}

func (s *series) String() string {
	out := "none seen"
	if len(s.d) > 0 {
		out = spread(s.d)
	}
	if s.missed > 0 {
		out += fmt.Sprintf(", %d not seen within a minute", s.missed)
	}
	return out
}

// freshChanges is how many changes of each kind TestSchemasFollowCRDs
// makes: KUBEATLAS_FRESH_CHANGES of each, or 20 schema changes and one of
// each other kind (the default run's).
func freshChanges() (schemaChanges, others int) {
	if v, err := strconv.Atoi(os.Getenv("KUBEATLAS_FRESH_CHANGES")); err == nil && v > 0 {
		return v, v
	}
	return 20, 1
}

// TestSchemasFollowCRDs: on the real v1.36.3 server, a shared handle's
// typed.Converter and explain (Client.Kind and Schema.Field), both made
// once and kept, follow CRD changes through the handle's watch: schema
// changes (a field added to spec), kinds added to a group-version, new
// group-versions, and group-versions removed. The OpenAPI root's max age
// is an hour and no object is converted for a field (Type alone, which
// has no miss of its own for one; explain's walk without the path), so
// only the watch can make them see a schema change; the handle's PatchMeta
// is then checked to have the field too. Beside it, an OpenAPI client
// with no watch (its max age an hour too) and its converter see each
// schema change through their misses alone: ObjectToTyped of an object
// setting the field, explain's Kind with the field path, and a lookup of
// the field in PatchMeta's answer. Each change is timed from the update to
// the server serving it (its root's ?hash=, polled on another connection)
// and to each seeing it; the times are logged, not asserted, with the
// OpenAPI requests each client sent per change.
//
// The cluster has 20 other CRDs, or KUBEATLAS_BENCH_CRDS (as the tier's
// benchmarks: issue 44's measurement is for 3,000), and the test makes
// freshChanges of each kind (KUBEATLAS_FRESH_CHANGES=20 for the issue's
// p50 and max of each).
func TestSchemasFollowCRDs(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	const group = "fresh.kubeatlas.test"
	if os.Getenv("KUBEATLAS_BENCH_CRDS") != "" {
		n := createBenchCRDs(t, c)
		t.Logf("%d other CRDs, ten a group", n)
	} else {
		for i := range 20 { // a modest cluster around it
			if _, err := dyn.Resource(crdGVR).Create(ctx, benchCRD(fmt.Sprintf("g%02d.around.kubeatlas.test", i%5), fmt.Sprintf("Around%02d", i), i), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
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
	// The client with no watch.
	missCounter := &openAPICounter{}
	missCfg := rest.CopyConfig(c.config)
	missCfg.WrapTransport = missCounter.wrap
	missOC, err := openapi3.New(missCfg, openapi3.WithMaxAge(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	missConv, err := typed.New(missOC)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "watching", 30*time.Second, func() bool { return h.Watcher().Stats().Watching })
	waitUntil(t, "the CRD's type", 30*time.Second, func() bool { _, err := conv.Type(ctx, gvk); return err == nil })
	waitUntil(t, "the CRD's type, with no watch", 30*time.Second, func() bool { _, err := missConv.Type(ctx, gvk); return err == nil })
	time.Sleep(3 * time.Second) // the rounds of the creations end

	// object is an object of gvk that sets spec.<field>.
	object := func(gvk schema.GroupVersionKind, field string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetName("x")
		_ = unstructured.SetNestedField(u.Object, "v", "spec", field)
		return u
	}
	// typedHas says whether the converter's type of gvk declares spec.<field>;
	// explainHas whether explain's walk finds it in the schema held.
	typedHas := func(gvk schema.GroupVersionKind, field string) bool {
		tp, err := conv.Type(ctx, gvk)
		if err != nil {
			return false
		}
		_, err = tp.FromUnstructured(object(gvk, field).Object)
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
	// patchHas says whether a strategic merge patch finds spec.<field> in
	// conv's PatchMeta (with a miss of its own, a root read a second).
	patchHas := func(conv *typed.Converter, gvk schema.GroupVersionKind, field string) bool {
		m, err := conv.PatchMeta(ctx, gvk)
		if err != nil {
			return false
		}
		spec, _, err := m.LookupPatchMetadataForStruct("spec")
		if err != nil {
			return false
		}
		_, _, err = spec.LookupPatchMetadataForStruct(field)
		return err == nil
	}
	// The client with no watch finds the field through its misses alone:
	// the converter (ObjectToTyped), explain (Kind with the path), PatchMeta.
	missTypedHas := func(gvk schema.GroupVersionKind, field string) bool {
		_, err := missConv.ObjectToTyped(object(gvk, field))
		return err == nil
	}
	missExplainHas := func(gvk schema.GroupVersionKind, field string) bool {
		k, err := missOC.Kind(ctx, gvk, "spec", field)
		if err != nil {
			return false
		}
		_, _, err = k.Field("spec", field)
		return err == nil
	}
	// seen polls each check every 2ms until each has held once, up to a
	// minute after start (a server under load may serve a change late),
	// and says when each first held; a check that never held is an error,
	// and its time zero.
	seen := func(what string, start time.Time, served func() time.Time, checks ...func() bool) []time.Time {
		t.Helper()
		at := make([]time.Time, len(checks))
		for deadline := start.Add(time.Minute); slices.Contains(at, time.Time{}); time.Sleep(2 * time.Millisecond) {
			for i, check := range checks {
				if at[i].IsZero() && check() {
					at[i] = time.Now()
				}
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: not seen by every check a minute after the update (served %v after it; seen at %v)", what, served().Sub(start), at)
				break
			}
		}
		return at
	}
	// costs are the OpenAPI requests of one kind of change, per client.
	type costs struct{ roots, docs, missRoots, missDocs int64 }
	measure := func(cs *costs, change func()) {
		r0, d0, mr0, md0 := counter.root.Load(), counter.docs.Load(), missCounter.root.Load(), missCounter.docs.Load()
		change()
		time.Sleep(3 * time.Second) // the watch's settle rounds for the change end
		cs.roots += counter.root.Load() - r0
		cs.docs += counter.docs.Load() - d0
		cs.missRoots += missCounter.root.Load() - mr0
		cs.missDocs += missCounter.docs.Load() - md0
	}

	schemaChanges, others := freshChanges()
	var toServed []time.Duration
	var servedToTyped, servedToExplain, servedToMissTyped, servedToMissExplain, servedToMissPatch series
	var schemaCosts costs
	for i := range schemaChanges {
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
		measure(&schemaCosts, func() {
			served := servedAt(t, c.config, path)
			start := time.Now()
			if _, err := dyn.Resource(crdGVR).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			at := seen(fmt.Sprintf("change %d (%s)", i, field), start, served,
				func() bool { return typedHas(gvk, field) },
				func() bool { return explainHas(gvk, field) },
				func() bool { return missTypedHas(gvk, field) },
				func() bool { return missExplainHas(gvk, field) },
				func() bool { return patchHas(missConv, gvk, field) })
			if !at[0].IsZero() && !patchHas(conv, gvk, field) {
				t.Errorf("change %d: the watched converter's PatchMeta lacks spec.%s once its type has it", i, field)
			}
			s := served()
			if s.IsZero() {
				t.Fatalf("change %d: the server did not serve it within a minute", i)
			}
			toServed = append(toServed, s.Sub(start))
			servedToTyped.add(s, at[0])
			servedToExplain.add(s, at[1])
			servedToMissTyped.add(s, at[2])
			servedToMissExplain.add(s, at[3])
			servedToMissPatch.add(s, at[4])
			t.Logf("change %d: served %v after the update; seen %v after that (watched converter, explain; no watch: ObjectToTyped, explain, PatchMeta)",
				i, s.Sub(start).Round(time.Millisecond), sinceEach(s, at))
		})
	}
	t.Logf("%d schema changes (a field added):", schemaChanges)
	t.Logf("  update -> served (the root's new ?hash=): %s", spread(toServed))
	t.Logf("  watched: served -> typed.Converter: %s; served -> explain: %s (PatchMeta checked after)", &servedToTyped, &servedToExplain)
	t.Logf("  OpenAPI requests of the watched handle: %d root reads and %d documents", schemaCosts.roots, schemaCosts.docs)
	t.Logf("  no watch: served -> ObjectToTyped: %s; -> explain (Kind with the path): %s; -> PatchMeta: %s",
		&servedToMissTyped, &servedToMissExplain, &servedToMissPatch)
	t.Logf("  OpenAPI requests of the client with no watch: %d root reads and %d documents", schemaCosts.missRoots, schemaCosts.missDocs)

	// Kinds added to the group-version, new group-versions, and those
	// group-versions removed, each timed to the watched converter (Type)
	// and explain (Kind) seeing it. A new kind or group-version is also a
	// miss of their own (Client.DocumentOf), a removed one is not.
	type kindOfChange struct {
		name               string
		toServed           []time.Duration
		toTyped, toExplain series
		costs              costs
	}
	other := func(k *kindOfChange, i int, path string, change func() error, typedSeen, explainSeen func() bool) {
		t.Helper()
		measure(&k.costs, func() {
			served := servedAt(t, c.config, path)
			start := time.Now()
			if err := change(); err != nil {
				t.Fatal(err)
			}
			at := seen(fmt.Sprintf("%s %d", k.name, i), start, served, typedSeen, explainSeen)
			s := served()
			if s.IsZero() {
				t.Fatalf("%s %d: the server did not serve it within a minute", k.name, i)
			}
			k.toServed = append(k.toServed, s.Sub(start))
			k.toTyped.add(s, at[0])
			k.toExplain.add(s, at[1])
			t.Logf("%s %d: served %v after the update; seen %v after that (converter, explain)", k.name, i, s.Sub(start).Round(time.Millisecond), sinceEach(s, at))
		})
	}
	create := func(u *unstructured.Unstructured) func() error {
		return func() error { _, err := dyn.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); return err }
	}
	has := func(gvk schema.GroupVersionKind) (func() bool, func() bool) {
		return func() bool { _, err := conv.Type(ctx, gvk); return err == nil },
			func() bool { _, err := oc.Kind(ctx, gvk); return err == nil }
	}
	gone := func(gvk schema.GroupVersionKind) (func() bool, func() bool) {
		return func() bool { _, err := conv.Type(ctx, gvk); return errors.Is(err, openapi3.ErrNotFound) },
			func() bool { _, err := oc.Kind(ctx, gvk); return errors.Is(err, openapi3.ErrNotFound) }
	}
	newKind := &kindOfChange{name: "a kind added to the group-version"}
	for i := range others {
		kind := gvk.GroupVersion().WithKind(fmt.Sprintf("Second%02d", i))
		typedSeen, explainSeen := has(kind)
		other(newKind, i, path, create(benchCRD(group, kind.Kind, 2+i)), typedSeen, explainSeen)
	}
	newGV, removed := &kindOfChange{name: "a new group-version"}, &kindOfChange{name: "a group-version removed"}
	var newcomers []*unstructured.Unstructured
	for i := range others {
		kind := schema.GroupVersionKind{Group: fmt.Sprintf("newgv%02d.kubeatlas.test", i), Version: "v1", Kind: "Newcomer"}
		crd := benchCRD(kind.Group, kind.Kind, 10) // v1 alone: the group-version goes with it
		newcomers = append(newcomers, crd)
		typedSeen, explainSeen := has(kind)
		other(newGV, i, openapi3.PathFor(kind.GroupVersion()), create(crd), typedSeen, explainSeen)
	}
	for i, crd := range newcomers {
		kind := schema.GroupVersionKind{Group: fmt.Sprintf("newgv%02d.kubeatlas.test", i), Version: "v1", Kind: "Newcomer"}
		typedSeen, explainSeen := gone(kind)
		other(removed, i, openapi3.PathFor(kind.GroupVersion()), func() error {
			return dyn.Resource(crdGVR).Delete(ctx, crd.GetName(), metav1.DeleteOptions{})
		}, typedSeen, explainSeen)
	}
	for _, k := range []*kindOfChange{newKind, newGV, removed} {
		t.Logf("%s (%d): update -> served: %s; watched: served -> typed.Converter: %s; served -> explain: %s; %d root reads and %d documents",
			k.name, len(k.toServed), spread(k.toServed), &k.toTyped, &k.toExplain, k.costs.roots, k.costs.docs)
	}
}
