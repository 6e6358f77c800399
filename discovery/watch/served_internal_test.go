package watch

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// servedSnapshot is a snapshot whose /apis lists the served discovery API
// with the given freshness and verbs (none: not served at all).
func servedSnapshot(t *testing.T, freshness string, verbs ...string) *discovery.Snapshot {
	t.Helper()
	doc := func(groups []any) discovery.Document {
		b, err := json.Marshal(map[string]any{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": groups})
		if err != nil {
			t.Fatal(err)
		}
		return discovery.Document{Body: b, ContentType: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
	}
	var named []any
	if verbs != nil {
		named = append(named, map[string]any{
			"metadata": map[string]any{"name": "discovery.kubeatlas.io"},
			"versions": []any{map[string]any{"version": "v1alpha1", "freshness": freshness, "resources": []any{map[string]any{
				"resource": "apigroups", "responseKind": map[string]any{"group": "discovery.kubeatlas.io", "version": "v1alpha1", "kind": "APIGroup"},
				"scope": "Cluster", "singularResource": "apigroup", "verbs": verbs,
			}}}},
		})
	}
	s, err := discovery.NewSnapshot(doc(nil), doc(named), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestServedAPIIsUsedOnlyWhereItCanBeWatched: Run watches the served API
// only where discovery lists it current, with list and watch.
func TestServedAPIIsUsedOnlyWhereItCanBeWatched(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *discovery.Snapshot
		want bool
	}{
		{"served", servedSnapshot(t, "Current", "get", "list", "watch"), true},
		{"not served", servedSnapshot(t, "Current"), false},
		{"its server unreachable (Stale)", servedSnapshot(t, "Stale", "get", "list", "watch"), false},
		{"not watchable", servedSnapshot(t, "Current", "get", "list"), false},
		{"no snapshot", nil, false},
	} {
		if got := servesAPIGroups(tc.s); got != tc.want {
			t.Errorf("%s: servesAPIGroups = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func apiGroup(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "discovery.kubeatlas.io/v1alpha1", "kind": "APIGroup"}}
	u.SetName(name)
	return u
}

func newServedFake(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{servedAPIGroups: "APIGroupList"}, objs...)
}

// TestServedAPIEventsAskForRefreshes: the initial list asks for nothing
// but the one round every start has; a group added, changed or removed on
// the served API each asks for a refresh.
func TestServedAPIEventsAskForRefreshes(t *testing.T) {
	_, w := newWatcher(t)
	w.o.upgradePoll, w.o.debounce = time.Hour, time.Millisecond
	w.refreshes = rate.NewLimiter(rate.Every(refreshEvery), refreshBurst)
	dc := newServedFake(apiGroup("apps"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.watchServed(ctx, dc) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watchServed returned %v when its context ended, want nil", err)
		}
	}()
	waitUntil(t, "watching", func() bool { return w.stats.watching.Load() > 0 })
	start := w.stats.triggers.Load()
	groups := dc.Resource(servedAPIGroups)
	if _, err := groups.Create(ctx, apiGroup("widgets.example.com"), metav1CreateOptions); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a refresh asked for by a new group", func() bool { return w.stats.triggers.Load() > start })
	after := w.stats.triggers.Load()
	if err := groups.Delete(ctx, "widgets.example.com", metav1DeleteOptions); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a refresh asked for by a removed group", func() bool { return w.stats.triggers.Load() > after })
}

// TestServedAPIGivenUpAfterFailures: lists of the served API that keep
// failing (its server gone: 503 through the aggregator) end watchServed
// with an error that says so, after servedGiveUp attempts, so that Run
// watches CRDs and APIServices instead; so does a 403 at once.
func TestServedAPIGivenUpAfterFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unavailable", apierrors.NewServiceUnavailable("service unavailable"), "4 lists or watches"},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Group: servedAPIGroups.Group, Resource: servedAPIGroups.Resource}, "", errors.New("no")), errForbidden.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, w := newWatcher(t)
			w.o.upgradePoll, w.o.debounce = time.Hour, time.Millisecond
			w.refreshes = rate.NewLimiter(rate.Every(refreshEvery), refreshBurst)
			dc := newServedFake()
			lists := 0
			dc.PrependReactor("list", "apigroups", func(clienttesting.Action) (bool, runtime.Object, error) {
				lists++
				return true, nil, tc.err
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := w.watchServed(ctx, dc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("watchServed over a failing served API = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	metav1CreateOptions = metav1.CreateOptions{}
	metav1DeleteOptions = metav1.DeleteOptions{}
)

// TestRefreshLimitOption: WithRefreshLimit sets the pace of refreshes
// events ask for, and refuses what cannot be a pace.
func TestRefreshLimitOption(t *testing.T) {
	var o watchOptions
	if err := WithRefreshLimit(200*time.Millisecond, 10)(&o); err != nil || o.refreshEvery != 200*time.Millisecond || o.refreshBurst != 10 {
		t.Fatalf("WithRefreshLimit(200ms, 10): %+v, %v", o, err)
	}
	for _, bad := range []struct {
		every time.Duration
		burst int
	}{{0, 10}, {time.Second, 0}, {-time.Second, 1}} {
		if err := WithRefreshLimit(bad.every, bad.burst)(&o); err == nil {
			t.Errorf("WithRefreshLimit(%v, %d) was accepted", bad.every, bad.burst)
		}
	}
}
