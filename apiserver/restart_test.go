package apiserver_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// An informer watching across a restart of the server resumes from a
// resourceVersion the new process never issued: it gets 410 Gone, relists,
// and ends up with what the upstream serves, a change made while the server
// was down included.
func TestInformerAcrossRestart(t *testing.T) {
	fake, url := startFake(t)
	first := serve(t, url, serveOptions{})
	r := newRecorder()
	startInformer(t, first, r)
	if err := fake.AddCRD(discoverytest.CRD{Group: "before.example.com", Versions: []string{"v1"}, Kind: "Before"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first group", func() bool { _, ok := r.get("before.example.com"); return ok })

	first.stop()
	if err := fake.AddCRD(discoverytest.CRD{Group: "during.example.com", Versions: []string{"v1"}, Kind: "During"}); err != nil {
		t.Fatal(err)
	}
	if err := fake.RemoveGroup("before.example.com"); err != nil {
		t.Fatal(err)
	}
	second := serve(t, url, serveOptions{addr: first.URL[len("https://"):], certDir: first.CertDir})

	// What the informer's reflector meets when it resumes: 410 Gone.
	r.mu.Lock()
	lastRV := r.rvs[len(r.rvs)-1]
	r.mu.Unlock()
	dc, err := dynamic.NewForConfig(second.Config)
	if err != nil {
		t.Fatal(err)
	}
	// As from the API server's watch cache, the watch is opened and its one
	// event is the error.
	w, err := dc.Resource(apigroupsGVR).Watch(context.Background(), metav1.ListOptions{ResourceVersion: strconv.FormatUint(lastRV, 10)})
	if err != nil {
		t.Fatalf("watch from the first process's resourceVersion %d failed as a request: %v; want an ERROR event", lastRV, err)
	}
	e := <-w.ResultChan()
	w.Stop()
	if err := apierrors.FromObject(e.Object); e.Type != watch.Error || !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from the first process's resourceVersion %d: %v %v, want an ERROR event with 410 Expired", lastRV, e.Type, err)
	}
	eventually(t, "the change made while the server was down", func() bool {
		_, during := r.get("during.example.com")
		_, before := r.get("before.example.com")
		return during && !before
	})
	// Nothing missed: the informer holds exactly what the server lists.
	list, err := dc.Resource(apigroupsGVR).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer to hold the server's list", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.state) != len(list.Items) {
			return false
		}
		for _, it := range list.Items {
			if _, ok := r.state[it.GetName()]; !ok {
				return false
			}
		}
		return true
	})
	// The new process answered nothing before its feed had filled it
	// (429, as the API server while its watch cache initializes): had it
	// listed an empty store, the informer would have deleted every group
	// and added it back.
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e != "delete before.example.com" && strings.HasPrefix(e, "delete ") {
			t.Errorf("the informer was told %q across the restart; only before.example.com went", e)
		}
	}
}
