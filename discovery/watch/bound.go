package watch

import (
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// maxObjects bounds the objects one informer holds (CRDs, APIServices, or
// the served API's groups), whatever the server lists or streams: an
// informer keeps every object it is told of, and a hostile server that
// streamed distinct CRDs for 20 s took a process to 670 MB. Run needs to
// know that something changed, not every object: past the bound, the
// list is refused, or the watch ends with an error, and the pacer backs
// off (a short watch is a failure), so the informer's store, and the
// names kept here, stay within about maxObjects entries (twice that while
// a watch-list streams a new list beside the store). Several times any
// real cluster's CRDs (3,000 is a large one), and small enough that a
// flood of distinct CRDs peaks at about 64 MB of RSS (20,000: 82 MB).
const maxObjects = 10000

// errTooManyObjects is why a list or watch was cut short by maxObjects.
var errTooManyObjects = fmt.Errorf("over %d objects", maxObjects)

// objectBound tracks the names one informer may hold: what the last list
// (or watch-list) gave, plus what watches added since, minus what they
// deleted. Its calls come from the informer's reflector goroutine and the
// watches it opened; mu guards names.
type objectBound struct {
	mu    sync.Mutex
	names map[string]struct{}
}

func newObjectBound() *objectBound { return &objectBound{names: map[string]struct{}{}} }

// listed records a list's objects as what the informer holds now, or says
// why it must not hold them.
func (b *objectBound) listed(list runtime.Object) error {
	if n := meta.LenList(list); n > maxObjects {
		return fmt.Errorf("discovery/watch: a list of %d objects: %w", n, errTooManyObjects)
	}
	names := map[string]struct{}{}
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if m, err := meta.Accessor(o); err == nil {
			names[m.GetNamespace()+"/"+m.GetName()] = struct{}{}
		}
		return nil
	})
	b.mu.Lock()
	b.names = names
	b.mu.Unlock()
	return nil
}

// watch returns w, ended by an error event once it would make the
// informer hold more than maxObjects. A watch that streams the initial
// list (watch-list, fresh) starts from nothing, as the informer's store
// is then replaced. live, if not nil, is told when w is live (at once, or
// after the initial list a fresh one streams), and what it returns when
// w has ended (stream.opened).
func (b *objectBound) watch(w apiwatch.Interface, fresh bool, live func() (ended func())) apiwatch.Interface {
	if fresh {
		b.mu.Lock()
		b.names = map[string]struct{}{}
		b.mu.Unlock()
	}
	bw := &boundedWatch{in: w, b: b, out: make(chan apiwatch.Event), done: make(chan struct{}), fresh: fresh, live: live}
	go bw.loop()
	return bw
}

// admit records e and says whether the informer may take it.
func (b *objectBound) admit(e apiwatch.Event) bool {
	if e.Type != apiwatch.Added && e.Type != apiwatch.Modified && e.Type != apiwatch.Deleted {
		return true
	}
	m, err := meta.Accessor(e.Object)
	if err != nil {
		return true
	}
	name := m.GetNamespace() + "/" + m.GetName()
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.Type == apiwatch.Deleted {
		delete(b.names, name)
		return true
	}
	if _, ok := b.names[name]; !ok {
		if len(b.names) >= maxObjects {
			return false
		}
		b.names[name] = struct{}{}
	}
	return true
}

// boundedWatch passes a watch's events on until one would take its
// informer past maxObjects, which it replaces by an error event (the
// reflector then stops the watch, and lists or watches again through the
// pacer). Unlike apimachinery's watch.Filter, its goroutine ends when Stop
// is called even if nobody reads its events any more.
type boundedWatch struct {
	in       apiwatch.Interface
	b        *objectBound
	out      chan apiwatch.Event
	done     chan struct{}
	stopOnce sync.Once
	fresh    bool                  // it streams the initial list first
	live     func() (ended func()) // see objectBound.watch; used by loop only
}

func (w *boundedWatch) ResultChan() <-chan apiwatch.Event { return w.out }

func (w *boundedWatch) Stop() {
	w.stopOnce.Do(func() { close(w.done) })
	w.in.Stop()
}

func (w *boundedWatch) loop() {
	defer close(w.out)
	var ended func()
	if w.live != nil && !w.fresh {
		ended = w.live()
	}
	defer func() {
		if ended != nil {
			ended() // the connection is gone, or the watch stopped
		}
	}()
	for e := range w.in.ResultChan() {
		if ended == nil && w.live != nil && e.Type == apiwatch.Bookmark && initialEventsEnd(e.Object) {
			ended = w.live()
		}
		if e.Type == apiwatch.Added || e.Type == apiwatch.Modified || e.Type == apiwatch.Deleted {
			// Slimmed here, not only in the informer's store: a watch-list
			// keeps what it streams in a store of its own until the list
			// ends, as the server sent it (a CRD's labels and annotations
			// run to 256 KiB each). Not a bookmark, whose annotation ends
			// a watch-list. A CRD's slim form is slim's fixed point.
			e.Object = slimEvent(e.Object)
		}
		if !w.b.admit(e) {
			e = apiwatch.Event{Type: apiwatch.Error, Object: &metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusRequestEntityTooLarge, Reason: metav1.StatusReasonRequestEntityTooLarge,
				Message: "discovery/watch: the watch would hold " + errTooManyObjects.Error(),
			}}
		}
		select {
		case w.out <- e:
		case <-w.done:
			return
		}
		if e.Type == apiwatch.Error {
			w.in.Stop()
			// Drain what the watch still sends until it closes, so that
			// its own goroutine is not left blocked.
			for range w.in.ResultChan() {
			}
			return
		}
	}
}

// slimEvent is what the informer's store keeps of a CRD (slim), as the
// event arrives. Other objects (APIServices, the served API's groups) are
// passed as they are: their slim form keeps no apiVersion, kind or status,
// which the reflector and slim (again, in the informer) need; they are
// bounded in number only.
func slimEvent(o runtime.Object) runtime.Object {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		if out, err := slim(m); err == nil {
			return out.(*metav1.PartialObjectMetadata)
		}
	}
	return o
}

// initialEventsEnd says whether a bookmark ends the initial list of a
// watch-list.
func initialEventsEnd(o runtime.Object) bool {
	m, err := meta.Accessor(o)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}
