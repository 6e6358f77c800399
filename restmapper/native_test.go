package restmapper

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestCommonQuestionsSkipClientGo: plain lookups are answered from the
// native index, without building client-go's mapper; an ambiguous one
// builds it. (That the answers are client-go's is the differential test's
// job.)
func TestCommonQuestionsSkipClientGo(t *testing.T) {
	m := newTestMapper(t, []docserver.Option{docserver.WithCRDs(20, 4)})
	for _, gk := range []schema.GroupKind{{Group: "apps", Kind: "Deployment"}, {Group: "g001.stress.example.com", Kind: "Widget0001"}, {Kind: "Pod"}} {
		if _, err := m.RESTMapping(gk); err != nil {
			t.Fatal(err)
		}
	}
	// Several candidates are picked as client-go's priorities pick them:
	// widget0001s is served in v1 and v1beta1, events in core and
	// events.k8s.io.
	for _, r := range []schema.GroupVersionResource{{Resource: "deployments"}, {Resource: "deploy"}, {Resource: "widget0001s", Version: "v1beta1"}, {Resource: "pod"},
		{Resource: "widget0001s"}, {Version: "v1", Resource: "events"}, {Resource: "events"}} {
		if _, err := m.KindFor(r); err != nil {
			t.Fatal(err)
		}
		if _, err := m.ResourceFor(r); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := m.current(context.Background())
	if st.delegate != nil {
		t.Errorf("client-go's mapper was built for plain questions")
	}
	// Every candidate, listed: client-go's mapper answers.
	if _, err := m.KindsFor(schema.GroupVersionResource{Resource: "widget0001s"}); err != nil {
		t.Fatal(err)
	}
	if st.delegate == nil {
		t.Errorf("a question with several answers did not go to client-go's mapper")
	}
}

// TestMemoIsBounded: asking for ever new names does not grow the memo
// without end, and answers stay right past the bound.
func TestMemoIsBounded(t *testing.T) {
	m := newTestMapper(t, nil, WithMissRefreshInterval(time.Hour))
	st, _ := m.current(context.Background())
	st.memo.limit = 8 // the real bound, 131072, takes long to reach
	for i := range 2000 {
		m.KindFor(schema.GroupVersionResource{Resource: fmt.Sprintf("nosuch%d", i)})
	}
	kept := 0
	st.memo.m.Range(func(any, any) bool { kept++; return true })
	if kept > 8 || st.memo.n.Load() != int64(kept) {
		t.Errorf("the memo keeps %d answers (counted %d), over the bound of 8", kept, st.memo.n.Load())
	}
	if gvk, err := m.KindFor(schema.GroupVersionResource{Resource: "deployments"}); err != nil || gvk.Kind != "Deployment" {
		t.Errorf("past the bound: %v %v", gvk, err)
	}
}

// TestFirstLookupsAllocateNothing pins the Mapper doc: once a generation's
// indexes are built, a first KindFor and RESTMapping of an input allocate
// nothing (answers are not kept per input: keeping them was most of the
// cost of a new mapper's first lookups).
func TestFirstLookupsAllocateNothing(t *testing.T) {
	m := newTestMapper(t, []docserver.Option{docserver.WithCRDs(200, 20)})
	// Builds the indexes.
	if _, err := m.KindFor(schema.GroupVersionResource{Resource: "pods"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Kind: "Pod"}); err != nil {
		t.Fatal(err)
	}
	var inputs []schema.GroupVersionResource
	for i := range 200 {
		g := fmt.Sprintf("g%03d.stress.example.com", i%20)
		inputs = append(inputs, schema.GroupVersionResource{Resource: fmt.Sprintf("widget%04ds", i)},
			schema.GroupVersionResource{Group: g, Resource: fmt.Sprintf("widget%04d", i)})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, in := range inputs {
		gvk, err := m.KindFor(in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// A few allocations may come from elsewhere in the process (the
	// server's idle connection, the runtime).
	if n := after.Mallocs - before.Mallocs; n > uint64(len(inputs)/10) {
		t.Errorf("%d first lookups allocated %d times", 2*len(inputs), n)
	}
}

// newTestMapper is a mapper over a fake server started with srvOpts.
func newTestMapper(t *testing.T, srvOpts []docserver.Option, opts ...Option) *Mapper {
	t.Helper()
	_, base := docserver.Start(t, srvOpts...)
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// docSnapshot is the snapshot of a fake server started with srvOpts.
func docSnapshot(tb testing.TB, srvOpts ...docserver.Option) *discovery.Snapshot {
	tb.Helper()
	_, base := docserver.Start(tb, srvOpts...)
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		tb.Fatal(err)
	}
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return snap
}

// BenchmarkNativeIndex: what scansBeforeIndex weighs, at 3000 custom
// resources: a lookup that scans the entries, against building the kind
// and name maps and a lookup through them.
func BenchmarkNativeIndex(b *testing.B) {
	snap := docSnapshot(b, docserver.WithCRDs(3000, 250))
	gk := schema.GroupKind{Group: "g017.stress.example.com", Kind: "Widget1017"}
	var buf [8]int32
	entries := func() *nativeIndex {
		x := newNativeIndex(snap)
		x.entriesOnce.Do(x.buildEntries)
		return x
	}
	b.Run("entries", func(b *testing.B) {
		for b.Loop() {
			entries()
		}
	})
	x := entries()
	b.Run("kind-scan", func(b *testing.B) {
		for b.Loop() {
			x.kindScans.Store(0)
			if len(x.kindEntries(gk, buf[:0])) != 2 {
				b.Fatal("want the kind in two versions")
			}
		}
	})
	b.Run("kind-map", func(b *testing.B) {
		for b.Loop() {
			x.buildKinds()
		}
	})
	b.Run("kind-indexed", func(b *testing.B) {
		x.kindScans.Store(scansBeforeIndex)
		for b.Loop() {
			x.kindEntries(gk, buf[:0])
		}
	})
	b.Run("name-scan", func(b *testing.B) {
		for b.Loop() {
			x.nameScans.Store(0)
			x.nameEntries("widget1017s", buf[:0])
		}
	})
	b.Run("name-map", func(b *testing.B) {
		for b.Loop() {
			x.buildNames()
		}
	})
}

// TestNativeScansMatchIndex: the first lookups, which scan, find the same
// entries in the same order as the later ones, which go through the maps
// (whose answers the differential test holds to client-go's).
func TestNativeScansMatchIndex(t *testing.T) {
	snap := docSnapshot(t, docserver.WithCRDs(40, 6))
	x := newNativeIndex(snap)
	x.entriesOnce.Do(x.buildEntries)
	var kinds []schema.GroupKind
	var names []string
	for i := range x.entries {
		e := &x.entries[i]
		kinds = append(kinds, e.mapping.GroupVersionKind.GroupKind(), schema.GroupKind{Kind: e.kind()})
		names = append(names, e.plural(), e.singular)
	}
	kinds = append(kinds, schema.GroupKind{Group: "nope", Kind: "Nope"})
	names = append(names, "nope", "")
	var buf [8]int32
	for _, gk := range kinds {
		x.kindScans.Store(0)
		scanned := fmt.Sprint(x.kindEntries(gk, buf[:0]))
		x.kindScans.Store(scansBeforeIndex)
		if indexed := fmt.Sprint(x.kindEntries(gk, buf[:0])); scanned != indexed {
			t.Errorf("kind %v: scan finds %s, the index %s", gk, scanned, indexed)
		}
	}
	for _, name := range names {
		x.nameScans.Store(0)
		scanned := fmt.Sprint(x.nameEntries(name, buf[:0]))
		x.nameScans.Store(scansBeforeIndex)
		if indexed := fmt.Sprint(x.nameEntries(name, buf[:0])); scanned != indexed {
			t.Errorf("name %q: scan finds %s, the index %s", name, scanned, indexed)
		}
	}
	if len(x.entries) < 40 {
		t.Fatalf("%d entries", len(x.entries))
	}
	// The first kind lookups of an index whose entries are not built read
	// the snapshot (scanMapping), and answer as the entries do, with or
	// without a version, and build nothing.
	versions := []string{"", "nope"}
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			versions = append(versions, v.Version)
		}
	}
	x.kindScans.Store(scansBeforeIndex)
	for _, gk := range kinds {
		for _, version := range versions {
			want, wantOK := x.mapping(gk, version)
			fresh := newNativeIndex(snap)
			got, ok := fresh.mapping(gk, version)
			if ok != wantOK || ok && *got != *want {
				t.Errorf("kind %v version %q: the snapshot's scan answers %v %v, the entries %v %v", gk, version, got, ok, want, wantOK)
			}
			if fresh.entries != nil || fresh.built.Load() {
				t.Fatalf("kind %v: a first lookup built the entries", gk)
			}
		}
	}
	// The maps are built once the scans are spent, and not before.
	y := newNativeIndex(snap)
	for i := range scansBeforeIndex {
		if _, ok := y.mapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, ""); !ok || y.byKind != nil {
			t.Fatalf("lookup %d: answered %v, kind map built: %v", i, ok, y.byKind != nil)
		}
	}
	if _, ok := y.mapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, ""); !ok || y.byKind == nil {
		t.Errorf("after %d scans: answered %v, kind map built: %v", scansBeforeIndex, ok, y.byKind != nil)
	}
}

