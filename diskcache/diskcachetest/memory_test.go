package diskcachetest_test

import (
	"testing"

	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

// TestMemory: the in-memory double passes the suite every Store must.
func TestMemory(t *testing.T) {
	diskcachetest.Run(t, func(t *testing.T) diskcachetest.Store { return &diskcachetest.Memory{} }, diskcachetest.Hooks{})
}
