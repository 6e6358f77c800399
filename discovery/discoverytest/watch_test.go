package discoverytest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

func restConfig(base string) *rest.Config { return &rest.Config{Host: base, QPS: 1000, Burst: 1000} }

// noWatchList makes a reflector list then watch, as before WatchList.
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func listWatcher(ri interface {
	List(context.Context, metav1.ListOptions) (runtime.Object, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}, watchList bool) cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc:  ri.List,
		WatchFuncWithContext: ri.Watch,
	}
	if watchList {
		return lw
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{})
}

// metadataResource adapts the metadata client's typed List to listWatcher.
type metadataResource struct{ metadata.ResourceInterface }

func (m metadataResource) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return m.ResourceInterface.List(ctx, opts)
}

type dynamicResource struct{ dynamic.ResourceInterface }

func (d dynamicResource) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return d.ResourceInterface.List(ctx, opts)
}

// change is one informer notification.
type change struct {
	kind     string // add, update, delete
	obj, old metav1.Object
}

// runInformer runs an informer until the test ends and returns its
// notifications once it has synced.
func runInformer(t *testing.T, lw cache.ListerWatcher, example runtime.Object) <-chan change {
	t.Helper()
	inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
	changes := make(chan change, 1000)
	accessor := func(o any) metav1.Object {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		m, err := metav1Object(o)
		if err != nil {
			t.Errorf("informer object %T: %v", o, err)
		}
		return m
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { changes <- change{kind: "add", obj: accessor(o)} },
		UpdateFunc: func(old, o any) { changes <- change{kind: "update", obj: accessor(o), old: accessor(old)} },
		DeleteFunc: func(o any) { changes <- change{kind: "delete", obj: accessor(o)} },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	syncCtx, syncCancel := context.WithTimeout(ctx, 5*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return changes
}

func metav1Object(o any) (metav1.Object, error) {
	switch o := o.(type) {
	case *metav1.PartialObjectMetadata:
		return o, nil
	case *unstructured.Unstructured:
		return o, nil
	}
	return nil, fmt.Errorf("not an object with metadata")
}

// expect waits for the next notification and checks its kind and name
// (either may be "" for any).
func expect(t *testing.T, changes <-chan change, kind, name string) change {
	t.Helper()
	select {
	case c := <-changes:
		if (kind != "" && c.kind != kind) || (name != "" && c.obj.GetName() != name) {
			t.Fatalf("got %s of %s, want %s of %s", c.kind, c.obj.GetName(), kind, name)
		}
		return c
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s of %s", kind, name)
	}
	return change{}
}

// expectSentinel adds a CRD and wants its add as the next notification. A
// watch delivers events in order, so a notification that should not have
// come, still on its way when the test made its last change, arrives first
// and fails the test.
func expectSentinel(t *testing.T, srv *discoverytest.Server, changes <-chan change) {
	t.Helper()
	if err := srv.AddCRD(discoverytest.CRD{Group: "sentinel.example.com", Versions: []string{"v1"}, Kind: "Sentinel"}); err != nil {
		t.Fatal(err)
	}
	expect(t, changes, "add", "sentinels.sentinel.example.com")
}

// relists counts what makes a reflector start from scratch: a LIST of CRDs,
// or a watch that asks for every object first (WatchList).
func relists(srv *discoverytest.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Path == crdPath && (!r.Watch || strings.Contains(r.Query, "sendInitialEvents=true")) {
			n++
		}
	}
	return n
}

func crdWatches(srv *discoverytest.Server) []discoverytest.Request {
	var out []discoverytest.Request
	for _, r := range srv.Requests() {
		if r.Path == crdPath && r.Watch {
			out = append(out, r)
		}
	}
	return out
}

// waitSent waits until the newest open CRD watch has sent something more
// (a bookmark), so that a reflector has an event on it: one that ends
// with none within a second counts as failed, and relists.
func waitSent(t *testing.T, srv *discoverytest.Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var before int64 = -1
	for time.Now().Before(deadline) {
		if ws := crdWatches(srv); len(ws) > 0 {
			last := ws[len(ws)-1].Bytes
			if before < 0 {
				before = last
			} else if last > before {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the watch sent nothing")
}

var modes = []struct {
	name      string
	watchList bool
}{
	{"WatchList", true},
	{"ListThenWatch", false},
}

func TestMetadataInformerSeesCRDChanges(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv, base := discoverytest.Start(t, discoverytest.WithCRDs(3, 1), discoverytest.WithBookmarkInterval(50*time.Millisecond))
			mc, err := metadata.NewForConfig(restConfig(base))
			if err != nil {
				t.Fatal(err)
			}
			changes := runInformer(t, listWatcher(metadataResource{mc.Resource(crdGVR)}, mode.watchList), &metav1.PartialObjectMetadata{})
			for range 3 {
				expect(t, changes, "add", "")
			}
			if got, want := relists(srv), 1; got != want {
				t.Errorf("%d lists, want %d", got, want)
			}
			for _, r := range srv.Requests() {
				if r.Path == crdPath && r.Watch != mode.watchList && strings.Contains(r.Query, "sendInitialEvents=true") != mode.watchList {
					t.Errorf("request %s?%s: not what a reflector in %s mode sends", r.Path, r.Query, mode.name)
				}
			}

			const group, name = "watch.example.com", "gadgets.watch.example.com"
			crd := discoverytest.CRD{Group: group, Versions: []string{"v1"}, Kind: "Gadget"}
			if err := srv.AddCRD(crd); err != nil {
				t.Fatal(err)
			}
			if c := expect(t, changes, "add", name); c.obj.GetGeneration() != 1 || c.obj.GetUID() == "" {
				t.Errorf("added: generation %d, uid %q", c.obj.GetGeneration(), c.obj.GetUID())
			}

			if err := srv.TouchCRDStatus(group, "gadgets"); err != nil {
				t.Fatal(err)
			}
			c := expect(t, changes, "update", name)
			if c.obj.GetGeneration() != 1 || c.obj.GetResourceVersion() == c.old.GetResourceVersion() {
				t.Errorf("status update: generation %d, resourceVersion %s after %s", c.obj.GetGeneration(), c.obj.GetResourceVersion(), c.old.GetResourceVersion())
			}

			crd.ShortNames = []string{"gd"}
			if err := srv.AddCRD(crd); err != nil {
				t.Fatal(err)
			}
			if c := expect(t, changes, "update", name); c.obj.GetGeneration() != 2 {
				t.Errorf("spec update: generation %d, want 2", c.obj.GetGeneration())
			}
			if err := srv.AddCRD(crd); err != nil { // the same again: no change
				t.Fatal(err)
			}

			if err := srv.LabelCRD(group, "gadgets", "team", "a"); err != nil {
				t.Fatal(err)
			}
			if c := expect(t, changes, "update", name); c.obj.GetGeneration() != 2 || c.obj.GetLabels()["team"] != "a" {
				t.Errorf("label update: generation %d, labels %v", c.obj.GetGeneration(), c.obj.GetLabels())
			}

			// A new schema is a new spec, as on a real server.
			if err := srv.ChangeSchema(schema.GroupVersion{Group: group, Version: "v1"}); err != nil {
				t.Fatal(err)
			}
			if c := expect(t, changes, "update", name); c.obj.GetGeneration() != 3 {
				t.Errorf("schema change: generation %d, want 3", c.obj.GetGeneration())
			}
			if err := srv.AddCRD(crd); err != nil { // the same again, its schema kept: no change
				t.Fatal(err)
			}

			if err := srv.RemoveCRD(group, "gadgets"); err != nil {
				t.Fatal(err)
			}
			expect(t, changes, "delete", name)
			if err := srv.TouchCRDStatus(group, "gadgets"); err == nil {
				t.Error("TouchCRDStatus of a removed CRD: no error")
			}
			expectSentinel(t, srv, changes)
		})
	}
}

func availability(t *testing.T, o metav1.Object) (status, reason string) {
	t.Helper()
	u := o.(*unstructured.Unstructured)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		c := c.(map[string]any)
		if c["type"] == "Available" {
			return c["status"].(string), c["reason"].(string)
		}
	}
	t.Fatalf("%s: no Available condition", o.GetName())
	return "", ""
}

