// Package apiserver serves discovery.kubeatlas.io/v1alpha1, the watchable
// and coordinated discovery that Kubernetes proposed and never built, as an
// aggregated API server over the kubeatlas SDK (a module of its own, so the
// core never depends on k8s.io/apiserver):
//
//   - apigroups (kind Group): one object per API group of the upstream
//     cluster, its versions in preference order with freshness and
//     resources, labels for selectors (LabelStale, LabelServedEverywhere)
//     and a Consistent condition;
//   - apiservers: one per API server (identity lease), from
//     consistency.Check;
//   - clusterconsistencies: the one object "cluster", the cluster's verdict.
//
// One discovery.Client on the upstream cluster, kept current by
// discovery/watch.Run, feeds every client of this server: its changes
// (Client.Subscribe) are applied to in-memory stores (package registry),
// where an unchanged group keeps its object and resourceVersion, so watchers
// hear only of real changes. consistency.Check runs every CheckInterval and
// a moment after each change.
//
// # Files
//
//   - server.go: Options (k8s.io/apiserver's recommended options, no etcd,
//     no admission; local mode), the generic server's configuration, New,
//     NewUnlistened (no listener: a caller's handler serves it, as
//     servedtest.WithServedAPI does on the fake) and Run, and the local
//     kubeconfig.
//   - feed.go: Feed, which keeps the stores equal to the upstream cluster.
//   - convert.go: snapshots and consistency reports as API objects.
//   - stores.go: the three resources' stores and their kubectl tables.
//
// The types are in apis/discovery/v1alpha1, their OpenAPI definitions in
// openapi, the store in registry, the command in cmd/kubeatlas-apiserver,
// and this API served on the fake API server, for tests, in servedtest.
package apiserver
