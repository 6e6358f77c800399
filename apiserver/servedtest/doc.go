// Package servedtest serves kubeatlas's discovery API,
// discovery.kubeatlas.io/v1alpha1 (apigroups, apiservers,
// clusterconsistencies), on the fake API server of
// github.com/kubeatlas/kubeatlas/discovery/discoverytest, as a cluster where
// kubeatlas-apiserver is deployed serves it, so that a client's use of it
// (discovery/watch.Run watches apigroups where it is served) can be tested:
//
//	srv, base := discoverytest.Start(t, servedtest.WithServedAPI(), discoverytest.WithWatchForbidden())
//	// ... a client of base watches apigroups; CRDs and APIServices are forbidden to it
//	srv.SetAggregatedAPIUnavailable(v1alpha1.GroupName, true) // the aggregator's 503, the group Stale
//
// It is not a re-implementation: the apiserver package's own server
// (apiserver.NewUnlistened, no listener of its own), fed by a
// discovery.Client on the fake, behind discoverytest.WithAggregatedAPI. It
// lives in the apiserver module, not in discoverytest, so that a test of
// the fake that does not serve this API does not link k8s.io/apiserver's
// generic server (about 440 packages, 50 MB of binary).
//
// # Files
//
//   - served.go: WithServedAPI, the start function it gives the fake.
package servedtest
