package restmapper_test

import (
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

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

// TestFollowedRepeatedMissesSendNothing: while its client is followed
// (discovery.Client.Following: its own watch, or the content of a leader
// whose watch runs), a mapper's question that missed before does not
// refresh again; its first miss still does. A change the leader's watch
// brings ends the following, and the next repeat refreshes and finds the
// kind. Issue 47's soak found three followed identities whose controllers
// looked up two kinds not served, each every 2 s, refreshing about once a
// second each (219 library requests in the first minute, where
// controller-runtime's defaults sent 696 and the target is a tenth).
func TestFollowedRepeatedMissesSendNothing(t *testing.T) {
	srv, base := docserver.Start(t)
	table := discovery.NewSurfaces()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	newClient := func() *discovery.Client {
		t.Helper()
		c, err := discovery.NewForHTTPClient(nil, base, discovery.WithSurfaces(table), discovery.WithClock(clk), discovery.WithMaxAge(time.Hour))
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
	crd := docserver.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late", Namespaced: true}
	gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
	for _, x := range []struct {
		name string
		c    *discovery.Client
	}{{"the leader", leader}, {"a follower", follower}} {
		name, c := x.name, x.c
		m, err := restmapper.New(c, restmapper.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		srv.ResetRequests()
		if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
			t.Fatalf("%s: %v, want no match", name, err)
		}
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("%s: a first miss sent %d requests, want one refresh (2)", name, n)
		}
		// Every 2 s for a minute, as the soak's controllers ask.
		srv.ResetRequests()
		for range 30 {
			clk.Step(2 * time.Second)
			if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
				t.Fatalf("%s: %v, want no match", name, err)
			}
		}
		if n := len(srv.Requests()); n != 0 {
			t.Errorf("%s, followed: 30 repeated misses 2 s apart sent %d requests, want 0", name, n)
		}
		if !c.Following() {
			t.Fatalf("%s is not followed", name)
		}
	}

	// The CRD is served and the leader's watch refreshes it: the
	// follower, no longer holding the leader's content, refreshes at its
	// next repeat and finds the kind.
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(follower, restmapper.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if mp, err := m.RESTMapping(gk, "v1"); err != nil || mp.Resource.Resource != "lates" {
		t.Fatalf("the follower after its leader's watch saw the CRD: %v, %v", mp, err)
	}

	// Not followed: repeats refresh on their backoff, as before.
	unfollowed := newClient()
	m, err = restmapper.New(unfollowed, restmapper.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	other := schema.GroupKind{Group: "never.example.com", Kind: "Never"}
	if _, err := m.RESTMapping(other, "v1"); !meta.IsNoMatchError(err) {
		t.Fatal(err)
	}
	srv.ResetRequests()
	for range 30 {
		clk.Step(2 * time.Second)
		_, _ = m.RESTMapping(other, "v1")
	}
	if n := len(srv.Requests()); n != 2*30 {
		t.Errorf("not followed: 30 repeated misses 2 s apart sent %d requests, want a refresh (2) each", n)
	}
}

// TestRepeatedMissOfWhatTheLeaderLacksSendsNothing: a follower that does
// not hold its leader's content (behind a balancer over servers that
// disagree, the leader's content joins both servers' views and the
// follower's is one of them; here the two clients read two servers)
// does not refresh at a repeated miss of a kind its followed leader
// lacks too (discovery.Client.LeaderServesKind: the leader's watch
// vouches for it); once the leader serves the kind, the next repeated
// miss refreshes, and finds it when the follower's server serves it.
// Issue 47's soak, after the fix for followed clients, found its three
// identities refreshing at each repeated miss while the pair ran two
// versions: 284 library requests a minute, against 696 with
// controller-runtime's defaults.
func TestRepeatedMissOfWhatTheLeaderLacksSendsNothing(t *testing.T) {
	leaderSrv, leaderBase := docserver.Start(t)
	followerSrv, followerBase := docserver.Start(t)
	upgraded := docserver.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "New", Namespaced: true}
	if err := leaderSrv.AddCRD(upgraded); err != nil { // the servers disagree
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	newClient := func(base string) *discovery.Client {
		t.Helper()
		c, err := discovery.NewForHTTPClient(nil, base, discovery.WithClock(clk), discovery.WithMaxAge(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Snapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
		return c
	}
	leader, follower := newClient(leaderBase), newClient(followerBase)
	defer leader.Follow()()
	defer follower.FollowLeader(leader)()
	if follower.Following() {
		t.Fatal("a follower holding other content than its leader's is Following")
	}
	m, err := restmapper.New(follower, restmapper.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	late := docserver.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late", Namespaced: true}
	gk := schema.GroupKind{Group: late.Group, Kind: late.Kind}
	for _, vs := range [][]string{{"v1"}, nil} { // first misses refresh
		if _, err := m.RESTMapping(gk, vs...); !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
	}
	followerSrv.ResetRequests()
	for range 30 {
		clk.Step(2 * time.Second)
		if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
		if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
	}
	if n := len(followerSrv.Requests()); n != 0 {
		t.Errorf("a kind the followed leader lacks too: 60 repeated misses 2 s apart sent %d requests, want 0", n)
	}

	// The leader's server serves it, and its watch refreshes it: the
	// follower's next repeat refreshes; once its own server serves the
	// kind, the repeat after finds it.
	if err := leaderSrv.AddCRD(late); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Second)
	followerSrv.ResetRequests()
	if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
		t.Fatal(err)
	}
	if n := len(followerSrv.Requests()); n != 2 {
		t.Errorf("a kind the leader serves: the follower's repeated miss sent %d requests, want a refresh (2)", n)
	}
	if err := followerSrv.AddCRD(late); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Second)
	if mp, err := m.RESTMapping(gk, "v1"); err != nil || mp.Resource.Resource != "lates" {
		t.Errorf("the follower's server serves the kind: %v, %v", mp, err)
	}
	if n := testing.AllocsPerRun(100, func() {
		follower.LeaderServesKind(schema.GroupVersionKind{Group: late.Group, Version: "v1", Kind: late.Kind})
	}); n != 0 {
		t.Errorf("LeaderServesKind allocates %v times a call; its doc says nothing", n)
	}
}

// TestThrottledProofIsMadeOnceTheWaitHasPassed: a follower whose proof
// (see TestFollowerProvesWhatItsLeaderLacks) the server refuses with a
// 429 (API Priority and Fairness throttling its identity) proves again
// at the first lookup after the 429's Retry-After has passed, and sends
// nothing before: the refused proof is not counted as made. Issue 47's
// soak found a throttled identity mapping a removed kind for up to 13.7 s
// of the time it was free to ask: a proof is made once per leader
// content, and the refused one had been counted.
func TestThrottledProofIsMadeOnceTheWaitHasPassed(t *testing.T) {
	srv, base := docserver.Start(t)
	gone := docserver.CRD{Group: "infra.example.com", Versions: []string{"v1"}, Kind: "Cluster", Namespaced: true}
	if err := srv.AddCRD(gone); err != nil {
		t.Fatal(err)
	}
	table := discovery.NewSurfaces()
	newClient := func(opts ...discovery.Option) *discovery.Client {
		t.Helper()
		c, err := discovery.NewForHTTPClient(nil, base, append(opts, discovery.WithSurfaces(table))...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Snapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// No retries: the 429 is not waited out within the refresh, so the
	// client holds it for its Retry-After (as a refresh timeout shorter
	// than APF's wait does).
	leader, follower := newClient(), newClient(discovery.WithMaxRetries(0))
	defer leader.Follow()()
	defer follower.FollowLeader(leader)()
	m, err := restmapper.New(follower)
	if err != nil {
		t.Fatal(err)
	}
	goneGK := schema.GroupKind{Group: gone.Group, Kind: gone.Kind}
	if err := srv.RemoveCRD(gone.Group, "clusters"); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}

	srv.InjectFault("/api*", docserver.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Second})
	srv.ResetRequests()
	if _, err := m.RESTMapping(goneGK, "v1"); err != nil {
		t.Fatalf("the proof refused: %v; want the held answer, the old mapping", err)
	}
	refused := len(srv.Requests())
	if refused == 0 {
		t.Fatal("no proof was tried")
	}
	if !follower.Throttled() {
		t.Fatal("Throttled: false after a 429 with Retry-After that was not waited out")
	}
	if n := testing.AllocsPerRun(100, func() { follower.Throttled() }); n != 0 {
		t.Errorf("Throttled allocates %v times a call; its doc says nothing", n)
	}
	for range 50 {
		_, _ = m.RESTMapping(goneGK, "v1")
	}
	if n := len(srv.Requests()); n != refused {
		t.Errorf("while told to wait: %d requests for 50 lookups, want none", n-refused)
	}
	srv.ClearFaults()
	deadline := time.Now().Add(3 * time.Second)
	for follower.Throttled() {
		if time.Now().After(deadline) {
			t.Fatal("still Throttled 3 s after a Retry-After of 1 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if mp, err := m.RESTMapping(goneGK, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("the first lookup after the wait: %v, %v; want no match (the proof made)", mp, err)
	}
	if n := len(srv.Requests()) - refused; n != 2 {
		t.Errorf("the proof after the wait sent %d requests, want 2", n)
	}
}