func TestAPIServiceAvailability(t *testing.T) {
	srv, base := discoverytest.Start(t)
	gv := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	if err := srv.SetGroupVersion(gv.Group, apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: []apidiscoveryv2.APIResourceDiscovery{{
		Resource:     "pods",
		ResponseKind: &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: "PodMetrics"},
		Scope:        apidiscoveryv2.ScopeNamespace,
		Verbs:        []string{"get", "list"},
	}}}); err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(restConfig(base))
	if err != nil {
		t.Fatal(err)
	}
	ri := dc.Resource(apiServiceGVR)
	list, err := ri.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"v1.": true, "v1.apps": true, "v1beta1.metrics.k8s.io": true}
	for _, item := range list.Items {
		delete(want, item.GetName())
		if item.GetName() == "v1." {
			if group, _, _ := unstructured.NestedString(item.Object, "spec", "group"); group != "" {
				t.Errorf("v1.: spec.group %q", group)
			}
			if s, r := availability(t, &item); s != "True" || r != "Local" {
				t.Errorf("v1.: Available %s %s", s, r)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("APIServices missing: %v", want)
	}

	changes := runInformer(t, listWatcher(dynamicResource{ri}, true), &unstructured.Unstructured{})
	for range list.Items {
		expect(t, changes, "add", "")
	}
	if err := srv.SetStale(gv, true); err != nil {
		t.Fatal(err)
	}
	c := expect(t, changes, "update", "v1beta1.metrics.k8s.io")
	if s, r := availability(t, c.obj); s != "False" || r != "FailedDiscoveryCheck" {
		t.Errorf("stale: Available %s %s", s, r)
	}
	svc, _, _ := unstructured.NestedString(c.obj.(*unstructured.Unstructured).Object, "spec", "service", "name")
	if svc != "metrics-k8s-io" || c.obj.GetGeneration() != 2 {
		t.Errorf("stale: service %q, generation %d; want metrics-k8s-io, 2 (an aggregated API now)", svc, c.obj.GetGeneration())
	}

	if err := srv.SetStale(gv, false); err != nil {
		t.Fatal(err)
	}
	c = expect(t, changes, "update", "v1beta1.metrics.k8s.io")
	if s, _ := availability(t, c.obj); s != "True" || c.obj.GetGeneration() != 2 {
		t.Errorf("recovered: Available %s, generation %d; want True, 2 (a status change)", s, c.obj.GetGeneration())
	}

	if err := srv.RemoveGroup(gv.Group); err != nil {
		t.Fatal(err)
	}
	expect(t, changes, "delete", "v1beta1.metrics.k8s.io")
	// A sentinel: a new group's APIService, whose add must come next.
	if err := srv.SetGroupVersion("sentinel.example.com", apidiscoveryv2.APIVersionDiscovery{Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	expect(t, changes, "add", "v1.sentinel.example.com")
}

func TestReflectorResumesAfterDroppedWatch(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv, base := discoverytest.Start(t, discoverytest.WithoutBuiltins(), discoverytest.WithBookmarkInterval(50*time.Millisecond))
			mc, err := metadata.NewForConfig(restConfig(base))
			if err != nil {
				t.Fatal(err)
			}
			changes := runInformer(t, listWatcher(metadataResource{mc.Resource(crdGVR)}, mode.watchList), &metav1.PartialObjectMetadata{})
			lists := relists(srv)

			waitSent(t, srv)
			watches := len(crdWatches(srv))
			srv.DropWatches()
			if err := srv.AddCRD(discoverytest.CRD{Group: "after.example.com", Versions: []string{"v1"}, Kind: "After"}); err != nil {
				t.Fatal(err)
			}
			expect(t, changes, "add", "afters.after.example.com")
			if got := relists(srv); got != lists {
				t.Errorf("after a dropped watch: %d lists, want %d (a resume)", got, lists)
			}
			ws := crdWatches(srv)
			if len(ws) != watches+1 {
				t.Fatalf("%d watches after the drop, want %d", len(ws), watches+1)
			}
			if q := ws[len(ws)-1].Query; !strings.Contains(q, "resourceVersion=") || strings.Contains(q, "resourceVersion=0") || strings.Contains(q, "sendInitialEvents") {
				t.Errorf("resumed watch %q: want one from the last resourceVersion", q)
			}

			srv.CompactWatchHistory()
			srv.DropWatches()
			if err := srv.AddCRD(discoverytest.CRD{Group: "compacted.example.com", Versions: []string{"v1"}, Kind: "Compacted"}); err != nil {
				t.Fatal(err)
			}
			// A relist replaces the informer's cache: what it had comes
			// again as an update, in whatever order.
			got := map[string]string{}
			for range 2 {
				c := expect(t, changes, "", "")
				got[c.obj.GetName()] = c.kind
			}
			if got["compacteds.compacted.example.com"] != "add" || got["afters.after.example.com"] != "update" {
				t.Errorf("after the relist: %v", got)
			}
			if got := relists(srv); got != lists+1 {
				t.Errorf("after a compaction: %d lists, want %d", got, lists+1)
			}
			expectSentinel(t, srv, changes)
		})
	}
}

