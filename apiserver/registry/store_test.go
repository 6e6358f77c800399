package registry_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/apiserver/registry"
)

func newStore(clk *clocktesting.FakeClock, tune func(*registry.Config)) *registry.Store {
	c := registry.Config{
		Resource: v1alpha1.SchemeGroupVersion.WithResource("apigroups").GroupResource(),
		New:      func() registry.Object { return &v1alpha1.Group{} },
		NewList:  func() runtime.Object { return &v1alpha1.GroupList{} },
		Clock:    clk,
	}
	if tune != nil {
		tune(&c)
	}
	return registry.NewStore(c)
}

func group(name, version string, lbls map[string]string) *v1alpha1.Group {
	return &v1alpha1.Group{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Status: v1alpha1.GroupStatus{Group: name, PreferredVersion: version}}
}

func rvOf(t *testing.T, o runtime.Object) uint64 {
	t.Helper()
	var s string
	if m, ok := o.(metav1.Object); ok {
		s = m.GetResourceVersion()
	}
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return rv
}

// next reads one event, failing after a while.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return watch.Event{}
}

func nothing(t *testing.T, w watch.Interface) {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		t.Fatalf("unexpected event %v %v (open %v)", e.Type, e.Object, ok)
	case <-time.After(20 * time.Millisecond):
	}
}

func name(e watch.Event) string { return e.Object.(metav1.Object).GetName() }

func watchFrom(t *testing.T, s *registry.Store, opts metainternalversion.ListOptions) watch.Interface {
	t.Helper()
	w, err := s.Watch(context.Background(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func TestResourceVersionsGrowAcrossRestart(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	before := newStore(clk, nil)
	before.Upsert(group("a", "v1", nil))
	before.Upsert(group("a", "v2", nil))
	last := before.ResourceVersion()

	clk.Step(time.Second) // the process restarts a second later
	after := newStore(clk, nil)
	after.Upsert(group("a", "v2", nil))
	o, err := after.Get(context.Background(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rv := rvOf(t, o); rv <= last {
		t.Fatalf("resourceVersion after the restart %d is not above %d", rv, last)
	}
	if err := watchError(t, after, metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(last, 10)}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from before the restart: %v, want 410 Expired", err)
	}
}

// watchError opens a watch with opts, which must succeed, and returns the
// error of its one event, which must be an ERROR, before the watch ends:
// how the API server's watch cache answers a resourceVersion it cannot
// serve.
func watchError(t *testing.T, s *registry.Store, opts metainternalversion.ListOptions) error {
	t.Helper()
	w, err := s.Watch(context.Background(), &opts)
	if err != nil {
		t.Fatalf("watch %+v failed as a request (%v); the API server answers with an ERROR event", opts, err)
	}
	defer w.Stop()
	e, ok := <-w.ResultChan()
	if !ok || e.Type != watch.Error {
		t.Fatalf("watch %+v: first event %v (open %v), want ERROR", opts, e.Type, ok)
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Fatalf("watch %+v: more after the ERROR event", opts)
	}
	return apierrors.FromObject(e.Object)
}

func TestWatchResumesAndExpiresPastWindow(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), func(c *registry.Config) { c.Window = 3 })
	var rvs []uint64
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		s.Upsert(group(n, "v1", nil))
		rvs = append(rvs, s.ResourceVersion())
	}
	// The window holds c, d and e: resuming after b (its rv) misses nothing.
	w := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(rvs[1], 10)})
	for _, want := range []string{"c", "d", "e"} {
		if e := next(t, w); e.Type != watch.Added || name(e) != want {
			t.Fatalf("got %v %s, want ADDED %s", e.Type, name(e), want)
		}
	}
	nothing(t, w)
	// After a, b's event is gone: 410, so the client relists.
	if err := watchError(t, s, metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(rvs[0], 10)}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch past the window: %v, want 410 Expired", err)
	}
	// From a store ahead of this one (another process during a rollout),
	// plain or WatchList: too large, so that the client lists anew.
	yes := true
	for _, opts := range []metainternalversion.ListOptions{
		{ResourceVersion: strconv.FormatUint(rvs[4]+1, 10)},
		{ResourceVersion: strconv.FormatUint(rvs[4]+1, 10), SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
	} {
		if err := watchError(t, s, opts); !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
			t.Fatalf("watch %+v from the future: %v, want a timeout with cause ResourceVersionTooLarge", opts, err)
		}
	}
	if _, err := s.Watch(context.Background(), &metainternalversion.ListOptions{ResourceVersion: "x"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("watch from a bad resourceVersion: %v, want 400", err)
	}
}

