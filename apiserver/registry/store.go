package registry

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Object is what a Store holds: an API object with metadata.
type Object interface {
	runtime.Object
	metav1.Object
}

// Defaults of a Store's Config.
const (
	DefaultWindow           = 10000
	DefaultWatchBuffer      = 1000
	DefaultBookmarkInterval = time.Minute
)

// initialEventsEnd annotates the bookmark that ends a WatchList's initial
// events (k8s.io/apimachinery's metav1.InitialEventsAnnotationKey).
const initialEventsEnd = metav1.InitialEventsAnnotationKey

// Config describes one resource a Store serves.
type Config struct {
	// Resource is the group and plural name (for errors); SingularName is
	// what discovery lists.
	Resource     schema.GroupResource
	SingularName string
	// New and NewList return empty objects of the kind and its list.
	New     func() Object
	NewList func() runtime.Object
	// Table renders objects for kubectl get: its columns and one row's
	// cells per object.
	Columns []metav1.TableColumnDefinition
	Cells   func(Object) []any

	// Window is how many events a watch may resume from (DefaultWindow);
	// an older resourceVersion gets 410 Gone, and the client relists.
	Window int
	// WatchBuffer is how many events a watcher may fall behind by
	// (DefaultWatchBuffer) before it is closed, so that a slow client never
	// blocks the store or the others; it resumes from its last
	// resourceVersion.
	WatchBuffer int
	// BookmarkInterval is how often watchers that allow bookmarks get one
	// (DefaultBookmarkInterval).
	BookmarkInterval time.Duration
	// Clock gives the resourceVersion base and drives bookmarks (the real
	// clock by default).
	Clock clock.WithTicker
	// Unready makes the Store answer lists and watches with 429 and
	// Retry-After: 1 s until MarkReady, as the API server does while its
	// watch cache initializes: a store its feed has not filled yet would
	// otherwise list nothing, and an informer relisting after a restart
	// would delete every object and add it back a moment later.
	Unready bool
}

// event is one change, kept for watches that resume.
type event struct {
	typ      watch.EventType
	old, obj Object // old is the previous state of a MODIFIED or DELETED object
	rv       uint64
}

// Store is an in-memory, watchable rest.Storage of one read-only resource.
// It is hand-written because k8s.io/apiserver has no in-memory
// storage.Interface (its generic registry needs etcd), and this API's state
// is derived from the upstream cluster, never written by clients.
//
// ResourceVersions grow by one per change from a base taken from the clock
// in microseconds when the Store is made, so they keep growing across a
// restart of the process, and a resourceVersion from before the restart
// (lower than the base) gets 410 Gone: the client relists and misses nothing.
type Store struct {
	cfg Config

	mu       sync.Mutex
	objects  map[string]Object
	rv       uint64  // the last change's, or the base
	history  []event // the last Window changes, oldest first
	dropped  uint64  // rv of the newest event dropped from history (0: none)
	base     uint64
	watchers map[*watcher]struct{}
	ready    atomic.Bool
}

// NewStore returns an empty Store.
func NewStore(cfg Config) *Store {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = DefaultWatchBuffer
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = DefaultBookmarkInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	base := uint64(cfg.Clock.Now().UnixMicro())
	s := &Store{cfg: cfg, objects: map[string]Object{}, rv: base, base: base, watchers: map[*watcher]struct{}{}}
	s.ready.Store(!cfg.Unready)
	return s
}

// MarkReady ends what Config.Unready began: from now on lists and watches
// are answered.
func (s *Store) MarkReady() { s.ready.Store(true) }

// errUnready is the API server's answer while its watch cache initializes.
func (s *Store) errUnready() error {
	if s.ready.Load() {
		return nil
	}
	return apierrors.NewTooManyRequests(fmt.Sprintf("%s: storage is initializing", s.cfg.Resource), 1)
}

