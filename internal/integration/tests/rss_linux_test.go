package tests

import (
	"os"
	"syscall"
)

// peakRSS is a finished process's peak resident memory in bytes (Linux
// reports ru_maxrss in KiB).
func peakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}
