package gate

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloseWaitsForOtherGoroutinesCalls: callers on many goroutines come
// and go while the gate closes at a random point; once Close returns, no
// call is under way and none begins. Some calls close the gate themselves,
// which must not wait for their own call.
func TestCloseWaitsForOtherGoroutinesCalls(t *testing.T) {
	for round := range 200 {
		var g Gate
		var closed, running atomic.Int64
		rng := rand.New(rand.NewPCG(uint64(round), 1))
		closeAt := time.Duration(rng.IntN(2000)) * time.Microsecond
		selfClose := rng.IntN(4) == 0
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)+2))
				for i := 0; ; i++ {
					if !g.Enter() {
						return
					}
					if closed.Load() != 0 {
						t.Errorf("a call began after Close returned")
					}
					running.Add(1)
					if selfClose && w == 0 && i == 3 {
						g.Close() // from inside a call: returns, with this call under way
					}
					time.Sleep(time.Duration(rng.IntN(3)) * 100 * time.Microsecond)
					running.Add(-1)
					g.Exit()
				}
			})
		}
		time.Sleep(closeAt)
		g.Close()
		closed.Store(1)
		if n := running.Load(); n != 0 {
			t.Fatalf("round %d: Close returned with %d calls under way", round, n)
		}
		wg.Wait()
	}
}

func TestGoroutineID(t *testing.T) {
	here := goroutineID()
	if here == 0 {
		t.Fatal("no goroutine id read")
	}
	if goroutineID() != here {
		t.Error("one goroutine read two ids")
	}
	other := make(chan uint64)
	go func() { other <- goroutineID() }()
	if o := <-other; o == here || o == 0 {
		t.Errorf("another goroutine's id is %d, this one's %d", o, here)
	}
}