var (
	_ rest.Storage              = (*Store)(nil)
	_ rest.Getter               = (*Store)(nil)
	_ rest.Lister               = (*Store)(nil)
	_ rest.Watcher              = (*Store)(nil)
	_ rest.Scoper               = (*Store)(nil)
	_ rest.SingularNameProvider = (*Store)(nil)
)

// New implements rest.Storage.
func (s *Store) New() runtime.Object { return s.cfg.New() }

// Destroy implements rest.Storage: it closes every watch.
func (s *Store) Destroy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		s.closeLocked(w)
	}
}

// NewList implements rest.Lister.
func (s *Store) NewList() runtime.Object { return s.cfg.NewList() }

// NamespaceScoped implements rest.Scoper: every object is cluster-scoped.
func (s *Store) NamespaceScoped() bool { return false }

// GetSingularName implements rest.SingularNameProvider.
func (s *Store) GetSingularName() string { return s.cfg.SingularName }

// ResourceVersion returns the resourceVersion of the last change.
func (s *Store) ResourceVersion() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

// Get implements rest.Getter.
func (s *Store) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if err := s.errUnready(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	o, ok := s.objects[name]
	s.mu.Unlock()
	if !ok {
		return nil, apierrors.NewNotFound(s.cfg.Resource, name)
	}
	return shallowCopy(o), nil
}

// shallowCopy copies o's top-level struct. Stored objects are never changed
// (Upsert stores a deep copy) and are shared by every reader, but
// k8s.io/apiserver's encoders set and restore an object's apiVersion and
// kind while they encode it, so each reader needs a TypeMeta of its own;
// the rest is only read. One small allocation per event and watcher, where
// a deep copy would cost the whole object (a group's resources).
func shallowCopy(o Object) Object {
	v := reflect.ValueOf(o).Elem()
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return c.Interface().(Object)
}

// List implements rest.Lister. It answers the current state whatever
// resourceVersion is asked for (all are "not older than" the current one
// or expired) and does not paginate: the lists are small (one object per API
// group).
func (s *Store) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	if err := s.errUnready(); err != nil {
		return nil, err
	}
	match, err := s.matcher(opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	rv := s.rv
	objs := make([]runtime.Object, 0, len(s.objects))
	for _, name := range slices.Sorted(maps.Keys(s.objects)) {
		if o := s.objects[name]; match(o) {
			objs = append(objs, o)
		}
	}
	s.mu.Unlock()
	list := s.cfg.NewList()
	if err := meta.SetList(list, objs); err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(strconv.FormatUint(rv, 10))
	return list, nil
}

// matcher returns the filter of label and field selectors; only
// metadata.name is a selectable field.
func (s *Store) matcher(opts *metainternalversion.ListOptions) (func(Object) bool, error) {
	ls, fs := labels.Everything(), fields.Everything()
	if opts != nil && opts.LabelSelector != nil {
		ls = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		fs = opts.FieldSelector
	}
	for _, r := range fs.Requirements() {
		if r.Field != "metadata.name" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %q: only metadata.name is supported", r.Field))
		}
	}
	if ls.Empty() && fs.Empty() {
		return func(Object) bool { return true }, nil
	}
	return func(o Object) bool {
		return ls.Matches(labels.Set(o.GetLabels())) && fs.Matches(fields.Set{"metadata.name": o.GetName()})
	}, nil
}

// Upsert stores obj (a copy of it, with its resourceVersion set) under its
// name, and tells watchers: ADDED, or MODIFIED when an object was there.
// It never waits for a watcher.
func (s *Store) Upsert(obj Object) {
	obj = obj.DeepCopyObject().(Object)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.objects[obj.GetName()]
	typ := watch.Added
	if ok {
		typ = watch.Modified
		obj.SetCreationTimestamp(old.GetCreationTimestamp())
	} else if ts := obj.GetCreationTimestamp(); ts.IsZero() {
		obj.SetCreationTimestamp(metav1.NewTime(s.cfg.Clock.Now()))
	}
	s.rv++
	obj.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	s.objects[obj.GetName()] = obj
	s.recordLocked(event{typ: typ, old: old, obj: obj, rv: s.rv})
}

