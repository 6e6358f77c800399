package restmapper_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestFollowerBehindProvesEveryLookup: a mapper over a client that follows
// a leader (discovery.Client.FollowLeader, as package shared's identities
// do) answers a lookup with a version from the leader's change once the
// leader has refreshed to it: a removed kind is no longer mapped, at the
// cost of the client's own two requests; while the client holds the
// leader's content, or content it found after the leader last looked,
// lookups send nothing. Issue 47's soak found the removed kind mapped for
// as long as it was gone: a follower proved its view only at a miss or a
// lookup without a version. With a proof at every lookup while the
// contents differ, a follower behind a balancer over servers of two
// versions proved its view once a second (a 30-minute soak: 302 library
// requests a minute from its controllers against 50 before).
func TestFollowerBehindProvesEveryLookup(t *testing.T) {
	srv, base := docserver.Start(t)
	crd := docserver.CRD{Group: "infra.example.com", Versions: []string{"v1"}, Kind: "Cluster", Namespaced: true}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
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
	gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
	srv.ResetRequests()
	for range 100 {
		if _, err := m.RESTMapping(gk, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(srv.Requests()); n != 0 || follower.Behind() || !follower.Following() {
		t.Fatalf("holding the leader's content: %d requests for 100 lookups (want 0), Behind %v, Following %v", n, follower.Behind(), follower.Following())
	}

	if err := srv.RemoveCRD(crd.Group, "clusters"); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !follower.Behind() {
		t.Fatal("not Behind a leader that refreshed to a change")
	}
	srv.ResetRequests()
	if mp, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("a kind the server removed, the leader refreshed: %v, %v; want no match", mp, err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("the follower's proof sent %d requests, want 2", n)
	}
	if follower.Behind() || !follower.Following() {
		t.Errorf("after its proof: Behind %v, Following %v", follower.Behind(), follower.Following())
	}

	// The follower finds other content than the leader holds (behind a
	// balancer, its server served a change the leader's has not yet, or
	// never will, being of another version): it is not Behind a leader
	// that has not looked since, and its lookups send nothing; the
	// leader's next look makes it prove its view once.
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	for range 100 {
		if _, err := m.RESTMapping(gk, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(srv.Requests()); n != 0 || follower.Behind() {
		t.Fatalf("content newer than the leader's: %d requests for 100 lookups (want 0), Behind %v", n, follower.Behind())
	}
	if err := srv.RemoveCRD(crd.Group, "clusters"); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("the leader looked again and saw the kind go: %v, want no match", err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("the follower's proof sent %d requests, want 2", n)
	}
}
