package restmapper_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestFollowerProvesWhatItsLeaderLacks: a mapper over a client that
// follows a leader (discovery.Client.FollowLeader, as package shared's
// identities follow the one that runs the server's watch) does not map
// a kind its leader saw the server stop serving: a lookup with a version
// of a resource the leader's new content lacks proves the client's own
// view first (its two requests) and answers no match. Lookups of what the
// leader still serves, and every lookup while the client holds the
// leader's content, send nothing; behind a balancer whose other server
// still serves the kind, the proof is made once per leader content, not
// at every lookup. Issue 47's soak found followers mapping a removed
// CRD's kind for as long as it ran (a proof came only at a miss or a
// lookup without a version), their controllers getting 404s.
func TestFollowerProvesWhatItsLeaderLacks(t *testing.T) {
	srv, base := docserver.Start(t)
	gone := docserver.CRD{Group: "infra.example.com", Versions: []string{"v1"}, Kind: "Cluster", Namespaced: true}
	kept := docserver.CRD{Group: "apps.example.com", Versions: []string{"v1"}, Kind: "Widget", Namespaced: true}
	for _, crd := range []docserver.CRD{gone, kept} {
		if err := srv.AddCRD(crd); err != nil {
			t.Fatal(err)
		}
	}
	table := discovery.NewSurfaces()
	newClient := func() *discovery.Client {
		t.Helper()
		c, err := discovery.NewForHTTPClient(nil, base, discovery.WithSurfaces(table))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Snapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
		return c
	}
	leader, follower := newClient(), newClient()
	defer leader.Follow()() // as its watch does
	defer follower.FollowLeader(leader)()
	m, err := restmapper.New(follower)
	if err != nil {
		t.Fatal(err)
	}
	goneGK := schema.GroupKind{Group: gone.Group, Kind: gone.Kind}
	keptGK := schema.GroupKind{Group: kept.Group, Kind: kept.Kind}
	lookups := func(gk schema.GroupKind, n int) (err error) {
		for range n {
			if _, err = m.RESTMapping(gk, "v1"); err != nil {
				return err
			}
		}
		return nil
	}

	srv.ResetRequests()
	if err := lookups(goneGK, 100); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("holding the leader's content: %d requests for 100 lookups, want 0", n)
	}

	// The server stops serving Cluster; the leader's watch refreshes it.
	if err := srv.RemoveCRD(gone.Group, "clusters"); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: gone.Group, Version: "v1", Resource: "clusters"}
	if _, lacks := follower.LeaderLacks(gvr); !lacks {
		t.Fatal("LeaderLacks: false for a resource the leader's new content lacks")
	}
	if n := testing.AllocsPerRun(100, func() { follower.LeaderLacks(gvr) }); n != 0 {
		t.Errorf("LeaderLacks allocates %v times a call; its doc says nothing", n)
	}
	srv.ResetRequests()
	if err := lookups(keptGK, 100); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("a kind the leader still serves: %d requests for 100 lookups, want 0", n)
	}
	if mp, err := m.RESTMapping(goneGK, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("a kind the server removed, the leader refreshed: %v, %v; want no match", mp, err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("the follower's proof sent %d requests, want 2", n)
	}
	if st := m.Stats(); st.StaleRefreshes != 1 || st.MissRefreshes != 0 {
		t.Errorf("Stats: %d stale refreshes and %d miss refreshes; want the proof counted as the one stale refresh", st.StaleRefreshes, st.MissRefreshes)
	}
	if !follower.Following() {
		t.Error("not Following after proving the leader's content")
	}

	// Behind a balancer: the follower's server still serves Cluster (the
	// CRD is back for it) while the leader's content, older, lacks it.
	// The follower proves once for that leader content, finds Cluster,
	// and its lookups then send nothing until the leader's content
	// changes again.
	if err := srv.AddCRD(gone); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*discovery.Client{leader, follower} {
		if _, err := c.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.RemoveCRD(gone.Group, "clusters"); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddCRD(gone); err != nil { // the follower's next read finds it again
		t.Fatal(err)
	}
	srv.ResetRequests()
	if err := lookups(goneGK, 100); err != nil {
		t.Fatalf("the follower's own server serves the kind: %v", err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("a leader lacking what the follower's server serves: %d requests for 100 lookups, want 2 (one proof)", n)
	}
}
