package discovery_test

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// TestCheckConsistencyBySampling: an HA cluster that names none of its
// servers (no identity leases readable) behind a balancer that gives each
// connection to one server: the check samples through the URL on new
// connections, tells the disagreeing servers apart (one is upgraded and
// serves a new group), names what differs, and says it cannot be sure it
// saw every server; servers that agree are consistent.
func TestCheckConsistencyBySampling(t *testing.T) {
	for _, peer := range []bool{false, true} {
		opts := []discoverytest.Option{discoverytest.WithBackends(2, discoverytest.Sticky)}
		if peer {
			opts = append(opts, discoverytest.WithPeerAggregation())
		}
		srv, base := discoverytest.Start(t, opts...)
		c := newClient(t, base)
		ctx := context.Background()
		got, err := c.CheckConsistency(ctx, discovery.WithSamples(8))
		if err != nil || !got.Consistent() || got.Samples != 8 || got.Certainty != discovery.NotEveryServerSeen {
			t.Fatalf("peer=%v, agreeing servers: %+v %v", peer, got, err)
		}
		if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "New"}); err != nil {
			t.Fatal(err)
		}
		got, err = c.CheckConsistency(ctx, discovery.WithSamples(16))
		if err != nil || got.Consistent() || len(got.Servers) != 2 {
			t.Fatalf("peer=%v, disagreeing servers: %+v %v", peer, got, err)
		}
		gv := schema.GroupVersion{Group: "upgraded.example.com", Version: "v1"}
		if !slices.ContainsFunc(got.Differences, func(d discovery.Difference) bool { return d.GroupVersion == gv && d.Resource == "" }) {
			t.Errorf("peer=%v: the views differ by %+v, want %s", peer, got.Differences, gv)
		}
	}
	_, legacy := discoverytest.Start(t, discoverytest.WithGeneration(discoverytest.GenerationLegacy))
	if _, err := newClient(t, legacy).CheckConsistency(context.Background(), discovery.WithSamples(2)); err == nil {
		t.Errorf("a legacy server passed a consistency check it cannot take")
	}
	if _, err := newClient(t, "http://127.0.0.1:1").CheckConsistency(context.Background(), discovery.WithSamples(0)); err == nil {
		t.Errorf("zero samples accepted")
	}
}