func TestListAndWatchFromNow(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), nil)
	s.Upsert(group("b", "v1", nil))
	s.Upsert(group("a", "v1", nil))
	list, err := s.List(context.Background(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := list.(*v1alpha1.GroupList)
	if len(l.Items) != 2 || l.Items[0].Name != "a" || l.ResourceVersion != strconv.FormatUint(s.ResourceVersion(), 10) {
		t.Fatalf("list: %+v", l)
	}
	w := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: "0"})
	for _, want := range []string{"a", "b"} {
		if e := next(t, w); e.Type != watch.Added || name(e) != want {
			t.Fatalf("got %v %s, want ADDED %s", e.Type, name(e), want)
		}
	}
	s.Upsert(group("a", "v2", nil))
	s.Delete("b")
	s.Delete("nothing")
	if e := next(t, w); e.Type != watch.Modified || e.Object.(*v1alpha1.Group).Status.PreferredVersion != "v2" {
		t.Fatalf("got %v %+v", e.Type, e.Object)
	}
	e := next(t, w)
	if e.Type != watch.Deleted || name(e) != "b" || rvOf(t, e.Object) != s.ResourceVersion() {
		t.Fatalf("got %v %s at %d, want DELETED b at %d", e.Type, name(e), rvOf(t, e.Object), s.ResourceVersion())
	}
	nothing(t, w)
	// sendInitialEvents=false: no ADDED for what is there, only changes.
	no := false
	w = watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: "", SendInitialEvents: &no})
	nothing(t, w)
	s.Upsert(group("c", "v1", nil))
	if e := next(t, w); e.Type != watch.Added || name(e) != "c" {
		t.Fatalf("sendInitialEvents=false: got %v %s, want ADDED c (the change after the watch began) alone", e.Type, name(e))
	}
	nothing(t, w)
	if _, err := s.Get(context.Background(), "b", nil); !apierrors.IsNotFound(err) {
		t.Fatalf("get deleted: %v", err)
	}
}

func TestSendInitialEvents(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), nil)
	s.Upsert(group("a", "v1", nil))
	s.Upsert(group("b", "v1", nil))
	yes := true
	w := watchFrom(t, s, metainternalversion.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	for _, want := range []string{"a", "b"} {
		if e := next(t, w); e.Type != watch.Added || name(e) != want {
			t.Fatalf("got %v %s, want ADDED %s", e.Type, name(e), want)
		}
	}
	e := next(t, w)
	m := e.Object.(metav1.Object)
	if e.Type != watch.Bookmark || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" || rvOf(t, e.Object) != s.ResourceVersion() {
		t.Fatalf("got %v %v, want the initial-events-end bookmark at %d", e.Type, m.GetAnnotations(), s.ResourceVersion())
	}
	s.Upsert(group("c", "v1", nil))
	if e := next(t, w); e.Type != watch.Added || name(e) != "c" {
		t.Fatalf("got %v %s", e.Type, name(e))
	}
}

