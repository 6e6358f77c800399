package discovery_test

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// TestCheckConsistency: an HA cluster whose API servers disagree (one is
// upgraded and serves a new group) is found out, with what differs; even
// with peer-aggregated discovery, whose merged view hides the difference.
func TestCheckConsistency(t *testing.T) {
	for _, peer := range []bool{false, true} {
		opts := []discoverytest.Option{discoverytest.WithBackends(2, discoverytest.RoundRobin)}
		if peer {
			opts = append(opts, discoverytest.WithPeerAggregation())
		}
		srv, base := discoverytest.Start(t, opts...)
		c := newClient(t, base)
		ctx := context.Background()
		got, err := c.CheckConsistency(ctx, 6)
		if err != nil || !got.Consistent() || got.Views[0].Seen != 6 {
			t.Fatalf("peer=%v, agreeing servers: %+v %v", peer, got, err)
		}
		if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "New"}); err != nil {
			t.Fatal(err)
		}
		got, err = c.CheckConsistency(ctx, 6)
		if err != nil || got.Consistent() || len(got.Views) != 2 || got.Views[0].Seen != 3 || got.Views[1].Seen != 3 {
			t.Fatalf("peer=%v, disagreeing servers: %+v %v", peer, got, err)
		}
		d := discovery.Diff(got.Views[0].Snapshot, got.Views[1].Snapshot)
		gv := schema.GroupVersion{Group: "upgraded.example.com", Version: "v1"}
		added, removed := d.AddedVersions, d.RemovedVersions
		if !slices.Equal(append(added, removed...), []schema.GroupVersion{gv}) {
			t.Errorf("peer=%v: the views differ by %+v, want %s", peer, d, gv)
		}
	}
	_, legacy := discoverytest.Start(t, discoverytest.WithGeneration(discoverytest.GenerationLegacy))
	if _, err := newClient(t, legacy).CheckConsistency(context.Background(), 2); err == nil {
		t.Errorf("a legacy server passed a consistency check it cannot take")
	}
	if _, err := newClient(t, "http://127.0.0.1:1").CheckConsistency(context.Background(), 0); err == nil {
		t.Errorf("zero samples accepted")
	}
}
