package apiserver_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

var apigroupsGVR = schema.GroupVersionResource{Group: "discovery.kubeatlas.io", Version: "v1alpha1", Resource: "apigroups"}

// recorder is an informer's event handler that keeps what it saw.
type recorder struct {
	mu     sync.Mutex
	events []string          // "add name", "update name", "delete name"
	rvs    []uint64          // resourceVersions of adds, updates and deletes, in order
	state  map[string]string // name -> the object's preferred version and versions
}

func newRecorder() *recorder { return &recorder{state: map[string]string{}} }

func (r *recorder) record(kind string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u := obj.(*unstructured.Unstructured)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, kind+" "+u.GetName())
	rv, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	r.rvs = append(r.rvs, rv)
	if kind == "delete" {
		delete(r.state, u.GetName())
		return
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "status", "versions")
	s := ""
	for _, v := range versions {
		s += v.(map[string]any)["version"].(string) + ","
	}
	r.state[u.GetName()] = s
}

func (r *recorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.record("add", o) },
		UpdateFunc: func(_, o any) { r.record("update", o) },
		DeleteFunc: func(o any) { r.record("delete", o) },
	}
}

func (r *recorder) has(event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == event {
			return true
		}
	}
	return false
}

func (r *recorder) get(name string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.state[name]
	return v, ok
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startInformer(t *testing.T, s *served, r *recorder) {
	t.Helper()
	dc, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	inf := f.ForResource(apigroupsGVR).Informer()
	if _, err := inf.AddEventHandler(r.handler()); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	t.Cleanup(f.Shutdown)
	t.Cleanup(cancel) // before Shutdown, which waits for the informers
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
}

// A dynamic informer on apigroups sees a new CRD's group added, a new
// version of it as an update, and the group's removal as a delete, with
// resourceVersions that only grow.
func TestInformerSeesAddUpdateDelete(t *testing.T) {
	fake, url := startFake(t)
	s := serve(t, url, serveOptions{})
	r := newRecorder()
	startInformer(t, s, r)
	if v, ok := r.get("core"); !ok || v != "v1," {
		t.Fatalf("core group: %q, %v", v, ok)
	}
	if _, ok := r.get("apps"); !ok {
		t.Fatal("no apps group")
	}
	r.mu.Lock()
	synced := len(r.rvs)
	r.mu.Unlock()

	apps, _ := s.Stores.Groups.Peek("apps")
	if err := fake.AddCRD(discoverytest.CRD{Group: "widgets.example.com", Versions: []string{"v1"}, Kind: "Widget"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new group's add", func() bool { return r.has("add widgets.example.com") })
	// A group the change did not touch keeps its object: no event for it.
	if now, _ := s.Stores.Groups.Peek("apps"); now != apps {
		t.Errorf("apps changed from resourceVersion %s to %s though its discovery did not", apps.GetResourceVersion(), now.GetResourceVersion())
	}
	if err := fake.AddCRD(discoverytest.CRD{Group: "widgets.example.com", Versions: []string{"v2", "v1"}, Kind: "Widget"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new version's update", func() bool { v, _ := r.get("widgets.example.com"); return v == "v2,v1," })
	if err := fake.RemoveGroup("widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the group's delete", func() bool { return r.has("delete widgets.example.com") })

	r.mu.Lock()
	defer r.mu.Unlock()
	// After the initial list (whose adds come in name order), every event's
	// resourceVersion is above the one before.
	for i := synced + 1; i < len(r.rvs); i++ {
		if r.rvs[i] <= r.rvs[i-1] {
			t.Errorf("resourceVersion did not grow: %v then %v (%v)", r.rvs[i-1], r.rvs[i], r.events[i-1:i+1])
		}
	}
}
