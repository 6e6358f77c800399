package apiserver

import (
	"time"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
)

// The feed's steps, for feed_groups_test.go, an external test as every
// other test of this package is (they go through the public API).

func (f *Feed) ApplySnapshot(s *discovery.Snapshot) { f.applySnapshot(s) }

func (f *Feed) ApplyReport(r *consistency.Report, at time.Time) { f.applyReport(r, at) }
