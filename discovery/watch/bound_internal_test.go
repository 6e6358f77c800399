package watch

import (
	"fmt"
	"net/http"
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
	b := newObjectBound()
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
	w = newObjectBound().watch(in, false, nil)
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
