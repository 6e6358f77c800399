// Package consistency tells whether the API servers of a cluster serve the
// same discovery, what coordinated discovery was proposed for: during an
// upgrade of an HA control plane they do not (a v1.37.1 server serves
// resources a v1.36.3 one does not), and a storage migration must wait for
// them to agree.
//
// [Check] takes a [discovery.Client] and uses only its public API, as
// etcd's concurrency package sits on its client: the client's URL and
// HTTP client (Connection) for what the cluster tells about itself (its
// identity leases, the kubernetes EndpointSlice, the StorageVersion API),
// the rest.Config it was built from (Config) to ask each server at its own
// address, and discovery.NewSnapshot for each server's own view
// (profile=nopeer, KEP-4020). Servers it cannot ask directly it samples
// through the client's URL on new connections. The [Report] has a
// [Server] per API server, what not every server serves ([Difference]),
// the resources whose storage versions differ, and how sure it is
// ([Certainty]).
//
// Check sends the client's credentials to the addresses the cluster names
// for its API servers (their identity leases), verifying each server's
// certificate for the name the client knows the cluster by. When that
// name is an IP address, a certificate is accepted for the address the
// cluster named; over plain HTTP, or with TLS verification off, nothing
// is verified. [ThroughURLOnly] sends nothing anywhere but the client's
// URL.
//
// # Files
//
//   - check.go: [Check], its options, and how it decides whom to ask and
//     how sure it is.
//   - cluster.go: what the cluster tells about its API servers: identity
//     leases, the EndpointSlice, StorageVersions.
//   - ask.go: asking one server, directly (where credentials go is decided
//     in directClient) or through the URL on a new connection (sampling).
//   - report.go: the [Report] and what it derives from the servers' views
//     (Consistent, the differences, what a server gets from its peers).
package consistency