// TestNativeSnapshotScanMatchesEntries: a first kind lookup, read from the
// snapshot itself (scanMapping), answers as the entries do where the
// answer depends on more than the kind's first resource: a preferred
// version that is not the first, a kind twice in one version, a version
// asked for that does not serve it, a snapshot the index does not model.
func TestNativeSnapshotScanMatchesEntries(t *testing.T) {
	resources := func(gv string, rs ...string) []byte {
		return []byte(`{"groupVersion":"` + gv + `","resources":[` + strings.Join(rs, ",") + `]}`)
	}
	res := func(name, kind string) string {
		return `{"name":"` + name + `","singularName":"","namespaced":true,"kind":"` + kind + `","verbs":["get"]}`
	}
	for name, odd := range map[string]string{"modelled": res("things", "Thing"), "not modelled": res("Things", "Thing")} {
		t.Run(name, func(t *testing.T) {
			docs := map[string][]byte{
				"/api":    []byte(`{"versions":["v1"]}`),
				"/api/v1": resources("v1", res("pods", "Pod")),
				"/apis": []byte(`{"groups":[` +
					`{"name":"example.com","versions":[{"groupVersion":"example.com/v1","version":"v1"},{"groupVersion":"example.com/v2","version":"v2"},{"groupVersion":"example.com/v3","version":"v3"}],"preferredVersion":{"groupVersion":"example.com/v2","version":"v2"}},` +
					`{"name":"other.com","versions":[{"groupVersion":"other.com/v1","version":"v1"}],"preferredVersion":{"groupVersion":"other.com/v1","version":"v1"}}]}`),
				"/apis/example.com/v1": resources("example.com/v1", res("widgets", "Widget"), res("gadgets", "Gadget"), res("gizmos", "Gadget")),
				"/apis/example.com/v2": resources("example.com/v2", res("widgets", "Widget"), res("gadgets", "Gadget")),
				"/apis/example.com/v3": resources("example.com/v3", res("sprockets", "Sprocket"), res("widgets", "Widget")),
				"/apis/other.com/v1":   resources("other.com/v1", res("widgets", "Widget"), odd),
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, ok := docs[r.URL.Path]
				if !ok {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			c, err := discovery.NewForHTTPClient(nil, srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := c.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			x := newNativeIndex(snap)
			x.kindScans.Store(scansBeforeIndex)
			answered := 0
			for _, group := range []string{"", "example.com", "other.com", "nope.com"} {
				for _, kind := range []string{"Pod", "Widget", "Gadget", "Sprocket", "Thing", "Nope"} {
					for _, version := range []string{"", "v1", "v2", "v3", "v9"} {
						gk := schema.GroupKind{Group: group, Kind: kind}
						want, wantOK := x.mapping(gk, version)
						fresh := newNativeIndex(snap)
						got, ok := fresh.mapping(gk, version)
						if ok != wantOK || ok && *got != *want {
							t.Errorf("%v version %q: the snapshot's scan answers %v %v, the entries %v %v", gk, version, got, ok, want, wantOK)
						}
						if ok {
							answered++
						}
					}
				}
			}
			if modelled := name == "modelled"; (answered > 0) != modelled || x.usableSnapshot() != modelled {
				t.Errorf("%d answers, usable %v", answered, x.usableSnapshot())
			}
		})
	}
}
