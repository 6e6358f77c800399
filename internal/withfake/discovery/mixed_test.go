package discovery_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

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

// idleCloses is a transport that counts the calls to close its idle
// connections.
type idleCloses struct {
	next   http.RoundTripper
	closes atomic.Int32
}

func (t *idleCloses) RoundTrip(r *http.Request) (*http.Response, error) { return t.next.RoundTrip(r) }
func (t *idleCloses) CloseIdleConnections()                             { t.closes.Add(1) }

// TestResampleLeavesCallersConnections: a client on the caller's HTTP
// client (NewForHTTPClient) resamples disagreeing servers on new
// connections without closing the idle connections of the caller's
// transport, which others may be using.
func TestResampleLeavesCallersConnections(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin))
	if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "New"}); err != nil {
		t.Fatal(err)
	}
	tr := &idleCloses{next: http.DefaultTransport}
	c, err := discovery.NewForHTTPClient(&http.Client{Transport: tr}, base)
	if err != nil {
		t.Fatal(err)
	}
	// Until the client has seen both servers: which server a refresh's
	// /apis reaches depends on the order its two requests go out in.
	for i := 0; i < 200 && (c.Current() == nil || !c.Current().Mixed()); i++ {
		if _, err := c.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if c.Stats().Resamples == 0 || !c.Current().Mixed() {
		t.Fatalf("no resample through disagreeing servers (resamples %d, mixed %v)", c.Stats().Resamples, c.Current().Mixed())
	}
	if n := tr.closes.Load(); n != 0 {
		t.Errorf("the caller's transport had its idle connections closed %d times", n)
	}
}

// TestViewNoServerServesLeavesWithinASecond: a client that has seen two
// servers disagree behind a balancer (one served a group the other did
// not) and refreshes seldom, as package shared's identities do (at a miss,
// or when their leader's content lacks what they answer with), drops the
// group at its first refresh a second after no server serves it any
// more: the view that had it is looked for once more and leaves. Before,
// a view stayed for eight of the client's refreshes however long they
// took, and issue 47's soak saw such clients map a removed CRD's kind,
// a 404 at each request, until its CRD came back (22 s).
func TestViewNoServerServesLeavesWithinASecond(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin))
	removed := schema.GroupVersion{Group: "removed.example.com", Version: "v1"}
	if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: removed.Group, Versions: []string{"v1"}, Kind: "Removed"}); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	c := newClient(t, base, discovery.WithClock(clk))
	ctx := t.Context()
	for i := 0; i < 200 && (c.Current() == nil || !c.Current().Mixed()); i++ {
		if _, err := c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Current(); !s.Mixed() {
		t.Fatal("the client never saw the servers disagree")
	}
	// Seen a moment ago, within the window: a refresh now keeps it.
	clk.Step(100 * time.Millisecond)
	if _, err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Current().Version(removed); !ok {
		t.Fatal("a group one server serves left the union at once")
	}

	// The group goes from the server that served it; a second later the
	// client's next refresh no longer serves it.
	if err := srv.Backends()[1].RemoveCRD(removed.Group, "removeds"); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	before := c.Stats().Resamples
	s, err := c.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Version(removed); ok || s.Mixed() {
		v, r := s.Partial()
		t.Errorf("a second after no server serves %v, a refresh still serves it (mixed %v, partial %v %v)", removed, s.Mixed(), v, r)
	}
	if c.Stats().Resamples == before {
		t.Errorf("the view left without being looked for once more")
	}
}

// TestFollowerOfAMixedLeaderIsFollowed: behind a balancer over servers
// that disagree, a leader and its follower (FollowLeader, as package
// shared's identities) each serve a union of the two servers' views, a
// union of their own; the follower holds its leader's content, and is
// Following, when its union joins views with the same ETags as the
// leader's. Before, only the same union object counted, and issue 47's
// soak found followers never Following while the pair ran two versions
// (each lookup that needed it proved their views, four requests a
// refresh). A change on one server that the leader sees parts them again.
func TestFollowerOfAMixedLeaderIsFollowed(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin))
	upgraded := schema.GroupVersion{Group: "upgraded.example.com", Version: "v1"}
	if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: upgraded.Group, Versions: []string{"v1"}, Kind: "New"}); err != nil {
		t.Fatal(err)
	}
	table := discovery.NewSurfaces()
	ctx := t.Context()
	mixed := func() *discovery.Client {
		t.Helper()
		c := newClient(t, base, discovery.WithSurfaces(table))
		for i := 0; i < 200 && (c.Current() == nil || !c.Current().Mixed()); i++ {
			if _, err := c.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !c.Current().Mixed() {
			t.Fatal("the client never saw the servers disagree")
		}
		return c
	}
	leader, follower := mixed(), mixed()
	defer leader.Follow()()
	defer follower.FollowLeader(leader)()
	if !follower.Following() {
		t.Fatal("a follower whose union joins the same views as its leader's is not Following")
	}
	if n := testing.AllocsPerRun(100, func() { follower.Following() }); n != 0 {
		t.Errorf("Following allocates %v times a call", n)
	}
	gvr := upgraded.WithResource("news")
	if _, lacks := follower.LeaderLacks(gvr); lacks {
		t.Error("LeaderLacks: true for a resource both unions serve")
	}

	// A CRD on one server: the leader's refresh sees it, and its union
	// is of other views.
	if err := srv.Backends()[0].AddCRD(discoverytest.CRD{Group: "more.example.com", Versions: []string{"v1"}, Kind: "More"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20 && follower.Following(); i++ {
		if _, err := leader.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if follower.Following() {
		t.Error("the follower is still Following after its leader's union changed")
	}
}
