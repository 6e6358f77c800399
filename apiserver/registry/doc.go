// Package registry serves read-only API objects from memory, with the watch
// semantics client-go informers and kubectl rely on: monotonic
// resourceVersions that survive a restart of the process, watches that
// resume from a bounded window of events (410 Gone past it, so informers
// relist), bookmarks, WatchList's initial events, metadata.name field and
// label selectors, and tables for kubectl get.
//
// It is hand-written because k8s.io/apiserver has no in-memory
// storage.Interface: its generic registry (and the watch cache behind it)
// needs etcd, and this API's objects are derived from the upstream
// cluster, never written by clients.
//
// A Store never waits for a watcher: each has a bounded buffer, and one that
// falls behind by more is closed; the client resumes from the last
// resourceVersion it saw.
//
// # Files
//
//   - store.go: Store, its Config, Upsert and Delete, and the rest.Storage
//     verbs (get, list, watch) with the watchers behind them.
//   - table.go: the table for kubectl get.
package registry
