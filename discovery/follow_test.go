package discovery_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestFollow: a client is Following while any follower has not stopped;
// a stop called again, or from a follower already stopped, takes nothing
// from the others, whoever calls it concurrently.
func TestFollow(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Following() {
		t.Fatal("a new client is Following")
	}
	a, b := c.Follow(), c.Follow()
	a()
	a()
	if !c.Following() {
		t.Fatal("not Following with one follower left, after the other's stop was called twice")
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 1000 {
				stop := c.Follow()
				if !c.Following() {
					t.Error("not Following right after Follow")
				}
				wg.Go(stop)
				stop()
			}
		})
	}
	wg.Wait()
	if !c.Following() {
		t.Fatal("concurrent followers took the remaining follower's count")
	}
	b()
	if c.Following() {
		t.Fatal("Following after every follower stopped")
	}
}

// TestFollowLeader: a client counts as followed through its leader while
// the leader is followed and holds the same content; a change the leader
// refreshes for ends it with no request from the client, which its own
// refresh brings back; content that came back after another (renumbered)
// still counts as the same; a stop ends it.
func TestFollowLeader(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(4, 2))
	table := discovery.NewSurfaces()
	leader, _ := snapshotOfNew(t, base, discovery.WithSurfaces(table))
	c, _ := snapshotOfNew(t, base, discovery.WithSurfaces(table))
	stop := c.FollowLeader(leader)
	if c.Following() {
		t.Fatal("Following through a leader nobody follows")
	}
	unfollow := leader.Follow()
	if !c.Following() {
		t.Fatal("not Following through a followed leader with the same content")
	}
	crd := docserver.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "Thing"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	refresh := func(x *discovery.Client) {
		t.Helper()
		if _, err := x.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	refresh(leader)
	before := c.Stats().Requests
	if c.Following() {
		t.Fatal("Following through a leader that has seen a change the client has not")
	}
	if n := c.Stats().Requests - before; n != 0 {
		t.Fatalf("Following sent %d requests", n)
	}
	srv.ResetRequests()
	refresh(c)
	if !c.Following() {
		t.Fatal("not Following once the client's own refresh shows the leader's content")
	}
	// The leader's refresh asked again on new connections (mixed.go);
	// the client's, which reads the leader's content, does not.
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("the client's refresh to the leader's content sent %d requests, want 2", n)
	}
	// The CRD goes and comes back: the content (held in the table while
	// something holds it, here with) comes back renumbered in each client.
	with := c.Current()
	defer runtime.KeepAlive(with)
	if err := srv.RemoveCRD(crd.Group, "things"); err != nil {
		t.Fatal(err)
	}
	refresh(leader)
	refresh(c)
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	refresh(leader)
	if c.Following() {
		t.Fatal("Following after the leader saw the CRD come back")
	}
	refresh(c)
	if g, lg := c.Current().Generation(), leader.Current().Generation(); g == lg || g == with.Generation() {
		t.Fatalf("generations %d and %d (%d before): the content did not come back renumbered", g, lg, with.Generation())
	}
	if !c.Following() {
		t.Fatal("not Following with the same documents under other generations")
	}
	// Each client's own view: one read without the table holds
	// unchecked content, which is never the leader's.
	own, _ := snapshotOfNew(t, base, discovery.WithJSONOnly(), discovery.WithMaxAge(time.Hour))
	defer own.FollowLeader(leader)()
	if own.Following() {
		t.Fatal("Following through a leader whose content the client cannot show is the same")
	}
	unfollow()
	if c.Following() {
		t.Fatal("Following after the leader's follower stopped")
	}
	unfollow = leader.Follow()
	defer unfollow()
	stop()
	stop()
	if c.Following() {
		t.Fatal("Following after stop")
	}
	if c.FollowLeader(c)(); c.Following() {
		t.Fatal("a client is its own leader")
	}
}

// TestFollowLeaderConcurrently: leaders added and stopped from many
// goroutines while others ask Following: each stop takes its own entry
// (one leader given twice counts twice), and the race detector sees
// nothing.
func TestFollowLeaderConcurrently(t *testing.T) {
	_, base := docserver.Start(t)
	table := discovery.NewSurfaces()
	leader, _ := snapshotOfNew(t, base, discovery.WithSurfaces(table))
	c, _ := snapshotOfNew(t, base, discovery.WithSurfaces(table))
	defer leader.Follow()()
	keep := c.FollowLeader(leader)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				stop := c.FollowLeader(leader)
				if !c.Following() {
					t.Error("not Following through a followed leader with the same content")
				}
				stop()
				stop()
			}
		})
	}
	wg.Wait()
	if !c.Following() {
		t.Fatal("the stops of others took the remaining entry")
	}
	keep()
	if c.Following() {
		t.Fatal("Following after every entry stopped")
	}
}
