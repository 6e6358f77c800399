package shared_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/restmapper"
	"github.com/kubeatlas/kubeatlas/shared"
)

// Sharing that scales with identities (issue 45): one watch per server,
// whatever the number of identities held, and each identity's view
// proven by its own conditional requests only when it is looked at after
// a change (shared's leader.go).

var widget = schema.GroupKind{Group: "g000.stress.example.com", Kind: "Widget0000"}

// newRegistry is a registry whose discovery clients and mappers read clk
// (the watch runs on real time: its upgrade poll an hour, its fallback
// poll 100ms).
func newRegistry(t testing.TB, clk *clocktesting.FakeClock) *shared.Registry {
	t.Helper()
	r, err := shared.New(shared.WithLinger(0),
		shared.WithWatchOptions(watch.WithUpgradePoll(time.Hour), watch.WithFallbackPoll(100*time.Millisecond)),
		shared.WithDiscoveryOptions(discovery.WithClock(clk)),
		shared.WithMapperOptions(restmapper.WithClock(clk)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func acquire(t testing.TB, r *shared.Registry, d *door, token string) *shared.Handle {
	t.Helper()
	h, err := r.Acquire(d.config(token))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOneWatchForManyIdentities: 50 identities held at once run one
// watch, with one identity's credentials; each other identity's first use
// costs two 304s, and then it is followed through the watch: held ten
// minutes (a fake clock), it sends nothing, nor do its lookups, with or
// without a version. A CRD added, once the watch has refreshed for it, is
// found by each identity that looks it up, at its first lookup, for at
// most two conditional requests and one document each (the new content
// is the watch's, so the identity's refresh does not ask again on new
// connections); those that do not look send nothing, and are no longer
// followed (their view is stale) until a lookup without a version proves
// it again.
func TestOneWatchForManyIdentities(t *testing.T) {
	const n = 50
	d := startDoor(t, discoverytest.WithCRDs(100, 10))
	clk := clocktesting.NewFakeClock(time.Now())
	r := newRegistry(t, clk)
	handles := make([]*shared.Handle, n)
	tokens := make([]string, n)
	for i := range handles {
		tokens[i] = fmt.Sprintf("tok-%d", i)
		handles[i] = acquire(t, r, d, tokens[i])
		if _, err := handles[i].Mapper().RESTMapping(widget, "v1"); err != nil {
			t.Fatalf("%s: %v", tokens[i], err)
		}
	}
	defer func() {
		for _, h := range handles {
			h.Release()
		}
		waitWatchStopped(t)
	}()
	waitFor(t, "every identity followed", func() bool {
		return !slices.ContainsFunc(handles, func(h *shared.Handle) bool { return !h.Discovery().Following() })
	})
	if w := d.watching(); len(w) != 1 || w[0] != tokens[0] {
		t.Fatalf("watches open by %v, want one, by the first identity", w)
	}
	for i, tok := range tokens[1:] {
		got := d.of(tok)
		if got.watches != 0 {
			t.Errorf("%s sent %d lists or watches, want none: one watch per server", tok, got.watches)
		}
		if got.discovery != 2 || got.notModified != 2 {
			t.Errorf("%s: first use cost %+v, want two 304s", tok, got)
		}
		if handles[i+1].Watcher() != nil {
			t.Errorf("%s has a Watcher, which runs with another identity's credentials", tok)
		}
	}
	if handles[0].Watcher() == nil || !handles[0].Watcher().Stats().Watching {
		t.Fatal("the first identity's handle does not show the watch it runs")
	}

	// Held ten minutes, then looked up with and without a version:
	// nothing sent, the leader's included (nothing changed).
	before := d.all()
	for range 10 {
		clk.Step(time.Minute)
		time.Sleep(20 * time.Millisecond)
	}
	if after := d.all(); !equalTallies(before, after) {
		t.Fatalf("held idle ten minutes, the identities sent: %v, before %v", after, before)
	}
	for _, h := range handles {
		for range 5 {
			if _, err := h.Mapper().RESTMapping(widget); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Mapper().RESTMapping(widget, "v1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := d.all(); !equalTallies(before, after) {
		t.Fatalf("lookups of followed identities sent: %v, before %v", after, before)
	}

	// A CRD added: the even identities look it up.
	added := discoverytest.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "Gadget"}
	if err := d.srv.AddCRD(added); err != nil {
		t.Fatal(err)
	}
	gk := schema.GroupKind{Group: added.Group, Kind: added.Kind}
	waitFor(t, "the watch's refresh", func() bool {
		_, ok := handles[0].Discovery().Current().Group(added.Group)
		return ok
	})
	before = d.all()
	for i, h := range handles {
		if i%2 == 0 {
			if _, err := h.Mapper().RESTMapping(gk); err != nil {
				t.Fatalf("%s does not find the new CRD at its first lookup: %v", tokens[i], err)
			}
		}
	}
	after := d.all()
	for i, tok := range tokens {
		if i == 0 {
			continue // the leader refreshed for the watch
		}
		sent := diff(after[tok], before[tok])
		switch {
		case i%2 == 0 && (sent.discovery > 2 || sent.documents > 1):
			t.Errorf("%s found the new CRD for %+v, want at most two conditional requests and one document", tok, sent)
		case i%2 == 1 && sent != (tally{}):
			t.Errorf("%s, which did not look, sent %+v", tok, sent)
		}
	}
	for i, h := range handles {
		if i == 0 {
			continue
		}
		if got, want := h.Discovery().Following(), i%2 == 0; got != want {
			t.Errorf("%s: Following %v after the change, want %v (it looked: %v)", tokens[i], got, want, want)
		}
	}
	// A lookup without a version of an identity that did not look proves
	// its view again: its own two requests, and it is followed again.
	clk.Step(time.Minute)
	if _, err := handles[1].Mapper().RESTMapping(widget); err != nil {
		t.Fatal(err)
	}
	if sent := diff(d.of(tokens[1]), before[tokens[1]]); sent.discovery != 2 {
		t.Errorf("%s proved its view for %+v, want two requests", tokens[1], sent)
	}
	if !handles[1].Discovery().Following() {
		t.Errorf("%s not followed after proving its view", tokens[1])
	}
}

func diff(a, b tally) tally {
	return tally{discovery: a.discovery - b.discovery, notModified: a.notModified - b.notModified,
		documents: a.documents - b.documents, watches: a.watches - b.watches}
}

func equalTallies(a, b map[string]tally) bool {
	for k := range b {
		if a[k] != b[k] {
			return false
		}
	}
	return len(a) == len(b)
}
