package controllerruntime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// hangingFront is an API server's front that passes requests to the fake
// until hang is set, and from then on accepts every request and never
// answers it, until the client goes (or the test ends). It counts the
// requests open.
type hangingFront struct {
	url     string
	hang    atomic.Bool
	open    atomic.Int64
	hung    chan struct{} // a value per request held
	release chan struct{} // closed when the test ends
}

func startHangingFront(t *testing.T) *hangingFront {
	t.Helper()
	_, base := discoverytest.Start(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	f := &hangingFront{hung: make(chan struct{}, 100), release: make(chan struct{})}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.open.Add(1)
		defer f.open.Add(-1)
		if !f.hang.Load() {
			proxy.ServeHTTP(w, r)
			return
		}
		select {
		case f.hung <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-f.release:
			http.Error(w, "the test ended", http.StatusServiceUnavailable)
		}
	}))
	var once sync.Once
	t.Cleanup(func() {
		// Before the fake's cleanup (t.Cleanup runs last in first): a
		// request still held would keep ts.Close waiting.
		once.Do(func() { close(f.release) })
		ts.Close()
	})
	f.url = ts.URL
	return f
}

// kindLoops returns the stacks of the goroutines of waiting Kinds.
func kindLoops() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "controllerruntime.(*waitingKind[") {
			out = append(out, g)
		}
	}
	return out
}

// kindReturnBound is how long after its context ends a waiting Kind's
// loop may take to end in this test: far above the 100 ms it is meant to
// take (a loaded CI machine), far below the 30 s refresh timeout that
// bounded it before.
const kindReturnBound = 2 * time.Second

// TestKindReturnsWhenItsContextEnds pins kubeatlas#34 for Kind: a Kind
// waiting for a kind the server does not serve, whose look at discovery is
// stuck on a server that accepts requests and never answers, ends its
// loop within a moment of its Start context ending, and leaves no request
// open at the server; whether the loop was refreshing after a miss of the
// snapshot it had, or reading the first snapshot. Before, the loop asked
// the mapper, which refreshes under context.Background() (bounded only by
// the client's 30 s refresh timeout), and outlived its context by as much.
func TestKindReturnsWhenItsContextEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		warm bool // a snapshot is read before the Kind starts
	}{
		{"refresh after a miss", true},
		{"first read", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			front := startHangingFront(t)
			p := controllerruntime.New(controllerruntime.WithoutMetrics())
			cl, err := cluster.New(&rest.Config{Host: front.url}, func(o *cluster.Options) { o.MapperProvider = p.MapperProvider })
			if err != nil {
				t.Fatal(err)
			}
			if tc.warm {
				if _, err := cl.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err != nil {
					t.Fatalf("a served kind: %v", err)
				}
			}
			front.hang.Store(true)

			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "missing.example.com", Version: "v1", Kind: "Missing"})
			src := controllerruntime.Kind(p, cl, obj, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})
			queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer queue.ShutDown()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := src.Start(ctx, queue); err != nil {
				t.Fatal(err)
			}
			// The loop looks at discovery, which the server holds.
			select {
			case <-front.hung:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiting Kind sent no request")
			}
			if len(kindLoops()) == 0 {
				t.Fatal("no waiting Kind's loop is running")
			}

			cancel()
			var loops []string
			var open int64
			for deadline := time.Now().Add(kindReturnBound); ; time.Sleep(10 * time.Millisecond) {
				loops, open = kindLoops(), front.open.Load()
				if len(loops) == 0 && open == 0 || time.Now().After(deadline) {
					break
				}
			}
			if len(loops) > 0 {
				t.Errorf("the waiting Kind's loop still runs %v after its context ended:\n%s", kindReturnBound, strings.Join(loops, "\n\n"))
			}
			if open > 0 {
				t.Errorf("%d requests still open at the server %v after the Kind's context ended", open, kindReturnBound)
			}
			if err := src.WaitForSync(context.Background()); err != nil {
				t.Errorf("WaitForSync of a kind never served: %v", err)
			}
		})
	}
}

// TestKindStartsWhenServed: a Kind waiting for a kind the server does not
// serve yet starts its source once discovery serves it, whether a change
// of discovery tells it so (here a refresh by another caller; the
// Provider's watch in a manager) or the snapshot it found at its start
// was older than the kind (it refreshes before it waits). The kind is the
// CustomResourceDefinition, whose objects the fake lists and watches, its
// group hidden from discovery until the test serves it again: the source
// then lists the CRD and queues it.
func TestKindStartsWhenServed(t *testing.T) {
	crdKind := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	served := apidiscoveryv2.APIVersionDiscovery{Version: "v1", Resources: []apidiscoveryv2.APIResourceDiscovery{{
		Resource: "customresourcedefinitions", SingularResource: "customresourcedefinition", Scope: apidiscoveryv2.ScopeCluster,
		ResponseKind: &metav1.GroupVersionKind{Group: crdKind.Group, Version: crdKind.Version, Kind: crdKind.Kind},
		Verbs:        []string{"get", "list", "watch"},
	}}}
	for _, tc := range []struct {
		name   string
		change bool // a change of discovery comes after the Kind's start; else the kind is served before it
	}{
		{"a change", true},
		{"a snapshot older than the kind", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, base := discoverytest.Start(t, discoverytest.WithCRDs(1, 1))
			if err := srv.RemoveGroup(crdKind.Group); err != nil {
				t.Fatal(err)
			}
			p := controllerruntime.New(controllerruntime.WithoutMetrics())
			cl, err := cluster.New(&rest.Config{Host: base}, func(o *cluster.Options) { o.MapperProvider = p.MapperProvider })
			if err != nil {
				t.Fatal(err)
			}
			mapper := cl.GetRESTMapper().(*restmapper.Mapper)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- cl.Start(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("cluster: %v", err)
				}
			}()
			// The mapper reads discovery without the kind.
			if _, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err != nil {
				t.Fatalf("a served kind: %v", err)
			}
			if !tc.change {
				if err := srv.SetGroupVersion(crdKind.Group, served); err != nil {
					t.Fatal(err)
				}
			}

			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(crdKind)
			src := controllerruntime.Kind(p, cl, obj, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})
			queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer queue.ShutDown()
			if err := src.Start(ctx, queue); err != nil {
				t.Fatal(err)
			}
			if tc.change {
				if err := srv.SetGroupVersion(crdKind.Group, served); err != nil {
					t.Fatal(err)
				}
				mapper.Reset() // another caller's refresh: a change the Kind is told of
			}
			got := make(chan reconcile.Request, 1)
			go func() {
				if r, shutdown := queue.Get(); !shutdown {
					got <- r
				}
			}()
			select {
			case r := <-got:
				if r.Name == "" {
					t.Errorf("queued %+v, want a CRD's name", r)
				}
			case <-time.After(5 * time.Second):
				// Half the Kind's retry period: it looks at once, not on
				// its next retry.
				t.Fatal("the Kind's source queued nothing within 5 s of its kind being served")
			}
		})
	}
}
