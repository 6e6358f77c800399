// Package stuckclock is a clock for tests that pin "no lock of ours is
// held across a user's code": the real clock, whose first Now once armed
// blocks until released, as a user's clock (a WithClock option) may. A
// test arms it, makes the code under test read it while holding whatever
// it holds, and checks that other callers do not wait.
package stuckclock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a k8s.io/utils/clock.PassiveClock. Build it with New.
type Clock struct {
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

// New returns a clock that is not armed: it reads the real clock.
func New() *Clock {
	return &Clock{entered: make(chan struct{}), release: make(chan struct{})}
}

// Arm makes the next Now the one that blocks.
func (c *Clock) Arm() { c.armed.Store(true) }

// Entered is closed once the blocking Now has been entered.
func (c *Clock) Entered() <-chan struct{} { return c.entered }

// Release lets the blocking Now return (once).
func (c *Clock) Release() { close(c.release) }

// Now is the real time; the first call after Arm blocks until Release.
func (c *Clock) Now() time.Time {
	if c.armed.Load() {
		first := false
		c.once.Do(func() { first = true; close(c.entered) })
		if first {
			<-c.release
		}
	}
	return time.Now()
}

// Since is the real clock's; it never blocks.
func (c *Clock) Since(t time.Time) time.Duration { return time.Since(t) }
