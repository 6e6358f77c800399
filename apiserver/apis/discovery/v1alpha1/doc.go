// Package v1alpha1 is the API group discovery.kubeatlas.io/v1alpha1: what
// the watchable API group discovery and coordinated discovery proposals asked
// the cluster to serve, as read-only objects.
//
//   - APIGroup (apigroups): one per API group the upstream cluster serves,
//     its versions in preference order with their freshness and resources,
//     and whether every API server serves it alike (Consistent).
//   - APIServer (apiservers): one per API server (identity lease): version,
//     hashes of its built-in discovery and of its view, what it gets from
//     peers, last seen, alive.
//   - ClusterConsistency (clusterconsistencies, one object named "cluster"):
//     the cluster's verdict, a Consistent condition.
//
// # Files
//
//   - types.go: the types.
//   - register.go: the group-version and AddToScheme.
//   - deepcopy.go: DeepCopyObject and friends, hand-written (deepcopy-gen,
//     of k8s.io/code-generator, is not in the offline module cache); pinned by
//     a fuzzed round-trip test.
package v1alpha1
