//go:build race

package httpx

// raceEnabled: under the race detector sync.Pool drops a share of what it
// is given, at random, so what a pool saves cannot be measured.
const raceEnabled = true
