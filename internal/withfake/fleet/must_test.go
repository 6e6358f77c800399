package fleet_test

import "github.com/kubeatlas/kubeatlas/fleet"

// must is the cluster a test registered (a copy of fleet/fleet_test.go's).
func must(c *fleet.Cluster, ok bool) *fleet.Cluster {
	if !ok {
		panic("fleet test: no such cluster")
	}
	return c
}
