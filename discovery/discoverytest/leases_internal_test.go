package discoverytest

import "testing"

// TestIdentityLeaseName: the lease names of the real HA pair, whose
// servers' hostnames were kas-0 and kas-1 (kas-0's as recorded; kas-1's by
// the same derivation).
func TestIdentityLeaseName(t *testing.T) {
	for host, want := range map[string]string{
		"kas-0": "apiserver-e2urur7kithhwevxgqmtxzakr4",
		"kas-1": "apiserver-a6yvkvmouwbbvkrk7br7wrz2lq",
	} {
		if got := identityLeaseName(host); got != want {
			t.Errorf("identityLeaseName(%q) = %s, want %s", host, got, want)
		}
	}
}
