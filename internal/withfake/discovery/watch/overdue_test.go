package watch_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// A server behind its own objects: issue 47's soak saw a kube-apiserver,
// loaded and mid-upgrade, serve a new CRD 44 s after the CRD's watch event
// (past the watch's 10-s settle), while the other server of the pair
// served it at once. A watch that went on following the client vouched
// for a view without the CRD, so a controller's repeated lookups of the
// kind sent nothing and said no match after the server served it, until
// the next CRD event. These tests run in a synctest bubble: the server's
// delay and the watch's timers are fake time.

// startOverdue starts a server that serves a CRD's change delay after its
// watch event, a followed client of it (followedClient), and a mapper
// over the client.
func startOverdue(t *testing.T, delay time.Duration) (*discoverytest.Server, *discovery.Client, *restmapper.Mapper) {
	t.Helper()
	srv, hc, base := discoverytest.StartInProcess(t, discoverytest.WithDiscoveryDelay(delay))
	c := followedClient(t, hc, base)
	m, err := restmapper.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, m
}

// followedClient returns a client of the server hc reaches at base, which
// a Watcher follows (upgrade poll: an hour, so only events and the
// watch's own rounds refresh it) until the test ends, once it is
// followed.
func followedClient(t *testing.T, hc *http.Client, base string) *discovery.Client {
	t.Helper()
	c, err := discovery.NewForHTTPClient(&http.Client{Transport: hc.Transport}, base)
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, c, watch.WithUpgradePoll(time.Hour))
	for start := time.Now(); !c.Following(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatal("the watch did not follow the client in a minute")
		}
	}
	return c
}

// TestOverdueCRDIsFoundOnceServed: a CRD that the server serves 40 s after
// its watch event is mapped at the first lookup a second after it is
// served (the mapper's miss backoff), by a controller that looks it up
// every 200 ms from its event on: the watch stops following the client
// when its settle time (10 s) passes with the CRD not served, so the
// repeated misses refresh again; once discovery shows it, the watch
// follows again, and the lookups send nothing.
func TestOverdueCRDIsFoundOnceServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 40 * time.Second
		srv, c, m := startOverdue(t, delay)
		crd := discoverytest.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}
		gk := schema.GroupKind{Group: crd.Group, Kind: crd.Kind}
		created := time.Now()
		if err := srv.AddCRD(crd); err != nil {
			t.Fatal(err)
		}
		var found time.Duration
		followedWhileMissing := false
		for found == 0 && time.Since(created) < 2*delay {
			if _, err := m.RESTMapping(gk, "v1"); err == nil {
				found = time.Since(created)
			}
			if at := time.Since(created); at > 11*time.Second && at < delay && c.Following() {
				followedWhileMissing = true
			}
			time.Sleep(200 * time.Millisecond)
		}
		if followedWhileMissing {
			t.Error("the watch followed the client between its settle time and the server serving the CRD")
		}
		// Served at 40 s; the miss backoff is a second, plus a lookup's
		// period.
		if found == 0 || found > delay+1200*time.Millisecond {
			t.Fatalf("the kind was mapped %v after its CRD's event, want within 1.2 s of the server serving it at %v", found, delay)
		}
		// Rounds a second, doubling to 10 s: one by 10 s after the CRD is
		// served sees it and follows again.
		time.Sleep(11 * time.Second)
		if !c.Following() {
			t.Fatal("not followed again after discovery showed the overdue CRD")
		}
		before := c.Stats().Requests
		for range 50 {
			if _, err := m.RESTMapping(schema.GroupKind{Group: crd.Group, Kind: "Absent"}, "v1"); err == nil {
				t.Fatal("an absent kind mapped")
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Its first miss refreshes (followed or not); its repeats do not.
		if n := c.Stats().Requests - before; n > 4 {
			t.Errorf("followed again, 50 misses of a kind not served sent %d discovery requests, want its first miss's", n)
		}
	})
}

// TestOverdueIsBounded: a CRD the server never serves (a kube-apiserver
// refuses a CRD's names that conflict with another's) is overdue for 5
// minutes at most, at a round every second for a minute, then doubling
// to 10 s; then the watch follows the client again, and sends nothing
// more for it.
func TestOverdueIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c, _ := startOverdue(t, time.Hour)
		before := c.Stats().Refreshes
		if err := srv.AddCRD(discoverytest.CRD{Group: "never.example.com", Versions: []string{"v1"}, Kind: "Never"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Second)
		if c.Following() {
			t.Fatal("followed past the settle time of a CRD not served")
		}
		// Overdue from its settle time (10 s) for 5 minutes, given up by
		// the next round (10 s apart by then).
		time.Sleep(5*time.Minute + 10*time.Second)
		if !c.Following() {
			t.Fatal("still not followed 5 minutes and a round after the CRD was overdue")
		}
		// The settle's rounds (about 14 in 10 s), then about 86 overdue
		// rounds (every second for a minute, then 2, 4, 8 s, then every
		// 10 s for 4 minutes): 101 when written.
		if n := c.Stats().Refreshes - before; n > 110 {
			t.Errorf("%d refreshes while a CRD was overdue for 5 minutes, want at most 110", n)
		}
		time.Sleep(time.Minute)
		n := c.Stats().Refreshes
		time.Sleep(time.Minute)
		if m := c.Stats().Refreshes - n; m != 0 {
			t.Errorf("%d refreshes a minute after the overdue CRD was given up, want none (upgrade poll: an hour)", m)
		}
	})
}

// TestOverdueCRDReachesSubscribers: with no lookups to ask the server, a
// CRD that the server serves 40 s after its watch event reaches the
// client's subscribers within a second of being served, by the watch's
// own rounds while the CRD is overdue (the served API and openapi3's
// marks learn of changes so).
func TestOverdueCRDReachesSubscribers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 40 * time.Second
		srv, c, _ := startOverdue(t, delay)
		gvr := schema.GroupVersionResource{Group: "late.example.com", Version: "v1", Resource: "lates"}
		added := make(chan time.Time, 1)
		defer c.Subscribe(func(ch discovery.Change) {
			for _, r := range ch.AddedResources {
				if r == gvr {
					select {
					case added <- time.Now():
					default:
					}
				}
			}
		})()
		created := time.Now()
		if err := srv.AddCRD(discoverytest.CRD{Group: gvr.Group, Versions: []string{gvr.Version}, Kind: "Late"}); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-added:
			// A round a second from the settle time on: the first after
			// the server serves it.
			if d := at.Sub(created); d > delay+time.Second {
				t.Errorf("subscribers got the CRD %v after its event, want within a second of the server serving it at %v", d, delay)
			}
		case <-time.After(2 * delay):
			t.Fatalf("subscribers did not get the CRD in %v", 2*delay)
		}
	})
}

// TestOverdueCRDDeletedIsNoLongerOverdue: a CRD that is overdue (the
// server has not served it) and is then deleted is followed again at the
// deletion's first round (discovery does not show it, as the deletion
// wants), not 5 minutes later.
func TestOverdueCRDDeletedIsNoLongerOverdue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c, _ := startOverdue(t, time.Hour)
		crd := discoverytest.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}
		if err := srv.AddCRD(crd); err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Second)
		if c.Following() {
			t.Fatal("followed past the settle time of a CRD not served")
		}
		if err := srv.RemoveCRD(crd.Group, "lates"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if !c.Following() {
			t.Fatal("not followed a second after the overdue CRD was deleted")
		}
	})
}
