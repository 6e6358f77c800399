// Package gate keeps the promise of an unsubscribe: once Close returns, the
// function it guards is not running on any other goroutine and no call of
// it begins, so that what the function writes to (a channel, say) may be
// closed. A call may close the gate it runs under (a callback that
// unsubscribes itself): Close then waits for the calls on other
// goroutines only, and the caller's own call runs on to its end.
//
// Go gives no other way to tell that Close comes from inside a call, where
// waiting for every call would wait for itself, than the goroutine's id,
// which goroutineID reads from the stack header the runtime has printed
// the same way since Go 1.0 ("goroutine 123 [running]:"). It is read once
// per Enter (about a microsecond, per callback call: small beside the
// callback) and once per Close.
package gate

import (
	"bytes"
	"runtime"
	"sync"
)

// Gate guards calls of one function. The zero value is open.
type Gate struct {
	mu     sync.Mutex
	closed bool
	calls  map[uint64]int // goroutine id -> calls under way on it
	ended  chan struct{}  // closed when a call ends, if Close waits
}

// Enter begins a call: false (and no call) once the gate is closed. Each
// true is followed by one Exit on the same goroutine, when the call ends.
func (g *Gate) Enter() bool {
	id := goroutineID()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	if g.calls == nil {
		g.calls = map[uint64]int{}
	}
	g.calls[id]++
	return true
}

// Exit ends the call Enter began on this goroutine.
func (g *Gate) Exit() {
	id := goroutineID()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.calls[id]--; g.calls[id] <= 0 {
		delete(g.calls, id)
	}
	if g.ended != nil {
		close(g.ended)
		g.ended = nil
	}
}

// Close closes the gate: no Enter succeeds after it returns, and the calls
// under way on other goroutines have ended. It may be called more than
// once, and from inside a call.
func (g *Gate) Close() {
	id := goroutineID()
	g.mu.Lock()
	g.closed = true
	for len(g.calls) > 1 || len(g.calls) == 1 && g.calls[id] == 0 {
		if g.ended == nil {
			g.ended = make(chan struct{})
		}
		ended := g.ended
		g.mu.Unlock()
		<-ended
		g.mu.Lock()
	}
	g.mu.Unlock()
}

// goroutineID is the running goroutine's id (see the package doc), or 0 if
// the stack header cannot be read, which no goroutine has: a Close from a
// call then waits for it, which shows as a deadlock rather than a broken
// promise.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if !ok {
		return 0
	}
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