// Delete removes the object named name, if there is one, and tells
// watchers.
func (s *Store) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.objects[name]
	if !ok {
		return
	}
	delete(s.objects, name)
	s.rv++
	// A deleted object's last state, at the deletion's resourceVersion, as
	// the API server sends it.
	gone := old.DeepCopyObject().(Object)
	gone.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	s.recordLocked(event{typ: watch.Deleted, old: old, obj: gone, rv: s.rv})
}

// Names returns the names of the stored objects, sorted.
func (s *Store) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.objects))
}

// Peek returns the stored object named name; callers must not change it.
func (s *Store) Peek(name string) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[name]
	return o, ok
}

func (s *Store) recordLocked(e event) {
	if len(s.history) == s.cfg.Window {
		s.dropped = s.history[0].rv
		s.history = slices.Delete(s.history, 0, 1)
	}
	s.history = append(s.history, e)
	for w := range s.watchers {
		s.sendLocked(w, e)
	}
}

// Watch implements rest.Watcher:
//   - resourceVersion "" or "0" (without sendInitialEvents=false), or
//     sendInitialEvents=true: an ADDED event per current object, then
//     changes; with sendInitialEvents, a bookmark annotated
//     k8s.io/initial-events-end after the ADDED events when bookmarks are
//     allowed too (a WatchList request);
//   - resourceVersion "" or "0" with sendInitialEvents=false: the changes
//     from now on;
//   - another resourceVersion: the changes after it, from the window of
//     kept events; older than the window (or from before a restart): an
//     ERROR event with 410 Gone (Expired); newer than the store: an ERROR
//     event with a timeout whose cause is ResourceVersionTooLarge. As from
//     the API server's watch cache, the request itself succeeds;
//   - allowWatchBookmarks: a bookmark every BookmarkInterval.
func (s *Store) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	if err := s.errUnready(); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &metainternalversion.ListOptions{}
	}
	match, err := s.matcher(opts)
	if err != nil {
		return nil, err
	}
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	var from uint64
	fromNow := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	if !fromNow {
		from, err = strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", opts.ResourceVersion))
		}
	}

	// Told after s.mu is unlocked (defers run last first): the signal is
	// k8s.io/apiserver's, not ours, and every change and watch waits for
	// s.mu.
	initialized := false
	defer func() {
		if initialized {
			utilflowcontrol.WatchInitialized(ctx)
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &watcher{store: s, match: match, bookmarks: opts.AllowWatchBookmarks}
	var replay []event
	switch {
	case !fromNow && from > s.rv:
		// From a store ahead of this one (another process, during a
		// rollout): the API server's answer after waiting in vain.
		return errWatch(tooLarge(from, s.rv)), nil
	case initial || fromNow && opts.SendInitialEvents == nil:
		for _, name := range slices.Sorted(maps.Keys(s.objects)) {
			replay = append(replay, event{typ: watch.Added, obj: s.objects[name], rv: s.rv})
		}
	case fromNow: // sendInitialEvents=false: the changes from now on
	default:
		oldest := s.base // every change after the base is kept...
		if s.dropped != 0 {
			oldest = s.dropped // ...until the window drops some
		}
		if from < oldest {
			return errWatch(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, oldest))), nil
		}
		i, _ := slices.BinarySearchFunc(s.history, from+1, func(e event, rv uint64) int { return cmpUint(e.rv, rv) })
		replay = s.history[i:]
	}
	w.ch = make(chan watch.Event, len(replay)+s.cfg.WatchBuffer+1)
	for _, e := range replay {
		s.sendLocked(w, e)
	}
	// As the watch cache does, the end of the initial events is told only to
	// a WatchList request (both options); k8s.io/apiserver's watch handler
	// expects it from no other.
	if initial && opts.AllowWatchBookmarks {
		w.ch <- s.bookmarkLocked(map[string]string{initialEventsEnd: "true"})
	}
	s.watchers[w] = struct{}{}
	// The watch is set up: API priority and fairness may give its seat to
	// the next request (it holds it for the watch's whole life otherwise,
	// so that with APF on, as behind the aggregator, new watches queued and
	// got 429s: 368 of 1,000 watchers connected in 12 minutes). The
	// watch cache signals the same as it starts sending.
	initialized = true
	if w.bookmarks {
		w.ticker = s.cfg.Clock.NewTicker(s.cfg.BookmarkInterval)
		w.done = make(chan struct{})
		go w.tick()
	}
	return w, nil
}

