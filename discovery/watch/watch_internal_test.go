package watch

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// newWatcher is a watcher whose events are only counted: its client has
// no server (nothing here sends a request) and no one runs its loop.
func newWatcher(t *testing.T) (*discovery.Client, *watcher) {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	return c, &watcher{Watcher: &Watcher{c: c, o: watchOptions{settle: DefaultSettle, logger: slog.New(slog.DiscardHandler)}}, wake: make(chan struct{}, 1)}
}

// TestAPIServiceChurnCostsNothing: an APIService update that changes
// neither its spec nor its availability (a label, a condition's message,
// only a new resourceVersion) asks for no refresh; a flip of Available
// does.
func TestAPIServiceChurnCostsNothing(t *testing.T) {
	_, w := newWatcher(t)
	apiService := func(rv, available, message string, labels map[string]string) any {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"spec":   map[string]any{"group": "metrics.k8s.io", "version": "v1beta1", "service": map[string]any{"namespace": "kube-system", "name": "metrics-server"}},
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": available, "message": message}}},
		}}
		u.SetName("v1beta1.metrics.k8s.io")
		u.SetResourceVersion(rv)
		u.SetLabels(labels)
		return slimAPIService(u)
	}
	w.apiServiceEvent(apiService("1", "True", "", nil), apiService("2", "True", "all checks passed", map[string]string{"team": "a"}), false)
	if n := w.stats.triggers.Load(); n != 0 {
		t.Errorf("label, message and resourceVersion churn asked for %d refreshes", n)
	}
	w.apiServiceEvent(apiService("2", "True", "", nil), apiService("3", "False", "unreachable", nil), false)
	if n := w.stats.triggers.Load(); n != 1 {
		t.Errorf("an availability flip asked for %d refreshes, want 1", n)
	}
}

// TestCRDChurnCostsNothing: a CRD update that keeps its generation and
// whether it is being deleted (a status update, a label, only a new
// resourceVersion) asks for no refresh, nor does the initial list; a new
// spec generation, the start of a deletion and a new CRD each ask for one.
func TestCRDChurnCostsNothing(t *testing.T) {
	_, w := newWatcher(t)
	crd := func(rv string, generation int64, labels map[string]string, deleting bool) any {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: "widgets.example.com", ResourceVersion: rv, Generation: generation, Labels: labels,
		}}
		if deleting {
			now := metav1.Now()
			m.DeletionTimestamp = &now
		}
		return slimCRD(m)
	}
	step := func(what string, want int64, event func()) {
		t.Helper()
		event()
		if n := w.stats.triggers.Load(); n != want {
			t.Errorf("after %s: %d refreshes asked for, want %d", what, n, want)
		}
	}
	step("the initial list", 0, func() { w.crdEvent(nil, crd("1", 1, nil, false), true) })
	step("a status or label update", 0, func() {
		w.crdEvent(crd("1", 1, nil, false), crd("2", 1, map[string]string{"team": "a"}, false), false)
	})
	step("a new generation", 1, func() { w.crdEvent(crd("2", 1, nil, false), crd("3", 2, nil, false), false) })
	step("the start of a deletion", 2, func() { w.crdEvent(crd("3", 2, nil, false), crd("4", 2, nil, true), false) })
	step("a new CRD", 3, func() { w.crdEvent(nil, crd("5", 1, nil, false), false) })
	if e := w.pending[len(w.pending)-1]; e.group != "example.com" || e.plural != "widgets" || !e.present {
		t.Errorf("a new CRD leads to expect %+v, want widgets.example.com to appear", e)
	}
}

// TestPendingExpectationsAreCapped: events that each lead to expect
// something (a hostile or broken server's flood of new CRD names, or of
// spec changes) keep at most one expectation per CRD and maxPending in
// all, however many come (every event was kept until its settle time).
func TestPendingExpectationsAreCapped(t *testing.T) {
	_, w := newWatcher(t)
	crd := func(name string, generation int64) any {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Generation: generation}}
	}
	for i := range 100000 {
		w.crdEvent(nil, crd(fmt.Sprintf("r%d.flood.example.com", i), 1), false)
	}
	if n := len(w.pending); n > maxPending {
		t.Errorf("%d pending expectations after 100,000 new CRD names, want at most %d", n, maxPending)
	}
	if !slices.ContainsFunc(w.pending, func(e expectation) bool { return e.plural == "" && e.rounds > 0 }) {
		t.Error("the expectations given up were not replaced by one that any change meets")
	}
	if e := w.pending[len(w.pending)-2]; e.plural != "r99999" || !e.present {
		t.Errorf("the newest CRD's expectation is %+v, want r99999 to appear", e)
	}

	_, w = newWatcher(t)
	for g := range int64(10000) {
		w.crdEvent(crd("widgets.example.com", g), crd("widgets.example.com", g+1), false)
	}
	w.crdEvent(nil, crd("gadgets.example.com", 1), false)
	w.crdGone(crd("gadgets.example.com", 1))
	if n := len(w.pending); n != 2 {
		t.Errorf("%d pending expectations after 10,000 spec changes and a CRD created then deleted, want 2: %+v", n, w.pending)
	}
	if i := slices.IndexFunc(w.pending, func(e expectation) bool { return e.plural == "gadgets" }); i < 0 || w.pending[i].present {
		t.Errorf("the deleted CRD's expectation is not its last state: %+v", w.pending)
	}
}

// TestCRDGenerationKeepsItsRounds: a CRD's new generation (a version
// added, which the server serves a moment later) keeps its rounds when
// another change of unknown effect (the APIService the aggregator makes
// for the new version) comes after it and replaces it.
func TestCRDGenerationKeepsItsRounds(t *testing.T) {
	_, w := newWatcher(t)
	crd := func(generation int64) any {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", ResourceVersion: "1", Generation: generation}}
	}
	w.crdEvent(crd(1), crd(2), false)
	w.apiServiceEvent(nil, &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"group": "example.com"}}}, false)
	if len(w.pending) != 1 || w.pending[0].rounds != crdGenerationRounds {
		t.Errorf("pending %+v; want one change of unknown effect with %d rounds", w.pending, crdGenerationRounds)
	}
}
