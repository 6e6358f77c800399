package watch_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/apiserver/servedtest"
)

const servedAPIGroups = "/apis/" + v1alpha1.GroupName + "/v1alpha1/apigroups"

// directRequests counts the client's requests for CRDs and APIServices
// (the served API's feed does not appear in the fake's log).
func directRequests(srv *discoverytest.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Path, "/apis/apiextensions.k8s.io/") || strings.HasPrefix(r.Path, "/apis/apiregistration.k8s.io/") {
			n++
		}
	}
	return n
}

// servedWatches counts the client's watches of the served apigroups.
func servedWatches(srv *discoverytest.Server) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Path == servedAPIGroups && r.Watch {
			n++
		}
	}
	return n
}

// waitWithin polls cond until it holds, for at most d.
func waitWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, d)
		}
	}
}

// TestWatchUsesServedAPI: where the cluster serves the discovery API and
// the client may not list CRDs or APIServices, Run watches the served
// apigroups (not forbidden, watching), and a new CRD reaches a subscriber
// as the Change that adds it within the settle time, without one request
// for CRDs or APIServices.
func TestWatchUsesServedAPI(t *testing.T) {
	srv, base := discoverytest.Start(t, servedtest.WithServedAPI(), discoverytest.WithWatchForbidden())
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	var got changes
	c.Subscribe(got.add)
	w := startWatch(t, c, watch.WithUpgradePoll(time.Hour), watch.WithFallbackPoll(time.Hour))
	waitFor(t, "watching", func() bool { return w.Stats().Watching })
	if st := w.Stats(); st.Forbidden {
		t.Fatalf("forbidden: %+v", st)
	}
	if servedWatches(srv) == 0 {
		t.Fatal("no watch of the served apigroups")
	}
	waitFor(t, "the served API's watch following the client", c.Following)

	gvr := schema.GroupVersionResource{Group: "served.example.com", Version: "v1", Resource: "serveds"}
	if err := srv.AddCRD(discoverytest.CRD{Group: gvr.Group, Versions: []string{"v1"}, Kind: "Served"}); err != nil {
		t.Fatal(err)
	}
	waitWithin(t, watch.DefaultSettle, "Change that adds the CRD", func() bool { return got.added(gvr) })
	if st := w.Stats(); st.Forbidden || !st.Watching || st.Events == 0 {
		t.Errorf("watch stats: %+v", st)
	}
	if n := directRequests(srv); n != 0 {
		t.Errorf("%d requests for CRDs or APIServices", n)
	}
}

// TestWatchFallsBackWhenServedAPIUnavailable: the served API going away
// mid-run (the aggregator's 503, its group Stale) makes Run fall back: to
// CRDs and APIServices, forbidden here, so to polling; a later CRD still
// arrives.
func TestWatchFallsBackWhenServedAPIUnavailable(t *testing.T) {
	srv, base := discoverytest.Start(t, servedtest.WithServedAPI(), discoverytest.WithWatchForbidden())
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	var got changes
	c.Subscribe(got.add)
	w := startWatch(t, c, watch.WithUpgradePoll(time.Hour), watch.WithFallbackPoll(50*time.Millisecond))
	waitFor(t, "watching", func() bool { return w.Stats().Watching })
	if err := srv.SetAggregatedAPIUnavailable(v1alpha1.GroupName, true); err != nil {
		t.Fatal(err)
	}
	// servedGiveUp failed lists or watches in a row, with backoff: seconds.
	waitWithin(t, 30*time.Second, "fallback to polling", func() bool { return w.Stats().Forbidden })
	if w.Stats().Watching {
		t.Error("Watching while polling")
	}
	if c.Following() {
		t.Error("the client is Following while Run polls")
	}
	gvr := schema.GroupVersionResource{Group: "later.example.com", Version: "v1", Resource: "laters"}
	if err := srv.AddCRD(discoverytest.CRD{Group: gvr.Group, Versions: []string{"v1"}, Kind: "Later"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the polled Change that adds the CRD", func() bool { return got.added(gvr) })

	// Served again: Run watches it again (not polling for good), and what
	// changes next reaches the subscriber through it.
	watches := servedWatches(srv)
	if err := srv.SetAggregatedAPIUnavailable(v1alpha1.GroupName, false); err != nil {
		t.Fatal(err)
	}
	waitWithin(t, 30*time.Second, "the served API watched again", func() bool { return servedWatches(srv) > watches && w.Stats().Watching })
	if w.Stats().Forbidden {
		t.Error("Stats.Forbidden still set while the served API is watched: Run no longer polls")
	}
	waitFor(t, "following through the served API again", c.Following)
	polls := len(srv.Requests())
	again := schema.GroupVersionResource{Group: "again.example.com", Version: "v1", Resource: "agains"}
	if err := srv.AddCRD(discoverytest.CRD{Group: again.Group, Versions: []string{"v1"}, Kind: "Again"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Change that adds the CRD, through the served API", func() bool { return got.added(again) })
	// No more polling: a handful of requests (the watch, a refresh or
	// two), not one /api and /apis every 50 ms.
	time.Sleep(500 * time.Millisecond)
	if n := len(srv.Requests()) - polls; n > 12 {
		t.Errorf("%d requests in the 0.5 s after the served API came back and one CRD: still polling every 50 ms?", n)
	}
}

// TestWithoutServedAPIIgnoresIt: WithServedAPI(false) watches CRDs and
// APIServices where the served API is served, and never asks it.
func TestWithoutServedAPIIgnoresIt(t *testing.T) {
	srv, base := discoverytest.Start(t, servedtest.WithServedAPI())
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	var got changes
	c.Subscribe(got.add)
	w := startWatch(t, c, watch.WithUpgradePoll(time.Hour), watch.WithServedAPI(false))
	waitFor(t, "watching", func() bool { return w.Stats().Watching })
	gvr := schema.GroupVersionResource{Group: "direct.example.com", Version: "v1", Resource: "directs"}
	if err := srv.AddCRD(discoverytest.CRD{Group: gvr.Group, Versions: []string{"v1"}, Kind: "Direct"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Change that adds the CRD", func() bool { return got.added(gvr) })
	if directRequests(srv) == 0 {
		t.Error("no request for CRDs or APIServices")
	}
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Path, "/apis/discovery.kubeatlas.io/") {
			t.Errorf("asked the served API: %s %s", r.Method, r.Path)
		}
	}
}