func TestBookmarks(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	s := newStore(clk, func(c *registry.Config) { c.BookmarkInterval = time.Minute })
	s.Upsert(group("a", "v1", nil))
	rv := strconv.FormatUint(s.ResourceVersion(), 10)
	with := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	without := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: rv})
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	s.Upsert(group("b", "v1", nil))
	next(t, with)
	next(t, without)
	clk.Step(time.Minute)
	e := next(t, with)
	if e.Type != watch.Bookmark || rvOf(t, e.Object) != s.ResourceVersion() {
		t.Fatalf("got %v at %d, want a bookmark at %d", e.Type, rvOf(t, e.Object), s.ResourceVersion())
	}
	nothing(t, without)
}

func TestSelectors(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), nil)
	s.Upsert(group("a", "v1", map[string]string{"stale": "true"}))
	s.Upsert(group("b", "v1", map[string]string{"stale": "false"}))
	stale := labels.SelectorFromSet(labels.Set{"stale": "true"})

	list, err := s.List(context.Background(), &metainternalversion.ListOptions{LabelSelector: stale})
	if err != nil {
		t.Fatal(err)
	}
	if items := list.(*v1alpha1.GroupList).Items; len(items) != 1 || items[0].Name != "a" {
		t.Fatalf("label selector list: %v", items)
	}
	list, err = s.List(context.Background(), &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "b")})
	if err != nil {
		t.Fatal(err)
	}
	if items := list.(*v1alpha1.GroupList).Items; len(items) != 1 || items[0].Name != "b" {
		t.Fatalf("field selector list: %v", items)
	}
	if _, err := s.List(context.Background(), &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("status.group", "b")}); !apierrors.IsBadRequest(err) {
		t.Fatalf("unsupported field: %v, want 400", err)
	}

	rv := strconv.FormatUint(s.ResourceVersion(), 10)
	w := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: rv, LabelSelector: stale})
	byName := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: rv, FieldSelector: fields.OneTermEqualSelector("metadata.name", "b")})
	s.Upsert(group("b", "v1", map[string]string{"stale": "true"}))  // enters the selection
	s.Upsert(group("a", "v1", map[string]string{"stale": "false"})) // leaves it
	s.Upsert(group("c", "v1", nil))                                 // never in it
	if e := next(t, w); e.Type != watch.Added || name(e) != "b" {
		t.Fatalf("got %v %s, want ADDED b", e.Type, name(e))
	}
	if e := next(t, w); e.Type != watch.Deleted || name(e) != "a" {
		t.Fatalf("got %v %s, want DELETED a", e.Type, name(e))
	}
	nothing(t, w)
	if e := next(t, byName); e.Type != watch.Modified || name(e) != "b" {
		t.Fatalf("got %v %s, want MODIFIED b", e.Type, name(e))
	}
	nothing(t, byName)
}

// A watcher that does not read is closed when its buffer is full; the
// store and the other watchers go on without waiting for it.
func TestSlowWatcherClosedWithoutBlocking(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), func(c *registry.Config) { c.WatchBuffer = 4 })
	slow := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(s.ResourceVersion(), 10)})
	fast := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: strconv.FormatUint(s.ResourceVersion(), 10)})
	const n = 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			s.Upsert(group("g"+strconv.Itoa(i), "v1", nil))
			// The fast watcher keeps up: it reads each event as it comes.
			if e, ok := <-fast.ResultChan(); !ok || name(e) != "g"+strconv.Itoa(i) {
				t.Errorf("fast watcher: event %d: %v %v", i, e.Type, ok)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the store waited for a slow watcher")
	}
	kept := 0
	for range slow.ResultChan() { // closed: ends after what was buffered
		kept++
	}
	if kept == 0 || kept > 5 {
		t.Fatalf("the slow watcher kept %d events, want its buffer's worth", kept)
	}
}

// Encoders set an object's apiVersion and kind while they encode it, so two
// watchers (or a watcher and a GET) must never share one object.
func TestReadersDoNotShareObjects(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), nil)
	rv := strconv.FormatUint(s.ResourceVersion(), 10)
	w1 := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: rv})
	w2 := watchFrom(t, s, metainternalversion.ListOptions{ResourceVersion: rv})
	s.Upsert(group("a", "v1", nil))
	o1, o2 := next(t, w1).Object, next(t, w2).Object
	got, err := s.Get(context.Background(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if o1 == o2 || o1 == got || o2 == got {
		t.Fatal("readers share an object")
	}
	o1.GetObjectKind().SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("Group"))
	if !o2.GetObjectKind().GroupVersionKind().Empty() || !got.GetObjectKind().GroupVersionKind().Empty() {
		t.Fatal("setting one reader's kind changed another's")
	}
}

