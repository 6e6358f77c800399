//go:build race

package discoverytest_test

// raceEnabled: the race detector slows the real handlers tenfold and
// changes what the heap holds, so heap measurements skip under it.
const raceEnabled = true
