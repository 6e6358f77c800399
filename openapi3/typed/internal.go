package typed

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) add()        { c.n.Add(1) }
func (c *atomicCounter) load() int64 { return c.n.Load() }

// lazyTimeout is a context with a deadline whose timer is made only when
// something waits on it (Done, Err): ObjectToTyped and Extract, called per
// object, find the document held already and wait on nothing, and a
// context.WithTimeout per call (a timer made and stopped) was a third of
// a typed value's cost. Hand-written because the context package makes the
// timer at once.
type lazyTimeout struct {
	deadline time.Time
	once     sync.Once
	ctx      context.Context
	cancel   context.CancelFunc
}

func newLazyTimeout(d time.Duration) *lazyTimeout {
	return &lazyTimeout{deadline: time.Now().Add(d)}
}

func (l *lazyTimeout) real() context.Context {
	l.once.Do(func() { l.ctx, l.cancel = context.WithDeadline(context.Background(), l.deadline) })
	return l.ctx
}

func (l *lazyTimeout) Deadline() (time.Time, bool) { return l.deadline, true }
func (l *lazyTimeout) Done() <-chan struct{}       { return l.real().Done() }
func (l *lazyTimeout) Err() error                  { return l.real().Err() }
func (l *lazyTimeout) Value(any) any               { return nil }

// stop releases the timer, if one was made.
func (l *lazyTimeout) stop() {
	l.once.Do(func() {})
	if l.cancel != nil {
		l.cancel()
	}
}
