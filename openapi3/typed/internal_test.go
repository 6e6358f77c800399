package typed

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLazyTimeout: lazyTimeout is a context.Context as
// context.WithTimeout's is, before and after stop, whether or not
// anything waited on it before: its deadline, Done closed with
// DeadlineExceeded when it passes, Canceled once stopped (never a panic),
// context.Cause and context.AfterFunc as on any context, and a context
// derived from it ends with it.
func TestLazyTimeout(t *testing.T) {
	t.Run("stopped before any wait", func(t *testing.T) {
		l := newLazyTimeout(time.Hour)
		child, cancel := context.WithCancel(context.WithValue(l, ctxKey{}, 1))
		defer cancel()
		ran := make(chan struct{})
		context.AfterFunc(l, func() { close(ran) })
		l.stop()
		select {
		case <-l.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed after stop")
		}
		<-child.Done()
		<-ran
		if !errors.Is(l.Err(), context.Canceled) || !errors.Is(context.Cause(l), context.Canceled) {
			t.Errorf("Err %v, Cause %v; want Canceled", l.Err(), context.Cause(l))
		}
	})
	t.Run("stopped unwaited", func(t *testing.T) {
		l := newLazyTimeout(time.Hour)
		l.stop()
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Done after stop: panic %v", r)
				}
			}()
			<-l.Done()
		}()
		if !errors.Is(l.Err(), context.Canceled) {
			t.Errorf("Err after stop: %v; want Canceled", l.Err())
		}
	})
	t.Run("deadline", func(t *testing.T) {
		l := newLazyTimeout(time.Hour)
		defer l.stop()
		if d, ok := l.Deadline(); !ok || time.Until(d) > time.Hour {
			t.Errorf("Deadline %v, %v", d, ok)
		}
		if l.Err() != nil {
			t.Errorf("Err before the deadline: %v", l.Err())
		}
		passed := newLazyTimeout(time.Nanosecond)
		defer passed.stop()
		<-passed.Done()
		if !errors.Is(passed.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(passed), context.DeadlineExceeded) {
			t.Errorf("Err %v, Cause %v; want DeadlineExceeded", passed.Err(), context.Cause(passed))
		}
	})
}

type ctxKey struct{}