// TestUnreadyUntilFilled: a store made Unready answers gets, lists and
// watches with 429 and Retry-After 1 s (the API server's answer while its
// watch cache initializes, which clients retry) until MarkReady, not an
// empty list that would make informers delete what they hold.
func TestUnreadyUntilFilled(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), func(c *registry.Config) { c.Unready = true })
	s.Upsert(group("a", "v1", nil))
	check := func(what string, err error) {
		t.Helper()
		if !apierrors.IsTooManyRequests(err) {
			t.Fatalf("%s before MarkReady: %v, want 429", what, err)
		}
		if d, ok := apierrors.SuggestsClientDelay(err); !ok || d != 1 {
			t.Fatalf("%s before MarkReady: Retry-After %d (%v), want 1", what, d, ok)
		}
	}
	_, err := s.List(context.Background(), &metainternalversion.ListOptions{})
	check("list", err)
	_, err = s.Get(context.Background(), "a", nil)
	check("get", err)
	_, err = s.Watch(context.Background(), &metainternalversion.ListOptions{})
	check("watch", err)
	s.MarkReady()
	if _, err := s.List(context.Background(), &metainternalversion.ListOptions{}); err != nil {
		t.Fatalf("list after MarkReady: %v", err)
	}
}

// signal records whether API priority and fairness was told that a watch
// is set up.
type signal struct{ done chan struct{} }

func (s signal) Signal() { close(s.done) }
func (s signal) Wait()   { <-s.done }

// TestWatchReleasesItsSeat: a watch tells API priority and fairness that
// it is set up, as the watch cache does, so that its seat goes to the next
// request instead of being held for the watch's life (with APF on, behind
// the aggregator, new watches otherwise queue and get 429s).
func TestWatchReleasesItsSeat(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), nil)
	s.Upsert(group("a", "v1", nil))
	sig := signal{done: make(chan struct{})}
	w, err := s.Watch(utilflowcontrol.WithInitializationSignal(context.Background(), sig), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case <-sig.done:
	default:
		t.Fatal("the watch is set up and API priority and fairness was not told: it holds its seat")
	}
}

// TestStuckSignalHoldsUpNoChange pins that the store tells API priority
// and fairness (k8s.io/apiserver's signal, not our code) holding no lock:
// while one watch's signal is stuck, a change is stored and another watch
// opens. Before, the signal ran under the store's lock, which both wait
// for.
func TestStuckSignalHoldsUpNoChange(t *testing.T) {
	s := newStore(clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), nil)
	s.Upsert(group("a", "v1", nil))
	sig := stuckSignal{entered: make(chan struct{}), release: make(chan struct{})}
	opened := make(chan error, 1)
	go func() {
		w, err := s.Watch(utilflowcontrol.WithInitializationSignal(context.Background(), sig), &metainternalversion.ListOptions{})
		if err == nil {
			w.Stop()
		}
		opened <- err
	}()
	select {
	case <-sig.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not signal")
	}
	defer func() {
		close(sig.release)
		if err := <-opened; err != nil {
			t.Error(err)
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Upsert(group("b", "v1", nil))
		w, err := s.Watch(context.Background(), &metainternalversion.ListOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		w.Stop()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a change and a new watch wait for another watch's stuck signal")
	}
}

// stuckSignal is an initialization signal whose Signal blocks until
// release is closed (telling entered).
type stuckSignal struct{ entered, release chan struct{} }

func (s stuckSignal) Signal() { close(s.entered); <-s.release }
func (s stuckSignal) Wait()   { <-s.release }
