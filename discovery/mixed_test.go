package discovery_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// TestDisagreeingServersDoNotFlap: behind a balancer that sends each
// request to the next of two API servers that disagree (one serves a
// group the other does not, as during an upgrade), 100 refreshes tell
// subscribers once (the group, found partial), not every other refresh;
// the snapshot is Mixed and names what only one server serves. A real
// change (a CRD on both servers) is told once, the moment one server
// shows it. When the servers agree again, the snapshot is no longer
// mixed, without a change event.
func TestDisagreeingServersDoNotFlap(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin))
	upgraded := schema.GroupVersion{Group: "upgraded.example.com", Version: "v1"}
	if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: upgraded.Group, Versions: []string{"v1"}, Kind: "New"}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, base)
	ctx := context.Background()
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var changes []discovery.Change
	defer c.Subscribe(func(ch discovery.Change) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, ch)
	})()
	refresh := func(n int) {
		t.Helper()
		for range n {
			if _, err := c.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	events := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(changes)
	}

	refresh(100)
	if n := events(); n > 1 {
		t.Fatalf("100 refreshes through disagreeing servers: %d change events, want at most 1", n)
	}
	s := c.Current()
	versions, resources := s.Partial()
	if !s.Mixed() || !slices.Equal(versions, []schema.GroupVersion{upgraded}) || len(resources) != 1 || resources[0].GroupVersion() != upgraded {
		t.Fatalf("mixed %v, partial %v %v: want the upgraded group only", s.Mixed(), versions, resources)
	}
	if _, ok := s.Version(upgraded); !ok {
		t.Errorf("a group-version one server serves is missing from the union")
	}

	// A real change: a CRD on both servers.
	before := events()
	both := schema.GroupVersion{Group: "both.example.com", Version: "v1"}
	for _, b := range srv.Backends() {
		if err := b.AddCRD(discoverytest.CRD{Group: both.Group, Versions: []string{"v1"}, Kind: "Both"}); err != nil {
			t.Fatal(err)
		}
	}
	refresh(100)
	if n := events() - before; n != 1 {
		t.Errorf("a CRD added on both servers: %d change events over 100 refreshes, want 1", n)
	}
	if _, ok := c.Current().Version(both); !ok {
		t.Errorf("the CRD on both servers is not in the snapshot")
	}
	if versions, _ := c.Current().Partial(); slices.Contains(versions, both) {
		t.Errorf("a group-version both servers serve is partial")
	}

	// The servers agree again: one view only, no longer mixed.
	before = events()
	if err := srv.Backends()[0].AddCRD(discoverytest.CRD{Group: upgraded.Group, Versions: []string{"v1"}, Kind: "New"}); err != nil {
		t.Fatal(err)
	}
	refresh(20)
	if s := c.Current(); s.Mixed() {
		v, r := s.Partial()
		t.Errorf("servers that agree again: still mixed (%v %v)", v, r)
	}
	if n := events() - before; n != 0 {
		t.Errorf("servers coming to agree changed nothing served, but told %d changes", n)
	}
}