func TestWatchForbidden(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithWatchForbidden())
	mc, err := metadata.NewForConfig(restConfig(base))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = mc.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list: %v, want forbidden", err)
	}
	const msg = `customresourcedefinitions.apiextensions.k8s.io is forbidden: User "test" cannot list resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope`
	if err.Error() != msg {
		t.Errorf("list: %q, want %q", err, msg)
	}
	dc, err := dynamic.NewForConfig(restConfig(base))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(apiServiceGVR).Watch(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot watch resource \"apiservices\"") {
		t.Errorf("watch: %v, want forbidden", err)
	}

	srv.SetWatchForbidden(false)
	w, err := mc.Resource(crdGVR).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	srv.SetWatchForbidden(true) // ends the open watch
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Error("an event on an empty watch")
		}
	case <-time.After(5 * time.Second):
		t.Error("forbidding did not end the open watch")
	}
}

// TestDiscoveryDelay: a CRD's watch event goes out at once, and discovery
// shows the change the discovery delay later. In a synctest bubble, so
// that "at once" and "later" are points on the bubble's clock, not a race
// against the real one.
func TestDiscoveryDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 500 * time.Millisecond
		srv, hc, base := discoverytest.StartInProcess(t, discoverytest.WithDiscoveryDelay(delay))
		cfg := restConfig(base)
		cfg.Transport = hc.Transport
		mc, err := metadata.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		list, err := mc.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := mc.Resource(crdGVR).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		next := func(want watch.EventType) {
			t.Helper()
			select {
			case e := <-w.ResultChan():
				if e.Type != want {
					t.Fatalf("event %s %v, want %s", e.Type, e.Object, want)
				}
			case <-time.After(time.Minute):
				t.Fatalf("no %s event", want)
			}
		}
		served := func() int {
			resp, _ := do(t, hc, http.MethodGet, base+"/apis/late.example.com/v1")
			return resp.StatusCode
		}
		// expect checks what discovery serves now, just before the delay
		// has passed since start, and once it has.
		expect := func(start time.Time, now, after int) {
			t.Helper()
			if code := served(); code != now {
				t.Errorf("discovery at the event: %d, want %d", code, now)
			}
			time.Sleep(delay - time.Since(start) - time.Nanosecond)
			synctest.Wait()
			if code := served(); code != now {
				t.Errorf("discovery just before the delay: %d, want %d", code, now)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if code := served(); code != after {
				t.Errorf("discovery after the delay: %d, want %d", code, after)
			}
		}

		if err := srv.AddCRD(discoverytest.CRD{Group: "late", Versions: []string{"v1"}, Kind: "Late"}); err == nil {
			t.Error("a bad CRD: no error")
		}
		start := time.Now()
		if err := srv.AddCRD(discoverytest.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}); err != nil {
			t.Fatal(err)
		}
		next(watch.Added)
		if d := time.Since(start); d != 0 {
			t.Errorf("the ADDED event after %v of bubble time, want at once", d)
		}
		expect(start, http.StatusNotFound, http.StatusOK)

		start = time.Now()
		if err := srv.RemoveCRD("late.example.com", "lates"); err != nil {
			t.Fatal(err)
		}
		if err := srv.RemoveCRD("late.example.com", "lates"); err == nil {
			t.Error("removing a CRD whose removal is pending: no error")
		}
		next(watch.Deleted)
		expect(start, http.StatusOK, http.StatusNotFound)
	})
}

