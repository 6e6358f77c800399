package watch

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestOnChange: WithOnChange's func is called once for the refresh that
// events ask for (not again at the rounds that follow while the change
// settles), not for the catch-up after the lists nor for events that
// cannot change the server's APIs (a CRD's status or labels), and about
// once a second under a flood of events. In a synctest bubble over the
// in-process fake, so that the debounce, the rounds and the refresh limit
// run on the bubble's clock.
func TestOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, hc, base := docserver.StartInProcess(t)
		c, err := discovery.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(c, WithOnChange(nil)); err == nil {
			t.Error("a nil change func was accepted")
		}
		var told atomic.Int64
		w := &watcher{Watcher: &Watcher{c: c, o: watchOptions{
			settle: DefaultSettle, debounce: DefaultDebounce, upgradePoll: time.Hour,
			logger: slog.New(slog.DiscardHandler), onChange: func() { told.Add(1) },
		}}, wake: make(chan struct{}, 1), refreshes: rate.NewLimiter(rate.Every(refreshEvery), refreshBurst)}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); _ = w.loop(ctx, newFollower(c), nil, nil) }()
		defer func() { cancel(); <-done }()
		step := func(what string, least, most int64, events func()) {
			t.Helper()
			events()
			time.Sleep(DefaultSettle + time.Second) // every round the events asked for
			synctest.Wait()
			if n := told.Swap(0); n < least || n > most {
				t.Errorf("%s: told %d times, want %d to %d", what, n, least, most)
			}
		}
		crd := func(generation int64, labels map[string]string) any {
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", ResourceVersion: "1", Generation: generation, Labels: labels}}
		}
		step("the catch-up after the lists", 0, 0, w.catchUp)
		step("a status or label update", 0, 0, func() { w.crdEvent(crd(1, nil), crd(1, map[string]string{"a": "b"}), false) })
		step("a CRD's new generation (its rounds included)", 1, 1, func() { w.crdEvent(crd(1, nil), crd(2, nil), false) })
		step("a CRD created", 1, 1, func() { w.crdEvent(nil, crd(1, nil), false) })
		const seconds = 20
		step("a flood of new generations", seconds/2, seconds+refreshBurst, func() {
			for g := range int64(seconds * 100) {
				w.crdEvent(crd(g, nil), crd(g+1, nil), false)
				time.Sleep(10 * time.Millisecond)
			}
		})
	})
}
