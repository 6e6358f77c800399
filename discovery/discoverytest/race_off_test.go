//go:build !race

package discoverytest_test

const raceEnabled = false
