// Package discoverytest is a fake Kubernetes API server for discovery and
// OpenAPI v3 (and the CRD and APIService objects behind them), to test
// clients the way net/http/httptest tests HTTP clients.
//
// # Real handlers
//
// It is built on the code a kube-apiserver runs, not on a re-implementation:
// /api and /apis are served by k8s.io/apiserver's aggregated discovery
// handlers (NewResourceManager, WrapAggregatedDiscoveryToHandler, and
// NewPeerAggregatedDiscoveryHandler for KEP-4020 peer aggregation), legacy
// discovery by its discovery.NewAPIGroupHandler and NewAPIVersionHandler, and
// /openapi/v3 by k8s.io/kube-openapi's handler3. Content negotiation, ETags
// and 304s, Vary, protobuf, gzip, ?hash= cache busting, Cache-Control:
// public, immutable and the 301 on a stale hash therefore behave as on a real
// cluster. By default the content is the discovery of a real kube-apiserver
// v1.36.3, and the default server's aggregated documents match that server's
// byte for byte, ETags included.
//
// # What a test can choose
//
// What a test can choose:
//   - content: WithCRDs adds synthetic CRDs; WithoutBuiltins starts from the
//     core group alone; every kind gets a synthetic OpenAPI v3 schema with
//     x-kubernetes-group-version-kind.
//   - server generation (WithGeneration): legacy only (< 1.26), v2beta1
//     (1.26–1.29), v2 and v2beta1 (1.30–1.32), v2 (1.33 and later).
//   - changes at run time: Server.AddCRD, RemoveCRD, SetGroupVersion,
//     RemoveGroupVersion, RemoveGroup, SetStale (an unreachable aggregated
//     API server) and ChangeSchema (a new OpenAPI ?hash=, and a new
//     generation of the CRDs that serve the group-version).
//   - HA: WithBackends puts several API servers behind one URL, round-robin
//     or sticky per connection; Server.Backends changes one of them. Each
//     tells about itself as a real cluster's servers do: its own /version
//     (WithBackendVersions), an identity lease in kube-system
//     (coordination.k8s.io/v1, named from its hostname, with its
//     peer-advertise-address; Backend.SetLeaseRenewTime and RemoveLease
//     make it look dead or gone), and, under Start, a URL of its own
//     (Backend.URL) that reaches it alone.
//   - peer-aggregated discovery: WithPeerAggregation. The fake's HA mode,
//     with and without it, answers as a recorded mixed-version pair of real
//     kube-apiservers did (testdata/ha).
//   - faults per path (Server.InjectFault): latency, status codes with
//     Retry-After, a reset or truncated body, a wrong Content-Type, an
//     oversized body.
//   - list and watch: every backend serves LIST, GET and WATCH (JSON, or
//     metadata only for as=PartialObjectMetadata[List], what client-go's
//     metadata client asks for) of CustomResourceDefinitions and
//     APIServices, one cluster-wide set of objects that follows the first
//     backend's content: a CRD per AddCRD, an APIService per group-version
//     (Available False while SetStale). Watches honour resourceVersion
//     (resume from a bounded history, or a 410 Expired ERROR event),
//     sendInitialEvents (WatchList), allowWatchBookmarks
//     (WithBookmarkInterval) and timeoutSeconds. Server.TouchCRDStatus and
//     LabelCRD update an object without a spec change; DropWatches ends
//     open watches (clients resume), CompactWatchHistory makes resumes
//     expire (clients relist); WithWatchForbidden and SetWatchForbidden
//     answer 403 as RBAC would; WithDiscoveryDelay sends a CRD's watch
//     events before discovery shows it, as a real cluster does.
//   - aggregated API servers ([WithAggregatedAPI]): a group served beside
//     the fake by a handler of the caller's, listed in discovery as the
//     kube-aggregator lists it, its requests proxied after the fake's log,
//     faults and authentication; the API's own client reaches the fake in
//     memory, unlogged and never refused. SetAggregatedAPIUnavailable
//     answers the aggregator's 503 and turns the group Stale; Close stops
//     it. kubeatlas's served discovery API (discovery.kubeatlas.io) is
//     served this way by github.com/kubeatlas/kubeatlas/apiserver/servedtest,
//     in the apiserver module, so that this package does not link
//     k8s.io/apiserver's generic server.
//   - observation: Server.Requests logs every request (method, path, Accept,
//     If-None-Match, status, bytes, backend; a watch while it is open) and
//     Server.Stats sums it.
//
// # Serving
//
// [Start] serves a [Server] on loopback for the rest of a test. [StartInProcess]
// serves it over in-memory connections instead, with the client that
// reaches it, for tests inside a testing/synctest bubble: there the
// server's latency, delays and bookmarks run on the bubble's fake clock,
// and synctest.Wait knows when every request has settled.
//
// # Many clusters
//
// A [Fleet] serves many clusters from one handler, each under
// /k8s/clusters/<id> as a fleet proxy exposes them ([StartFleet],
// [ClusterPath]). Clusters share a few Servers, their surfaces, each built
// from its own options ([Surface], [DistinctSurfaces]), so memory grows
// with surfaces, not clusters: a Server with 3,000 CRDs is ~14 MiB, and
// hundreds of MiB once its OpenAPI has been served. Clusters of one
// surface serve the same bytes and ETags under their own prefixes; the
// prefix is put back where a response names a server-relative URL (the
// OpenAPI root's serverRelativeURLs, a redirect's Location). A change
// through a [Cluster] gives that cluster a Server of its own, copied from
// its surface (sharing the unchanged OpenAPI documents); faults and
// counters (Cluster.InjectFault, Cluster.Stats) are per cluster.
//
// The real handlers log through klog; a Server sends what they log while it
// builds or changes its content to the logger WithLogger gives, and by
// default discards it, so that embedding the fake adds nothing to a test's
// or program's output (see WithLogger for how this shares klog, which is
// process-wide).
//
// Without WithBearerToken the server does not authenticate: every request
// is served as an admin's. With it, it answers anonymous and wrong-token
// requests as a kube-apiserver with a token file does (403, 401).
//
// # A module of its own
//
// This package is the module github.com/kubeatlas/kubeatlas/discovery/discoverytest
// (go get it beside the core): k8s.io/apiserver, which it runs, brings grpc,
// otel, prometheus and cel-go, which stay out of the module graph of
// programs that import only the core's packages. It does not require the
// apiserver module (which requires this one, for apiserver/servedtest).
//
// # Files
//
//   - server.go: [Server], its options, the run-time changes; routing
//     between backends.
//   - backend.go: [Backend], one API server: its discovery content, served
//     through the real handlers.
//   - content.go: the content model ([CRD], synthetic CRDs, the v1.36.3
//     fixture); legacy.go and openapi.go: the legacy and OpenAPI views of it.
//   - generation.go: which discovery formats a server generation serves.
//   - objects.go, watch.go: CRD and APIService objects, LIST, GET and WATCH.
//   - leases.go: the backends' identity leases, LIST and GET.
//   - faults.go: [Fault] and InjectFault; auth.go: bearer tokens.
//   - aggregated.go: [WithAggregatedAPI], [AggregatedAPI],
//     SetAggregatedAPIUnavailable, Close: APIs served beside the fake, as
//     the kube-aggregator proxies them, and their own clients' way in.
//   - log.go: the request log ([Request], [Stats]); klog.go: where the real
//     handlers' klog lines go ([WithLogger]).
//   - start.go, inprocess.go: [Start] and [StartInProcess].
//   - fleet.go: [Fleet], [Cluster], [StartFleet]: many clusters.
package discoverytest
