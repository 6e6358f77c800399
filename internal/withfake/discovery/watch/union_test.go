package watch_test

import (
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// A client behind a balancer over two servers (round robin) that a watch
// follows. A change reaches the servers a moment apart, so the round
// after its event reads the new view from one and the old from the
// other, and the client serves their union (discovery.Snapshot.Mixed);
// the old view leaves only at a refresh a second after it was last seen.
// Issue 47's served API, behind the soak's balancer, served a removed
// version after both servers had dropped it, until the next event: the
// watch's rounds had ended at the first new content, and nothing else
// refreshes a followed client. These run in a synctest bubble.

// startUnion starts two servers behind round robin serving crd, and a
// followed client of them (followedClient).
func startUnion(t *testing.T, crd discoverytest.CRD) (*discoverytest.Server, *discovery.Client) {
	t.Helper()
	srv, hc, base := discoverytest.StartInProcess(t, discoverytest.WithBackends(2, discoverytest.RoundRobin))
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	return srv, followedClient(t, hc, base)
}

// TestFollowedUnionLeavesOnceTheServersAgree: a version removed from a
// CRD (an event of unknown effect) and a CRD deleted, each by one server
// and 300 ms later by the other, leave the followed client within 1.5 s
// of the second server's change, with no lookup asking: a view leaves at
// a refresh a second after it was last seen, and the rounds come a
// second and a margin apart once the event's own have ended (a version
// removed: 0.9 s), or back off to a second while the event's expectation
// waits for the union to drop the CRD (its deletion: 1.3 s).
func TestFollowedUnionLeavesOnceTheServersAgree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(b *discoverytest.Backend) error
		gone   schema.GroupVersion
	}{
		{"a version removed", func(b *discoverytest.Backend) error {
			return b.RemoveGroupVersion(schema.GroupVersion{Group: "gone.example.com", Version: "v1"})
		}, schema.GroupVersion{Group: "gone.example.com", Version: "v1"}},
		{"the CRD deleted", func(b *discoverytest.Backend) error {
			return b.RemoveCRD("gone.example.com", "gones")
		}, schema.GroupVersion{Group: "gone.example.com", Version: "v2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, c := startUnion(t, discoverytest.CRD{Group: "gone.example.com", Versions: []string{"v2", "v1"}, Kind: "Gone"})
				if err := tc.remove(srv.Backends()[0]); err != nil {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond)
				if s := c.Current(); !s.Mixed() {
					t.Fatal("the client did not see the servers disagree: the test shows nothing")
				}
				if err := tc.remove(srv.Backends()[1]); err != nil {
					t.Fatal(err)
				}
				agreed := time.Now()
				for {
					if _, held := c.Current().Version(tc.gone); !held {
						break
					}
					if time.Since(agreed) > 10*time.Second {
						t.Fatalf("%v still served 10 s after both servers dropped it (mixed %v)", tc.gone, c.Current().Mixed())
					}
					time.Sleep(50 * time.Millisecond)
				}
				if d := time.Since(agreed); d > 1500*time.Millisecond {
					t.Errorf("%v left the client %v after both servers dropped it, want within 1.5 s", tc.gone, d)
				}
			})
		})
	}
}

// TestUnionOfServersThatDisagreeCostsARoundOrTwo: servers that go on
// disagreeing (one changed, the other not: two versions of an upgrade)
// keep the union, and an event costs its own rounds and one or two union
// rounds, not a round a second nor one for each of the 5 allowed.
func TestUnionOfServersThatDisagreeCostsARoundOrTwo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := startUnion(t, discoverytest.CRD{Group: "gone.example.com", Versions: []string{"v2", "v1"}, Kind: "Gone"})
		before := c.Stats().Refreshes
		if err := srv.Backends()[0].RemoveGroupVersion(schema.GroupVersion{Group: "gone.example.com", Version: "v1"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		if s := c.Current(); !s.Mixed() {
			t.Fatal("the union of servers that disagree left")
		}
		// The event's round (of unknown effect: met by the first new
		// content, the union) and a union round that finds it the same:
		// 2 when written, 6 with no stop at an unchanged union.
		if n := c.Stats().Refreshes - before; n > 3 {
			t.Errorf("%d refreshes in 30 s after one event while the servers disagree, want at most 3", n)
		}
	})
}
