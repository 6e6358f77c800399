package watch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
)

// changes collects what a subscriber is told.
type changes struct {
	mu  sync.Mutex
	all []discovery.Change
}

func (c *changes) add(ch discovery.Change) { c.mu.Lock(); c.all = append(c.all, ch); c.mu.Unlock() }

// added and removed report whether a Change delivered so far added or
// removed gvr.
func (c *changes) added(gvr schema.GroupVersionResource) bool {
	return c.any(func(ch discovery.Change) []schema.GroupVersionResource { return ch.AddedResources }, gvr)
}

func (c *changes) removed(gvr schema.GroupVersionResource) bool {
	return c.any(func(ch discovery.Change) []schema.GroupVersionResource { return ch.RemovedResources }, gvr)
}

func (c *changes) any(list func(discovery.Change) []schema.GroupVersionResource, gvr schema.GroupVersionResource) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.all {
		if slices.Contains(list(ch), gvr) {
			return true
		}
	}
	return false
}

// startWatch runs a Watcher of c until the test ends.
func startWatch(t *testing.T, c *discovery.Client, opts ...watch.Option) *watch.Watcher {
	t.Helper()
	w, err := watch.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// TestWatchDeliversNewCRDs: a CRD created while Watch runs reaches
// subscribers as the Change that adds it, although the server shows it in
// discovery only a while after its watch event; its deletion too. Nothing
// is polled meanwhile (the upgrade poll is an hour).
func TestWatchDeliversNewCRDs(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithDiscoveryDelay(150*time.Millisecond))
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	var got changes
	c.Subscribe(got.add)
	w := startWatch(t, c, watch.WithUpgradePoll(time.Hour))
	waitFor(t, "watching", func() bool { return w.Stats().Watching })

	before := c.Stats().Requests
	gvr := schema.GroupVersionResource{Group: "late.example.com", Version: "v1", Resource: "lates"}
	if err := srv.AddCRD(discoverytest.CRD{Group: gvr.Group, Versions: []string{"v1"}, Kind: "Late"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Change that adds the CRD", func() bool { return got.added(gvr) })
	if err := srv.RemoveCRD(gvr.Group, gvr.Resource); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Change that removes the CRD", func() bool { return got.removed(gvr) })
	// Each event: a round at once, then a few while the server catches up
	// (backing off from 100ms, 200ms, ...; one more under load): two
	// requests a round, and three for the resample that confirms the
	// change on a new connection: at most 11 an event. (16 failed now and
	// then on a loaded machine, before the refresh machine too.)
	if n := c.Stats().Requests - before; n > 22 {
		t.Errorf("two CRD events cost %d discovery requests", n)
	}
	if st := w.Stats(); st.Events == 0 || st.Requests == 0 || st.Forbidden {
		t.Errorf("stats: %+v", st)
	}
}

// TestWatchDeliversAVersionAddedToACRD: a version added to a CRD (a new
// generation, whose effect on discovery the CRD's metadata does not tell)
// reaches subscribers although the server serves it only a while after
// the watch event, later than the two rounds a change of unknown effect
// got (a real kube-apiserver serves it about 110 ms after the update);
// nothing else is polled meanwhile (the upgrade poll is an hour). While a
// watch follows the client, restmapper's lookups without a version ask
// nothing of the server, so a version the watch misses here would stay
// unseen until the upgrade poll.
func TestWatchDeliversAVersionAddedToACRD(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithDiscoveryDelay(700*time.Millisecond))
	crd := discoverytest.CRD{Group: "grow.example.com", Versions: []string{"v1"}, Kind: "Grower"}
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	var got changes
	c.Subscribe(got.add)
	w := startWatch(t, c, watch.WithUpgradePoll(time.Hour))
	waitFor(t, "watching", func() bool { return w.Stats().Watching })
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Change that adds the CRD", func() bool {
		return got.added(schema.GroupVersionResource{Group: crd.Group, Version: "v1", Resource: "growers"})
	})
	crd.Versions = []string{"v2", "v1"}
	if err := srv.AddCRD(crd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Change that adds v2", func() bool {
		return got.added(schema.GroupVersionResource{Group: crd.Group, Version: "v2", Resource: "growers"})
	})
}