func TestRequestLogStreamsWatch(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(1, 1))
	mc, err := metadata.NewForConfig(restConfig(base))
	if err != nil {
		t.Fatal(err)
	}
	w, err := mc.Resource(crdGVR).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.ResultChan():
	case <-time.After(5 * time.Second):
		t.Fatal("no initial event")
	}
	rs := crdWatches(srv)
	if len(rs) != 1 || rs[0].Status != http.StatusOK || rs[0].Bytes == 0 || rs[0].Backend == "" {
		t.Fatalf("open watch logged as %+v, want one entry with status 200 and bytes", rs)
	}
	if st := srv.Stats(); st.Watches != 1 || st.Requests != 1 {
		t.Errorf("stats %+v, want one request, a watch", st)
	}
	open := rs[0]
	if err := srv.AddCRD(discoverytest.CRD{Group: "more.example.com", Versions: []string{"v1"}, Kind: "More"}); err != nil {
		t.Fatal(err)
	}
	<-w.ResultChan()
	w.Stop()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rs = crdWatches(srv)
		if rs[0].Bytes > open.Bytes && rs[0].Duration > open.Duration {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ended watch logged as %+v, opened as %+v", rs[0], open)
		}
	}
}

// openWatch starts a raw watch and returns its response and a reader of
// its events.
func openWatch(t *testing.T, ctx context.Context, url, accept string) (*http.Response, func() (watchLine, bool)) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	return resp, func() (watchLine, bool) {
		if !sc.Scan() {
			return watchLine{}, false
		}
		var l watchLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("watch line %q: %v", sc.Text(), err)
		}
		return l, true
	}
}

