// Package docserver is a small API server for the core module's own
// internal tests (package discovery, fleet, openapi3, restmapper tests that
// reach unexported code) and redisstore's tests (so that redisstore's go.mod,
// and its users' module graphs, do not get k8s.io/apiserver either): aggregated discovery v2 of a real kube-apiserver
// v1.36.3 (recorded, see ../shared/fixtures) plus synthetic CRDs, with the
// real server's ETags, 304s, negotiation and gzip, and OpenAPI v3 through
// kube-openapi's handler3.
//
// Why not discovery/discoverytest: that fake runs k8s.io/apiserver's
// handlers and is a module of its own, so that the core's go.mod does not
// require k8s.io/apiserver (and with it grpc, otel, prometheus and cel-go in
// every user's module graph); nothing in the core module, tests included,
// may import it. Tests that need only exported API run against the real
// fake in internal/withfake; internal/withfake/docserver checks that, for
// the same CRDs and changes, this server answers discoverytest's /api and
// /apis byte for byte, JSON and protobuf, ETags included.
//
// It is also what the core packages' own external tests run against
// (discovery, restmapper, ... beside their code; docs/testing.md lists
// those that need the fake and stay in internal/withfake), so it offers
// discoverytest's API where they use it: Start and StartInProcess, CRDs
// (WithCRDs, AddCRD, RemoveCRD), SetGroupVersion, SetStale, ChangeSchema,
// faults (InjectFault, ClearFaults, Fault with discoverytest's fields) and
// the request log (Requests, ResetRequests, Stats). What it does not
// offer: legacy discovery and the older generations, several backends,
// peer aggregation, aggregated API servers, leases, CRD objects and their
// watches, fleets, and discoverytest's richer synthetic OpenAPI schemas.
//
// It is also the embedded fake cluster of examples/api-resources, the
// README's first command, served in that command's process
// (examples/internal/lightcluster): linking it costs the command 83
// packages, where the real-handler fake would be about 570 and a second
// build. The command links "testing" with it (Start and StartInProcess
// take a testing.TB), which it never calls and which registers no flags
// unless testing.Init is called.
//
// Files:
//   - docserver.go: the Server, its content, faults, negotiation and
//     request log.
//   - inprocess.go: StartInProcess, for testing/synctest bubbles.
//   - testdata: the recorded /api, /apis and /version (JSON).
package docserver
