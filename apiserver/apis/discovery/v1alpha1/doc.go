// Package v1alpha1 is the API group discovery.kubeatlas.io/v1alpha1: what
// the watchable API group discovery and coordinated discovery proposals asked
// the cluster to serve, as read-only objects.
//
//   - Group (apigroups): one per API group the upstream cluster serves,
//     its versions in preference order with their freshness and resources,
//     and whether every API server serves it alike (Consistent).
//   - APIServer (apiservers): one per API server (identity lease): version,
//     hashes of its built-in discovery and of its view, what it gets from
//     peers, last seen, alive.
//   - ClusterConsistency (clusterconsistencies, one object named "cluster"):
//     the cluster's verdict, a Consistent condition.
//
// The kind of apigroups is Group, not APIGroup: client-go's and the API
// server's schemes register metav1.APIGroup (what /apis/<group> answers) as
// an unversioned kind, which a scheme looks up by kind name alone, so a
// client would decode an APIGroup of any group as that type.
//
// # Files
//
//   - types.go: the types.
//   - register.go: the group-version and AddToScheme.
//   - zz_generated.deepcopy.go, zz_generated.openapi.go: generated (go
//     generate; see generate.go), never edited.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=discovery.kubeatlas.io
package v1alpha1