// TestWatchIgnoresWhatCannotChangeDiscovery: status-only updates and label
// edits of a CRD ask for no refresh; a burst of new CRDs costs a few
// rounds, not one each.
func TestWatchIgnoresWhatCannotChangeDiscovery(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 4))
	c, _ := discovery.NewForHTTPClient(nil, base)
	// Every object listed is one initial event, which asks for nothing.
	initial := countItems(t, base+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions") +
		countItems(t, base+"/apis/apiregistration.k8s.io/v1/apiservices")
	w := startWatch(t, c, watch.WithUpgradePoll(time.Hour))
	waitFor(t, "watching", func() bool { return w.Stats().Watching })
	// The initial events handled, and the one round asked for once the
	// lists were in.
	waitFor(t, "the initial events and round", func() bool {
		st := w.Stats()
		return st.Events >= int64(initial) && st.Triggers >= 1
	})

	ws := w.Stats()
	for range 10 {
		if err := srv.TouchCRDStatus("g001.stress.example.com", "widget0001s"); err != nil {
			t.Fatal(err)
		}
		if err := srv.LabelCRD("g001.stress.example.com", "widget0001s", "team", "a"); err != nil {
			t.Fatal(err)
		}
	}
	// A sentinel that does ask for a refresh: a new CRD in a group-version
	// that exists (so no APIService changes). The CRD events are handled
	// one at a time, in order: once the sentinel's handler has begun (its
	// event is the 21st) and counted its trigger, every trigger the churn
	// asked for is counted too.
	sentinel := schema.GroupVersionResource{Group: "g001.stress.example.com", Version: "v1", Resource: "sentinels"}
	if err := srv.AddCRD(discoverytest.CRD{Group: sentinel.Group, Versions: []string{"v1"}, Kind: "Sentinel"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the 21 events", func() bool { return w.Stats().Events >= ws.Events+21 })
	waitFor(t, "the sentinel's trigger", func() bool { return w.Stats().Triggers >= ws.Triggers+1 })
	if got := w.Stats(); got.Events != ws.Events+21 || got.Triggers != ws.Triggers+1 {
		t.Errorf("status and label churn, then a new CRD: %d events and %d refreshes asked for, want 21 and 1",
			got.Events-ws.Events, got.Triggers-ws.Triggers)
	}
	waitFor(t, "the sentinel in discovery", func() bool {
		v, ok := c.Current().Version(sentinel.GroupVersion())
		return ok && slices.ContainsFunc(v.Resources, func(r surface.Resource) bool { return r.Name == sentinel.Resource })
	})

	st := c.Stats()
	for i := range 30 {
		if err := srv.AddCRD(discoverytest.CRD{Group: "burst.example.com", Versions: []string{"v1"}, Kind: "Burst" + string(rune('A'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the burst in discovery", func() bool {
		s := c.Current()
		v, ok := s.Version(schema.GroupVersion{Group: "burst.example.com", Version: "v1"})
		return ok && len(v.Resources) == 30
	})
	// A refresh per event would cost 60 requests (two each). How many
	// rounds the debounce makes of the burst depends on how fast the
	// server takes the 30 CRDs (about 5 requests idle, 14 seen under
	// -race on a loaded machine), so the bound is what no debounce cannot
	// meet, with room for a slow machine: fewer than one refresh per two
	// CRDs.
	if n := c.Stats().Requests - st.Requests; n >= 30 {
		t.Errorf("a burst of 30 CRDs cost %d discovery requests", n)
	}
}

// TestWatchForbiddenPolls: where the credentials may not watch CRDs, Watch
// says so in Stats and polls instead, and changes still arrive.
func TestWatchForbiddenPolls(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithWatchForbidden())
	c, _ := discovery.NewForHTTPClient(nil, base)
	var got changes
	c.Subscribe(got.add)
	w := startWatch(t, c, watch.WithFallbackPoll(50*time.Millisecond))
	waitFor(t, "the fallback", func() bool { return w.Stats().Forbidden })
	if w.Stats().Watching {
		t.Error("Watching while polling")
	}
	if c.Following() {
		t.Error("the client is Following while Run polls (every 50 ms, not on every change)")
	}
	gvr := schema.GroupVersionResource{Group: "polled.example.com", Version: "v1", Resource: "polleds"}
	if err := srv.AddCRD(discoverytest.CRD{Group: gvr.Group, Versions: []string{"v1"}, Kind: "Polled"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the polled change", func() bool { return got.added(gvr) })
}

// TestWatchResumesAfterDrop: a dropped watch resumes from where it was,
// without listing again, and events after the drop still arrive.
func TestWatchResumesAfterDrop(t *testing.T) {
	srv, base := discoverytest.Start(t)
	c, _ := discovery.NewForHTTPClient(nil, base)
	var got changes
	c.Subscribe(got.add)
	w := startWatch(t, c, watch.WithUpgradePoll(time.Hour))
	waitFor(t, "watching", func() bool { return w.Stats().Watching })
	lists := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if !r.Watch && (r.Path == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions" || r.Path == "/apis/apiregistration.k8s.io/v1/apiservices") {
				n++
			}
		}
		return n
	}
	before := lists()
	srv.DropWatches()
	gvr := schema.GroupVersionResource{Group: "after.example.com", Version: "v1", Resource: "afters"}
	if err := srv.AddCRD(discoverytest.CRD{Group: gvr.Group, Versions: []string{"v1"}, Kind: "After"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Change after the drop", func() bool { return got.added(gvr) })
	if n := lists() - before; n != 0 {
		t.Errorf("a dropped watch listed %d times again", n)
	}
}

// TestWatchLeavesNothingBehind: when ctx ends, Watch returns and every
// goroutine it started (informers, watches) has ended.
func TestWatchLeavesNothingBehind(t *testing.T) {
	_, base := discoverytest.Start(t)
	ignore := goleak.IgnoreCurrent()
	c, _ := discovery.NewForHTTPClient(nil, base)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w, _ := watch.New(c)
	go func() { defer close(done); _ = w.Run(ctx) }()
	waitFor(t, "watching", func() bool { return w.Stats().Watching })
	waitFor(t, "following", c.Following)
	cancel()
	<-done
	if w.Stats().Watching {
		t.Error("Watching after Run returned")
	}
	if c.Following() {
		t.Error("the client is Following after Run returned")
	}
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}

// TestWatchRefusesBadOptions: Watch returns at once with an error for an
// option that is not positive, before any request.
func TestWatchRefusesBadOptions(t *testing.T) {
	srv, base := discoverytest.Start(t)
	c, _ := discovery.NewForHTTPClient(nil, base)
	for _, opt := range []watch.Option{watch.WithUpgradePoll(0), watch.WithFallbackPoll(-time.Second), watch.WithSettle(0), watch.WithDebounce(0)} {
		if err := watch.Run(context.Background(), c, opt); err == nil {
			t.Error("a non-positive duration was accepted")
		}
	}
	if n := srv.Stats().Requests; n != 0 {
		t.Errorf("bad options sent %d requests", n)
	}
}

// countItems lists url (a list of a real server's API) and counts its items.
func countItems(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Items []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d, %v", url, resp.StatusCode, err)
	}
	return len(list.Items)
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
