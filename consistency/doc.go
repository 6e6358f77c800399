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
// the resources whose storage versions differ, how many of the servers it
// saw ([Certainty]), and its [Verdict].
//
// # What a verdict claims
//
// [Report.Verdict] is [Consistent] only when every live server the
// cluster names was seen (asked at its address, or told apart through the
// URL) and they agree; [Inconsistent] when servers were seen to differ,
// however few were seen; [Unknown] otherwise. A server running
// peer-aggregated discovery (KEP-4020) shows skew by itself: its merged
// /apis serves what a peer serves, and where that is more than its own
// view (profile=nopeer), a peer serves what it does not
// ([Server].FromPeers), seen in that server's own answers (through the
// URL alone with [WithURLOnly]: no request to any other address). So a check that reaches one server of an upgraded pair, as one
// pointed at a server's own address with nobody to vouch for the other's
// (see below), says Inconsistent. Where a server's merged view is its
// own, no peer serves what it does not; its peers may serve less, so that
// alone leaves the verdict Unknown.
//
// # Where credentials go
//
// Check asks each API server at the address the cluster names for it (its
// identity lease's peer-advertise-address, or an address of the kubernetes
// EndpointSlice), which anyone who may write Leases in kube-system or
// EndpointSlices in default can choose. So a direct request is the
// client's own request to its own URL (Host header, TLS server name,
// credentials, an exec plugin's cluster info alike); only its TCP
// connection is dialed to the named address, through the rest.Config's
// Dial if it has one. What is verified: the server's certificate, against
// the kubeconfig's CA, for the kubeconfig's name (its tls-server-name, or
// its server's host, an IP address or not) during the TLS handshake,
// before a token or a client certificate is sent. A certificate the
// cluster's CA signed for the named address (a kubelet's serving
// certificate) does not pass; a server of the cluster whose certificate
// does not name the kubeconfig's host is not asked directly.
//
// That check cannot tell an API server from another service of the same
// host whose certificate the cluster's CA signed for the same name (a
// kubelet's serving certificate for the node IP the kubeconfig names, on
// another port). So the client's credentials go only to the addresses the
// kubernetes EndpointSlices in default list, which only API servers write
// (their endpoint reconciler; the edit and admin roles cannot since
// Kubernetes 1.22): a server at another address a lease names is asked
// without any (rest.AnonymousClientConfig: no token, client certificate,
// plugin, WrapTransport or impersonation), and [Server].Vouched says which
// were asked with them. A user who may not read the EndpointSlices sends
// credentials to no address but the client's URL. What is trusted: the
// kubeconfig's CA and name, as for every request through the URL; the
// API server's list of its own endpoints; a WrapTransport to send through
// the transport it wraps.
//
// What a tenant who may write Leases in kube-system can still make the
// check do: open a TCP connection and a TLS handshake to any address, and,
// where the certificate there is valid for the kubeconfig's name, send it
// requests without credentials (/version, /api, /apis) and report its
// answers as an unvouched server's view (a server that disagrees, or one
// more server to see, lowering the Certainty and leaving the verdict
// Unknown); copy a real server's
// address, so that neither is asked there ([ErrAddressShared]); and add
// leases that cost the check up to its 10 s deadline. It cannot make the
// check send the user's credentials anywhere the cluster does not list as
// an API server.
//
// Nothing is sent with credentials where nothing is verified: over plain
// http, or with TLS verification off, a client that carries credentials
// (a token or token file, basic auth, a client certificate, an exec or
// auth-provider plugin, a WrapTransport or Transport) asks nobody
// directly, and neither does one with a Transport of its own or a proxy
// for its URL; [Report].NotAskedDirectly says why ([ErrNotAskedDirectly]),
// and the servers are sampled through the URL. A client without
// credentials over plain http still asks directly: nothing can be stolen,
// and its URL is no better verified. [WithURLOnly] sends nothing
// anywhere but the client's URL.
//
// Two live leases naming one address are not two servers: neither is
// asked there ([ErrAddressShared]). The servers are asked at once (8 at a
// time) under one 10 s deadline, so leases naming hosts that never answer
// cost 10 s, however many. Servers that could not be asked and were not
// told apart through the URL leave the check at
// [EveryAnsweringServerSeen] when every sample through the URL reached the
// kinds of server that were asked, and [NotEveryServerSeen] otherwise;
// either way the verdict is Unknown unless what was seen differs, so a
// tenant's leases can hold a verdict at Unknown, never make it
// Consistent.
//
// # Files
//
//   - check.go: [Check], its options, and how it decides whom to ask and
//     how sure it is.
//   - cluster.go: what the cluster tells about its API servers: identity
//     leases, the EndpointSlice, StorageVersions.
//   - ask.go: asking the servers directly (where credentials go is decided
//     in directConfig and directClient), all at once, or through the URL
//     on new connections (sampling).
//   - report.go: the [Report] and what it derives from the servers' views
//     (the Verdict, the differences, what a server gets from its peers).
package consistency
