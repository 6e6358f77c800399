package watch

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

func crdMeta(i int) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d.example.com", i)}}
}

// TestBoundedWatch: a watch passes events on while its informer would hold
// at most maxObjects objects (deletions make room, updates of a known
// object take none), then ends with an error event the reflector reports
// (413); and its goroutine ends when it is stopped, read or not.
func TestBoundedWatch(t *testing.T) {
	in := apiwatch.NewFakeWithChanSize(maxObjects+10, false)
	b := newObjectBound(slimCRD)
	w := b.watch(in, true, nil)
	for i := range maxObjects {
		in.Add(crdMeta(i))
	}
	in.Modify(crdMeta(0))
	in.Delete(crdMeta(1))
	in.Add(crdMeta(maxObjects))     // takes the deleted one's room
	in.Add(crdMeta(maxObjects + 1)) // over
	n := 0
	var last apiwatch.Event
	for e := range w.ResultChan() {
		n, last = n+1, e
	}
	if n != maxObjects+4 || last.Type != apiwatch.Error {
		t.Fatalf("%d events, the last %v, want %d then an error", n, last.Type, maxObjects+4)
	}
	if s, ok := last.Object.(*metav1.Status); !ok || s.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("the error event holds %#v", last.Object)
	}

	// Stopped while nobody reads: its goroutine ends (the channel closes).
	in = apiwatch.NewFakeWithChanSize(1, false)
	w = newObjectBound(slimCRD).watch(in, false, nil)
	in.Add(crdMeta(0))
	time.Sleep(10 * time.Millisecond)
	w.Stop()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the bounded watch's goroutine did not end after Stop")
		}
	}
}

// TestByteBound: the bound counts bytes as well as objects. A watch ends
// with the same error event (413) once the slim objects it would make the
// informer hold pass maxBytes, however few they are: deletions give their
// bytes back, an update counts its new size instead of its old one. A
// list over it is refused, as one over maxObjects is, and one within it
// is slimmed in place.
func TestByteBound(t *testing.T) {
	big := func(i, n int) *metav1.PartialObjectMetadata { // a name of n bytes, which no slim form drops
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%0*d", n, i)}}
	}
	size := sizeOf(big(0, 64<<10))
	b := newObjectBound(slimCRD)
	b.maxBytes = 10 * size
	in := apiwatch.NewFakeWithChanSize(20, false)
	w := b.watch(in, true, nil)
	for i := range 10 {
		in.Add(big(i, 64<<10))
	}
	in.Modify(big(0, 64<<10)) // the same size: fits
	in.Delete(big(1, 64<<10))
	in.Add(big(10, 64<<10)) // takes the deleted one's bytes
	in.Modify(big(2, 64<<10))
	in.Add(big(11, 1)) // the objects are 10, but the bytes over
	in.Stop()
	n := 0
	var last apiwatch.Event
	for e := range w.ResultChan() {
		n, last = n+1, e
	}
	if n != 15 || last.Type != apiwatch.Error {
		t.Fatalf("%d events, the last %v, want 14 passed on, then an error", n, last.Type)
	}
	if s, ok := last.Object.(*metav1.Status); !ok || s.Code != http.StatusRequestEntityTooLarge || !strings.Contains(s.Message, "bytes") {
		t.Errorf("the error event holds %#v", last.Object)
	}

	list := &metav1.PartialObjectMetadataList{}
	for i := range 11 {
		list.Items = append(list.Items, *big(i, 64<<10))
	}
	if err := b.listed(list); !errors.Is(err, errOverBound) {
		t.Errorf("a list of 11 objects over the byte bound: %v", err)
	}
	list.Items = list.Items[:3]
	list.Items[0].Labels = map[string]string{"big": strings.Repeat("x", 1<<20)}
	if err := b.listed(list); err != nil {
		t.Fatalf("a list within the bound: %v", err)
	}
	if list.Items[0].Labels != nil || len(list.Items) != 3 {
		t.Errorf("the list was not slimmed in place: %d items, labels %d bytes", len(list.Items), len(list.Items[0].Labels["big"]))
	}
	if b.bytes != 3*size || len(b.names) != 3 {
		t.Errorf("after the list, the bound counts %d objects, %d bytes; want 3, %d", len(b.names), b.bytes, 3*size)
	}

	// The default: objects with huge names (1 MiB each) trip it after
	// maxBytes of them, far below maxObjects.
	in = apiwatch.NewFakeWithChanSize(maxBytes>>20+2, false)
	w = newObjectBound(slimCRD).watch(in, true, nil)
	name := strings.Repeat("x", 1<<20)
	for i := range maxBytes>>20 + 1 {
		in.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i, name)}})
	}
	in.Stop()
	n = 0
	for e := range w.ResultChan() {
		n, last = n+1, e
	}
	if last.Type != apiwatch.Error || n > maxBytes>>20 {
		t.Errorf("%d events of 1 MiB names, the last %v: want an error within %d", n, last.Type, maxBytes>>20)
	}
}
