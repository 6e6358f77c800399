package discovery_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

func TestDiff(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(10, 2))
	c := newClient(t, base)
	ctx := context.Background()
	s0, _ := c.Refresh(ctx)
	if d := discovery.Diff(s0, s0); !d.Empty() {
		t.Errorf("a snapshot differs from itself: %+v", d)
	}
	gvs := 0
	for _, g := range s0.Groups() {
		gvs += len(g.Versions)
	}
	if d := discovery.Diff(nil, s0); len(d.AddedVersions) != gvs || len(d.AddedResources) < 50 || d.Old != nil {
		t.Errorf("from nothing: %d versions (want %d), %d resources", len(d.AddedVersions), gvs, len(d.AddedResources))
	}
	crd := docserver.CRD{Group: "diff.example.com", Versions: []string{"v1"}, Kind: "Diff", Namespaced: true}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: crd.Group, Version: "v1"}
	s1, _ := c.Refresh(ctx)
	d := discovery.Diff(s0, s1)
	if !slices.Equal(d.AddedVersions, []schema.GroupVersion{gv}) || !slices.Equal(d.AddedResources, []schema.GroupVersionResource{gv.WithResource("diffs")}) ||
		len(d.RemovedVersions)+len(d.ChangedResources)+len(d.RemovedResources) != 0 {
		t.Errorf("install: %+v", d)
	}
	crd.Namespaced = false
	if err := srv.AddCRD(crd); err != nil { // re-scoped
		t.Fatal(err)
	}
	if err := srv.SetStale(schema.GroupVersion{Group: "g001.stress.example.com", Version: "v1"}, true); err != nil {
		t.Fatal(err)
	}
	s2, _ := c.Refresh(ctx)
	d = discovery.Diff(s1, s2)
	if !slices.Equal(d.ChangedResources, []schema.GroupVersionResource{gv.WithResource("diffs")}) ||
		!slices.Equal(d.ChangedVersions, []schema.GroupVersion{{Group: "g001.stress.example.com", Version: "v1"}}) {
		t.Errorf("re-scope and stale: %+v", d)
	}
	if err := srv.RemoveCRD(crd.Group, "diffs"); err != nil {
		t.Fatal(err)
	}
	s3, _ := c.Refresh(ctx)
	d = discovery.Diff(s2, s3)
	if !slices.Equal(d.RemovedVersions, []schema.GroupVersion{gv}) || !slices.Equal(d.RemovedResources, []schema.GroupVersionResource{gv.WithResource("diffs")}) {
		t.Errorf("delete: %+v", d)
	}
}

// TestPollNotifies: a subscriber hears of a CRD installed while Poll runs,
// unchanged rounds cost 304s only, and Poll ends with its context.
func TestPollNotifies(t *testing.T) {
	srv, base := docserver.Start(t)
	c := newClient(t, base)
	var mu sync.Mutex
	var changes []discovery.Change
	unsubscribe := c.Subscribe(func(ch discovery.Change) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, ch)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Poll(ctx, 10*time.Millisecond) }()

	waitFor := func(n int) []discovery.Change {
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := slices.Clone(changes)
			mu.Unlock()
			if len(got) >= n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d changes, want %d", len(got), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	first := waitFor(1)
	if first[0].Old != nil || len(first[0].AddedResources) < 50 {
		t.Errorf("the first change should bring the whole snapshot: %d resources", len(first[0].AddedResources))
	}
	// Unchanged rounds follow: 304s only.
	deadline := time.Now().Add(10 * time.Second)
	for srv.Stats().NotModified < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	st := srv.Stats()
	if st.NotModified < 2 || st.Requests-st.NotModified != 2 {
		t.Errorf("polling an unchanged cluster: %+v, want only 304s after the first read", st)
	}
	if err := srv.AddCRD(docserver.CRD{Group: "poll.example.com", Versions: []string{"v1"}, Kind: "Poll"}); err != nil {
		t.Fatal(err)
	}
	second := waitFor(2)[1]
	if !slices.Contains(second.AddedResources, schema.GroupVersionResource{Group: "poll.example.com", Version: "v1", Resource: "polls"}) {
		t.Errorf("change %+v lacks the new CRD", second)
	}
	unsubscribe()
	if err := srv.RemoveCRD("poll.example.com", "polls"); err != nil {
		t.Fatal(err)
	}
	// A refresh returns after the round that made its snapshot has told
	// every subscriber (notify runs within the shared refresh), so once one
	// returns a snapshot without the CRD, the Change that removes it has
	// been delivered to whoever was subscribed.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if s, _ := c.Refresh(context.Background()); s != nil {
			if _, ok := s.Group("poll.example.com"); !ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the removed CRD is still in discovery")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	n := len(changes)
	mu.Unlock()
	if n != 2 {
		t.Errorf("%d changes after unsubscribing, want 2", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Poll did not return after its context ended")
	}
}
