package tests

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// watched is a discovery client under Watch, with the time each resource
// was first seen added and removed by a subscriber.
type watched struct {
	dc *discovery.Client
	w  *watch.Watcher
	mu sync.Mutex
	at map[string]time.Time // "+gvr" or "-gvr"
}

func startWatched(t *testing.T, cfg *rest.Config, opts ...watch.Option) *watched {
	t.Helper()
	dc, err := discovery.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ww, err := watch.New(dc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	w := &watched{dc: dc, w: ww, at: map[string]time.Time{}}
	dc.Subscribe(func(ch discovery.Change) {
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, gvr := range ch.AddedResources {
			if _, ok := w.at["+"+gvr.String()]; !ok {
				w.at["+"+gvr.String()] = now
			}
		}
		for _, gvr := range ch.RemovedResources {
			if _, ok := w.at["-"+gvr.String()]; !ok {
				w.at["-"+gvr.String()] = now
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ww.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *watched) seen(key string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.at[key]
	return at, ok
}

func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
	}
}

// TestWatchOnRealServer: CRDs created and deleted on a real API server
// reach a subscriber as Changes, and a REST mapper over the same client
// maps a created kind, within the time it takes the server to serve it;
// the kind was asked for (and missed) before it existed. Times are logged
// for the README, not asserted. Then an idle minute's requests are
// counted.
func TestWatchOnRealServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	w := startWatched(t, c.config)
	waitUntil(t, "watching", 30*time.Second, func() bool { return w.w.Stats().Watching })
	m, err := restmapper.New(w.dc)
	if err != nil {
		t.Fatal(err)
	}

	const rounds = 10
	var toChange, toMapping, toRemoved []time.Duration
	for i := range rounds {
		kind := fmt.Sprintf("Watched%d", i)
		g := fmt.Sprintf("w%d.kubeatlas.test", i)
		gk := schema.GroupKind{Group: g, Kind: kind}
		for range 3 {
			if _, err := m.RESTMapping(gk); err == nil {
				t.Fatalf("%v mapped before its CRD existed", gk)
			}
		}
		obj := benchCRD(g, kind, 1)
		start := time.Now()
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: g, Version: "v1", Resource: obj.Object["spec"].(map[string]any)["names"].(map[string]any)["plural"].(string)}
		waitUntil(t, "the REST mapping of "+kind, 30*time.Second, func() bool {
			_, err := m.RESTMapping(gk)
			return err == nil
		})
		toMapping = append(toMapping, time.Since(start))
		waitUntil(t, "the Change adding "+gvr.String(), 30*time.Second, func() bool { _, ok := w.seen("+" + gvr.String()); return ok })
		at, _ := w.seen("+" + gvr.String())
		toChange = append(toChange, at.Sub(start))

		start = time.Now()
		if err := dyn.Resource(crdGVR).Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the Change removing "+gvr.String(), 30*time.Second, func() bool { _, ok := w.seen("-" + gvr.String()); return ok })
		at, _ = w.seen("-" + gvr.String())
		toRemoved = append(toRemoved, at.Sub(start))
	}
	t.Logf("CRD created -> Change: %s", spread(toChange))
	t.Logf("CRD created -> RESTMapping: %s", spread(toMapping))
	t.Logf("CRD deleted -> Change: %s", spread(toRemoved))
	st, ws := w.dc.Stats(), w.w.Stats()
	t.Logf("%d rounds: %d discovery requests (%d not modified), %d watch requests, %d watch events (%d could change discovery)",
		rounds, st.Requests, st.NotModified, ws.Requests, ws.Events, ws.Triggers)

	// An idle minute: the upgrade poll's one round, two requests.
	time.Sleep(2 * time.Second) // let the last settle rounds end
	before, watchedBefore := w.dc.Stats(), w.w.Stats()
	time.Sleep(time.Minute)
	after, watchedAfter := w.dc.Stats(), w.w.Stats()
	idle := after.Requests - before.Requests
	t.Logf("idle minute: %d discovery requests, %d watch requests, %d watch events", idle, watchedAfter.Requests-watchedBefore.Requests, watchedAfter.Events-watchedBefore.Events)
	if idle > 2 {
		t.Errorf("an idle minute cost %d discovery requests, want at most 2", idle)
	}
}

// TestWatchForbiddenOnRealServer: a user who may read discovery but not
// list CRDs gets the fallback poll, reported in Stats, and still hears of
// a new CRD.
func TestWatchForbiddenOnRealServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	viewer := rest.CopyConfig(c.config)
	viewer.BearerToken = viewerToken
	if _, err := dynamic.NewForConfigOrDie(viewer).Resource(crdGVR).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the viewer may list CRDs (%v): the test needs it not to", err)
	}
	w := startWatched(t, viewer, watch.WithFallbackPoll(time.Second))
	waitUntil(t, "the fallback", 30*time.Second, func() bool { return w.w.Stats().Forbidden })
	if w.w.Stats().Watching {
		t.Error("Watching while polling")
	}
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	obj := benchCRD("forbidden.kubeatlas.test", "Polled", 1)
	start := time.Now()
	if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plural := obj.Object["spec"].(map[string]any)["names"].(map[string]any)["plural"].(string)
	gvr := schema.GroupVersionResource{Group: "forbidden.kubeatlas.test", Version: "v1", Resource: plural}
	waitUntil(t, "the polled Change", 30*time.Second, func() bool { _, ok := w.seen("+" + gvr.String()); return ok })
	at, _ := w.seen("+" + gvr.String())
	t.Logf("forbidden to watch, polling every second: CRD created -> Change in %v", at.Sub(start).Round(time.Millisecond))
}

// spread is the median and the largest of some durations.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("median %v, max %v (n=%d)", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}
