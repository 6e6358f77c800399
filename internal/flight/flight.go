package flight

import (
	"context"
	"sync"
	"time"
)

// Group shares calls by key. The zero value is ready to use, with no
// timeout.
type Group[K comparable, V any] struct {
	// Timeout bounds each call's work; zero means none.
	Timeout time.Duration

	mu    sync.Mutex // guards calls; never held while work runs
	calls map[K]*call[V]
}

type call[V any] struct {
	done    chan struct{}
	val     V
	err     error
	waiters int
	pinned  bool // started by Start: runs to completion whoever leaves
	cancel  context.CancelFunc
}

// Do returns the result of fn for key, starting fn unless a call for key
// is under way, and waits for it until ctx ends. A caller whose ctx ends
// first gets ctx's error and leaves; when the last waiting caller leaves,
// the work's context is cancelled (unless Start pinned it), and the next
// caller starts the work anew rather than inherit a cancelled call. fn's
// context carries ctx's values, not its cancellation.
func (g *Group[K, V]) Do(ctx context.Context, key K, fn func(context.Context) (V, error)) (V, error) {
	c := g.join(context.WithoutCancel(ctx), key, fn, false)
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		g.leave(key, c)
		var zero V
		return zero, ctx.Err()
	}
}

// Start starts fn for key, or joins the call under way, with nobody
// waiting: the call runs to completion (or its timeout) even if every
// caller of Do leaves it.
func (g *Group[K, V]) Start(key K, fn func(context.Context) (V, error)) {
	g.join(context.Background(), key, fn, true)
}

func (g *Group[K, V]) join(base context.Context, key K, fn func(context.Context) (V, error), pin bool) *call[V] {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.calls[key]
	if c == nil {
		ctx, cancel := context.WithCancel(base)
		if g.Timeout > 0 {
			ctx, cancel = context.WithTimeout(base, g.Timeout)
		}
		c = &call[V]{done: make(chan struct{}), cancel: cancel}
		if g.calls == nil {
			g.calls = map[K]*call[V]{}
		}
		g.calls[key] = c
		go func() {
			defer cancel()
			val, err := fn(ctx)
			g.mu.Lock()
			if g.calls[key] == c {
				delete(g.calls, key)
			}
			g.mu.Unlock()
			c.val, c.err = val, err
			close(c.done)
		}()
	}
	if pin {
		c.pinned = true
	} else {
		c.waiters++
	}
	return c
}

func (g *Group[K, V]) leave(key K, c *call[V]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c.waiters--
	if c.waiters == 0 && !c.pinned {
		c.cancel()
		if g.calls[key] == c {
			delete(g.calls, key)
		}
	}
}
