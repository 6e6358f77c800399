package flight

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

type ctxKey struct{}

// TestShared: concurrent callers share one run and its result, which
// carries the first caller's context values.
func TestShared(t *testing.T) {
	var g Group[string, string]
	var runs atomic.Int32
	release := make(chan struct{})
	fn := func(ctx context.Context) (string, error) {
		runs.Add(1)
		<-release
		v, _ := ctx.Value(ctxKey{}).(string)
		return v, nil
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "first")
	results := make(chan string, 8)
	for range 8 {
		go func() {
			v, err := g.Do(ctx, "k", fn)
			if err != nil {
				v = err.Error()
			}
			results <- v
		}()
	}
	for g.waiting("k") != 8 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range 8 {
		if v := <-results; v != "first" {
			t.Errorf("result %q", v)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// TestLeaving: a caller that gives up gets its ctx error and does not
// cancel the work another caller waits for; when the last one leaves, the
// work is cancelled and the next caller starts it anew.
func TestLeaving(t *testing.T) {
	var g Group[string, int]
	var runs atomic.Int32
	cancelled := make(chan struct{}, 4)
	release := make(chan struct{})
	works := make(chan context.Context, 4) // each run's context
	fn := func(ctx context.Context) (int, error) {
		works <- ctx
		n := int(runs.Add(1))
		select {
		case <-release:
			return n, nil
		case <-ctx.Done():
			cancelled <- struct{}{}
			return 0, ctx.Err()
		}
	}
	impatient, giveUp := context.WithCancel(context.Background())
	patient, stop := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { _, err := g.Do(impatient, "k", fn); errs <- err }()
	go func() { _, err := g.Do(patient, "k", fn); errs <- err }()
	for g.waiting("k") != 2 {
		time.Sleep(time.Millisecond)
	}
	work := <-works
	giveUp()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v", err)
	}
	// Do leaves before it returns: had leaving cancelled the work, its
	// context would have ended by now.
	if err := work.Err(); err != nil {
		t.Fatalf("work cancelled while a caller still waits: %v", err)
	}
	stop()
	<-errs
	if work.Err() == nil {
		t.Fatal("the last caller left, and the work's context goes on")
	}
	<-cancelled

	go func() { close(release) }()
	n, err := g.Do(context.Background(), "k", fn)
	if err != nil || n != 2 {
		t.Errorf("after everyone left: run %d, %v; want a new run", n, err)
	}
}

// TestStartPins: work started by Start runs to completion even when every
// caller of Do leaves it.
func TestStartPins(t *testing.T) {
	var g Group[string, int]
	release := make(chan struct{})
	done := make(chan error, 1)
	g.Start("k", func(ctx context.Context) (int, error) {
		<-release
		done <- ctx.Err() // after every caller of Do has left
		return 1, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Do(ctx, "k", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("pinned work was cancelled: %v", err)
	}
}

// TestTimeout: the work's context ends after the group's timeout.
func TestTimeout(t *testing.T) {
	g := Group[string, int]{Timeout: 10 * time.Millisecond}
	_, err := g.Do(context.Background(), "k", func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v, want the timeout", err)
	}
}

// waiting is how many callers wait on key's call.
func (g *Group[K, V]) waiting(key K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.calls[key]; c != nil {
		return c.waiters
	}
	return 0
}