type watchLine struct {
	Type   string `json:"type"`
	Object struct {
		Kind       string            `json:"kind"`
		APIVersion string            `json:"apiVersion"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       json.RawMessage   `json:"spec"`
		Code       int               `json:"code"`
		Reason     string            `json:"reason"`
		Message    string            `json:"message"`
	} `json:"object"`
}

func TestWatchProtocol(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithoutBuiltins(), discoverytest.WithCRDs(2, 1), discoverytest.WithBookmarkInterval(50*time.Millisecond))
	resp, body := get(t, base+crdPath, "Accept", "application/json")
	var list struct {
		Kind     string          `json:"kind"`
		Metadata metav1.ListMeta `json:"metadata"`
		Items    []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
			Spec     struct {
				Group    string
				Scope    string
				Versions []struct {
					Name            string
					Served, Storage bool
				}
			} `json:"spec"`
			Status struct {
				Conditions []struct{ Type, Status string }
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "CustomResourceDefinitionList" || len(list.Items) != 2 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("list: %s with %d items, %s", list.Kind, len(list.Items), resp.Header.Get("Content-Type"))
	}
	crd := list.Items[0]
	if crd.Metadata.Name != "widget0000s.g000.stress.example.com" || crd.Spec.Group != "g000.stress.example.com" || crd.Spec.Scope != "Namespaced" ||
		len(crd.Spec.Versions) != 1 || !crd.Spec.Versions[0].Storage || len(crd.Status.Conditions) != 2 || crd.Status.Conditions[1].Type != "Established" {
		t.Errorf("CRD object: %+v", crd)
	}
	rv := list.Metadata.ResourceVersion

	const partialAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	resp, body = get(t, base+crdPath, "Accept", partialAccept)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1" || !strings.Contains(string(body), `"kind":"PartialObjectMetadataList"`) || strings.Contains(string(body), `"spec"`) {
		t.Errorf("metadata list: %s %s", ct, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		name, query, accept string
		want                []string // "TYPE kind name-or-rv"
	}{
		{"every object, then changes", "watch=true", "",
			[]string{"ADDED CustomResourceDefinition widget0000s.g000.stress.example.com", "ADDED CustomResourceDefinition widget0001s.g000.stress.example.com"}},
		{"metadata only", "watch=1&resourceVersion=0", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
			[]string{"ADDED PartialObjectMetadata widget0000s.g000.stress.example.com", "ADDED PartialObjectMetadata widget0001s.g000.stress.example.com"}},
		{"WatchList", "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", "",
			[]string{"ADDED CustomResourceDefinition widget0000s.g000.stress.example.com", "ADDED CustomResourceDefinition widget0001s.g000.stress.example.com", "BOOKMARK CustomResourceDefinition " + rv + " end"}},
		{"bookmarks", "watch=true&allowWatchBookmarks=true&resourceVersion=" + rv, "",
			[]string{"BOOKMARK CustomResourceDefinition " + rv, "BOOKMARK CustomResourceDefinition " + rv}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, next := openWatch(t, ctx, base+crdPath+"?"+tc.query, tc.accept)
			wantCT := "application/json"
			if tc.accept != "" {
				wantCT = tc.accept
			}
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != wantCT {
				t.Errorf("%d %s, want 200 %s", resp.StatusCode, ct, wantCT)
			}
			for _, want := range tc.want {
				l, ok := next()
				if !ok {
					t.Fatalf("stream ended before %s", want)
				}
				got := l.Type + " " + l.Object.Kind + " " + l.Object.Metadata.Name
				if l.Type == "BOOKMARK" {
					got = l.Type + " " + l.Object.Kind + " " + l.Object.Metadata.ResourceVersion
					if l.Object.Metadata.Annotations["k8s.io/initial-events-end"] == "true" {
						got += " end"
					}
				}
				if got != want {
					t.Errorf("event %q, want %q", got, want)
				}
			}
		})
	}

	t.Run("sendInitialEvents needs NotOlderThan", func(t *testing.T) {
		resp, _ := get(t, base+crdPath+"?watch=true&sendInitialEvents=true")
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%d, want 422", resp.StatusCode)
		}
	})
	t.Run("resume from history", func(t *testing.T) {
		if err := srv.LabelCRD("g000.stress.example.com", "widget0000s", "a", "b"); err != nil {
			t.Fatal(err)
		}
		_, next := openWatch(t, ctx, base+crdPath+"?watch=true&resourceVersion="+rv, "")
		if l, _ := next(); l.Type != "MODIFIED" || l.Object.Metadata.Labels["a"] != "b" || l.Object.Metadata.Generation != 1 {
			t.Errorf("resumed: %+v, want the label's MODIFIED", l)
		}
	})
	t.Run("resume after compaction", func(t *testing.T) {
		srv.CompactWatchHistory()
		resp, next := openWatch(t, ctx, base+crdPath+"?watch=true&resourceVersion="+rv, "")
		l, _ := next()
		if resp.StatusCode != http.StatusOK || l.Type != "ERROR" || l.Object.Code != http.StatusGone || l.Object.Reason != "Expired" ||
			!strings.HasPrefix(l.Object.Message, "too old resource version: "+rv+" (") {
			t.Errorf("%d %+v, want 200 and a 410 Expired ERROR event", resp.StatusCode, l)
		}
		if l, ok := next(); ok {
			t.Errorf("event %+v after the ERROR", l)
		}
	})
}

// TestWatchTimeoutSeconds: a quiet watch with timeoutSeconds ends after
// that long, with no event. In a synctest bubble, so that "that long" is
// exact, not a range of real time.
func TestWatchTimeoutSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, hc, base := discoverytest.StartInProcess(t, discoverytest.WithoutBuiltins(), discoverytest.WithCRDs(2, 1))
		_, body := do(t, hc, http.MethodGet, base+crdPath, "Accept", "application/json")
		var list struct {
			Metadata metav1.ListMeta `json:"metadata"`
		}
		if err := json.Unmarshal(body, &list); err != nil || list.Metadata.ResourceVersion == "" {
			t.Fatalf("list: %v, resourceVersion %q", err, list.Metadata.ResourceVersion)
		}
		start := time.Now()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+crdPath+"?watch=true&timeoutSeconds=1&resourceVersion="+list.Metadata.ResourceVersion, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		if sc.Scan() {
			t.Errorf("event %s on a quiet watch", sc.Text())
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("watch ended after %v of bubble time, want 1s", d)
		}
	})
}

func TestWatchesEndWithTheirClients(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	srv, err := discoverytest.NewServer(discoverytest.WithoutBuiltins(), discoverytest.WithCRDs(2, 1), discoverytest.WithBookmarkInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	client := &http.Client{Transport: &http.Transport{}}
	open := func(query string) (context.CancelFunc, *http.Response) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+crdPath+"?"+query, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return cancel, resp
	}
	// A client that goes away, two the server drops, and one after
	// StopWatches.
	gone, resp1 := open("watch=true&allowWatchBookmarks=true")
	_, resp2 := open("watch=true")
	_, resp3 := open("watch=true&timeoutSeconds=1")
	gone()
	srv.DropWatches()
	srv.StopWatches()
	_, resp4 := open("watch=true") // ends at once
	for _, resp := range []*http.Response{resp1, resp2, resp3, resp4} {
		_, _ = bufio.NewReader(resp.Body).ReadString(0) // to the end
		resp.Body.Close()
	}
	client.CloseIdleConnections()
	ts.Close()
	goleak.VerifyNone(t, ignore)
}
