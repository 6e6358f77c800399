// Package liveheap reads a test process's live heap as a user would
// measure it: after the process has settled, with nothing counted that a
// collection would free. Issue 45's benchmarks compare the heap of one
// identity with that of a thousand; a reading taken while a watch's list
// was still being decoded, or while a sync.Pool still held the buffers of
// the first responses, moved the one-identity figure by 0.4 MiB between
// runs, more than the identities moved it.
package liveheap

import (
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

// Read is the live heap in bytes: HeapAlloc after two collections (a
// sync.Pool's victim cache survives one; what a pool holds is a cache,
// not the program's data) and debug.FreeOSMemory, the median of n such
// readings (at least one), so that what another goroutine allocates
// between a collection and its reading moves no figure by itself.
func Read(n int) uint64 {
	readings := make([]uint64, max(n, 1))
	var ms runtime.MemStats
	for i := range readings {
		runtime.GC()
		runtime.GC()
		debug.FreeOSMemory()
		runtime.ReadMemStats(&ms)
		readings[i] = ms.HeapAlloc
	}
	slices.Sort(readings)
	return readings[len(readings)/2]
}

// Settle waits until every cond holds and the process's goroutines have
// been as many for ten checks in a row, 20 ms apart (background work
// started, say a watch's informers, has reached its steady state), or
// fails tb after within.
func Settle(tb testing.TB, within time.Duration, conds ...func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	last, same := -1, 0
	for {
		ok := true
		for _, c := range conds {
			if !c() {
				ok = false
				break
			}
		}
		if g := runtime.NumGoroutine(); ok && g == last {
			same++
		} else {
			last, same = g, 0
		}
		if same >= 10 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("liveheap: the process did not settle within %v", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Spread is the median, least and greatest of xs (zeros for none).
func Spread(xs []float64) (median, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(xs))
	median = s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return median, s[0], s[len(s)-1]
}