// errWatch is a watch that sends err as its only event and ends, which is
// how the API server's watch cache answers a resourceVersion it cannot
// serve (the request itself succeeds): clients of every language handle a
// 410 Gone there, as an ERROR event.
func errWatch(err *apierrors.StatusError) watch.Interface {
	ch := make(chan watch.Event, 1)
	status := err.Status()
	ch <- watch.Event{Type: watch.Error, Object: &status}
	close(ch)
	return watch.NewProxyWatcher(ch)
}

// tooLarge is the API server's error for a resourceVersion newer than it
// has: a timeout to retry after a second, with the cause that tells clients
// (client-go's reflector) to list anew.
func tooLarge(asked, current uint64) *apierrors.StatusError {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", asked, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// bookmarkLocked is a bookmark at the store's resourceVersion: every change
// up to it has been queued to the watcher before it.
func (s *Store) bookmarkLocked(annotations map[string]string) watch.Event {
	o := s.cfg.New()
	o.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	o.SetAnnotations(annotations)
	return watch.Event{Type: watch.Bookmark, Object: o}
}

// sendLocked queues e to w as the API server would show it through w's
// selectors; a watcher whose buffer is full is closed rather than waited for.
func (s *Store) sendLocked(w *watcher, e event) {
	if w.closed {
		return
	}
	now := w.match(e.obj)
	was := e.old != nil && w.match(e.old)
	var out watch.Event
	switch {
	case e.typ == watch.Deleted && was:
		out.Type = watch.Deleted
	case e.typ == watch.Deleted:
		return
	case now && was:
		out.Type = watch.Modified
	case now:
		out.Type = watch.Added
	case was: // no longer selected: gone, for this watcher
		out.Type = watch.Deleted
	default:
		return
	}
	out.Object = shallowCopy(e.obj)
	select {
	case w.ch <- out:
	default:
		s.closeLocked(w)
	}
}

func (s *Store) closeLocked(w *watcher) {
	if w.closed {
		return
	}
	w.closed = true
	delete(s.watchers, w)
	close(w.ch)
	if w.done != nil {
		close(w.done)
	}
}

// watcher is one open watch: a buffered channel the store sends to under its
// lock, never blocking.
type watcher struct {
	store     *Store
	match     func(Object) bool
	bookmarks bool
	ch        chan watch.Event
	closed    bool // guarded by store.mu
	ticker    clock.Ticker
	done      chan struct{} // closed with ch, ends tick
}

// ResultChan implements watch.Interface.
func (w *watcher) ResultChan() <-chan watch.Event { return w.ch }

// Stop implements watch.Interface.
func (w *watcher) Stop() {
	w.store.mu.Lock()
	defer w.store.mu.Unlock()
	w.store.closeLocked(w)
}

// tick sends a bookmark each interval, skipped when the buffer is full (the
// watcher is behind; a bookmark is only a hint).
func (w *watcher) tick() {
	defer w.ticker.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-w.ticker.C():
		}
		s := w.store
		s.mu.Lock()
		if !w.closed {
			select {
			case w.ch <- s.bookmarkLocked(nil):
			default:
			}
		}
		s.mu.Unlock()
	}
}
