package liveheap

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestReadCountsWhatIsHeldAndNotWhatAPoolCaches: 8 MiB held is in the
// reading; 8 MiB put in a sync.Pool is not (one collection leaves it in
// the pool's victim cache, which a reading after a single runtime.GC
// counted; Read(1), so that no later reading hides it).
func TestReadCountsWhatIsHeldAndNotWhatAPoolCaches(t *testing.T) {
	const size = 8 << 20
	before := Read(3)
	held := make([]byte, size)
	withHeld := Read(3)
	if withHeld < before+size*9/10 {
		t.Errorf("8 MiB held: the reading grew by %d bytes", int64(withHeld)-int64(before))
	}
	var pool sync.Pool
	func() {
		cached := make([]byte, size)
		pool.Put(&cached)
	}()
	if got := Read(1); got > withHeld+size/2 {
		t.Errorf("8 MiB in a pool: the reading grew by %d bytes, want nothing counted", got-withHeld)
	}
	runtime.KeepAlive(held)
	runtime.KeepAlive(&pool)
}

// TestSettleWaitsForGoroutinesAndConditions: goroutines started for
// 300 ms keep Settle waiting, and so does a condition that holds only
// after 200 ms.
func TestSettleWaitsForGoroutinesAndConditions(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			go func() { <-stop }()
		}
	}()
	start := time.Now()
	Settle(t, 10*time.Second)
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("Settle returned after %v, while goroutines were still starting", took)
	}
	start = time.Now()
	Settle(t, 10*time.Second, func() bool { return time.Since(start) > 200*time.Millisecond })
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("Settle returned after %v, before its condition held", took)
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		xs          []float64
		med, lo, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{4, 1, 2}, 2, 1, 4},
		{[]float64{4, 1, 2, 3}, 2.5, 1, 4},
	} {
		med, lo, hi := Spread(tc.xs)
		if med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("Spread(%v) = %v, %v, %v, want %v, %v, %v", tc.xs, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
}
