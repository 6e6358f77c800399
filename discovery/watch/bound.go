package watch

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// maxObjects and maxBytes bound what one informer holds (CRDs,
// APIServices, or the served API's groups), whatever the server lists or
// streams: an informer keeps every object it is told of, and a hostile
// server that streamed distinct CRDs for 20 s took a process to 670 MB.
// Run needs to know that something changed, not every object: each
// object is slimmed to what decides discovery as it arrives (slimCRD,
// slimAPIService, slimServed), and past either bound the list is refused,
// or the watch ends with an error, and the pacer backs off (a short watch
// is a failure), so the informer's store, and the names kept here, stay
// within about maxObjects entries and maxBytes (twice that while a
// watch-list streams a new list beside the store).
//
// maxObjects is several times any real cluster's CRDs (3,000 is a large
// one), and small enough that a flood of distinct CRDs peaks at about 64
// MB of RSS (20,000: 82 MB). maxBytes bounds the slim objects' size
// (sizeOf, an estimate: a fixed cost per object and per field, and the
// strings they hold), which only a server that sends huge names or
// fields reaches: 10,000 slim APIServices, the larger slim form, are
// about 17 MB of it.
const (
	maxObjects = 10000
	maxBytes   = 32 << 20
)

// errOverBound is why a list or watch was cut short by the bound.
var errOverBound = errors.New("over the watch's bound")

// objectBound tracks the objects one informer may hold: what the last
// list (or watch-list) gave, plus what watches added since, minus what
// they deleted, each with its size. Its calls come from the informer's
// reflector goroutine and the watches it opened; mu guards names and
// bytes.
type objectBound struct {
	slim                 func(runtime.Object) runtime.Object
	maxObjects, maxBytes int // maxObjects and maxBytes, but in tests

	mu    sync.Mutex
	names map[string]int // name: size
	bytes int            // the sum of names' sizes
}

// newObjectBound is the bound of an informer that keeps what slim keeps
// of each object.
func newObjectBound(slim func(runtime.Object) runtime.Object) *objectBound {
	return &objectBound{slim: slim, maxObjects: maxObjects, maxBytes: maxBytes, names: map[string]int{}}
}

// listed slims a list's objects in place, and records them as what the
// informer holds now, or says why it must not hold them.
func (b *objectBound) listed(list runtime.Object) error {
	n := meta.LenList(list)
	if n > b.maxObjects {
		return fmt.Errorf("discovery/watch: a list of %d objects, over %d: %w", n, b.maxObjects, errOverBound)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("discovery/watch: %w", err)
	}
	names, total := make(map[string]int, len(items)), 0
	for i, o := range items {
		items[i] = b.slim(o)
		name, size := nameOf(items[i]), sizeOf(items[i])
		total += size - names[name]
		names[name] = size
		if total > b.maxBytes {
			return fmt.Errorf("discovery/watch: a list of over %d bytes: %w", b.maxBytes, errOverBound)
		}
	}
	// The list now holds the slim objects only: what the server sent
	// beside them is garbage before the informer's store takes them.
	if err := meta.SetList(list, items); err != nil {
		return fmt.Errorf("discovery/watch: %w", err)
	}
	b.mu.Lock()
	b.names, b.bytes = names, total
	b.mu.Unlock()
	return nil
}

// watch returns w, its objects slimmed, ended by an error event once it
// would make the informer hold more than the bound. A watch that streams
// the initial list (watch-list, fresh) starts from nothing, as the
// informer's store is then replaced. live, if not nil, is told when w is
// live (at once, or after the initial list a fresh one streams), and what
// it returns when w has ended (stream.opened).
func (b *objectBound) watch(w apiwatch.Interface, fresh bool, live func() (ended func())) apiwatch.Interface {
	if fresh {
		b.mu.Lock()
		b.names, b.bytes = map[string]int{}, 0
		b.mu.Unlock()
	}
	bw := &boundedWatch{in: w, b: b, out: make(chan apiwatch.Event), done: make(chan struct{}), fresh: fresh, live: live}
	go bw.loop()
	return bw
}

// admit records e (its object slim) and says why the informer may not
// take it, if it may not.
func (b *objectBound) admit(e apiwatch.Event) error {
	if e.Type != apiwatch.Added && e.Type != apiwatch.Modified && e.Type != apiwatch.Deleted {
		return nil
	}
	if _, err := meta.Accessor(e.Object); err != nil {
		return nil
	}
	name := nameOf(e.Object)
	b.mu.Lock()
	defer b.mu.Unlock()
	old, known := b.names[name]
	if e.Type == apiwatch.Deleted {
		delete(b.names, name)
		b.bytes -= old
		return nil
	}
	if !known && len(b.names) >= b.maxObjects {
		return fmt.Errorf("over %d objects: %w", b.maxObjects, errOverBound)
	}
	size := sizeOf(e.Object)
	if b.bytes-old+size > b.maxBytes {
		return fmt.Errorf("over %d bytes: %w", b.maxBytes, errOverBound)
	}
	b.names[name] = size
	b.bytes += size - old
	return nil
}

// boundedWatch passes a watch's events on, their objects slimmed, until
// one would take its informer past the bound, which it replaces by an
// error event (the reflector then stops the watch, and lists or watches
// again through the pacer). Unlike apimachinery's watch.Filter, its
// goroutine ends when Stop is called even if nobody reads its events any
// more.
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
			// run to 256 KiB each, an APIService's caBundle as long as a
			// server makes it). Not a bookmark, whose annotation ends a
			// watch-list. A slim form is its slim's fixed point, so the
			// informer's transform slims it again at no cost to it.
			e.Object = w.b.slim(e.Object)
		}
		if err := w.b.admit(e); err != nil {
			e = apiwatch.Event{Type: apiwatch.Error, Object: &metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusRequestEntityTooLarge, Reason: metav1.StatusReasonRequestEntityTooLarge,
				Message: "discovery/watch: the watch would hold " + err.Error(),
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

// nameOf is an object's namespace and name, as the bound tells objects
// apart.
func nameOf(o runtime.Object) string {
	m, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	return m.GetNamespace() + "/" + m.GetName()
}

// The costs sizeOf counts beside the bytes of strings: an object's
// structs, and a field's map entry or slice element with its interface
// value; rounded up from what a 64-bit Go runtime allocates for them.
const (
	objectCost = 512
	fieldCost  = 64
)

// sizeOf estimates the memory a slim object holds.
func sizeOf(o runtime.Object) int {
	switch o := o.(type) {
	case *metav1.PartialObjectMetadata:
		return objectCost + len(o.APIVersion) + len(o.Kind) + len(o.Namespace) + len(o.Name) + len(o.UID) + len(o.ResourceVersion)
	case *unstructured.Unstructured:
		return objectCost + sizeOfValue(o.Object)
	}
	return objectCost
}

func sizeOfValue(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 0
		for k, e := range v {
			n += fieldCost + len(k) + sizeOfValue(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += fieldCost + sizeOfValue(e)
		}
		return n
	case string:
		return len(v)
	}
	return 0
}

// initialEventsEnd says whether a bookmark ends the initial list of a
// watch-list.
func initialEventsEnd(o runtime.Object) bool {
	m, err := meta.Accessor(o)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}
