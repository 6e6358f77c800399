// Package shared gives a process "the" discovery client, REST mapper and
// OpenAPI v3 client for a rest.Config: code that builds a client per
// reconcile, per tenant or per request asks the registry instead of
// building discovery each time, and pays for discovery once per server
// and identity.
//
//	h, err := shared.Default().Acquire(cfg)
//	if err != nil { ... }
//	defer h.Release()
//	m := h.Mapper() // a meta.RESTMapper; h.Discovery(), h.OpenAPI(), h.HTTPClient()
//
// The frameworks' one-line forms are in the integrations module:
// controllerruntime.ClientOptions (client.New), controllerruntime.ClusterOption
// (cluster.New) and controllerruntime.ManagerOptions (managers), which are
// controllerruntime.Sharing{}'s for shared.Default(), and cliruntime.WithShared.
//
// # The key
//
// Two configs share one client when every field of rest.Config that
// changes what the HTTP client sends, or where, is the same in both. The
// same server is the same URL (scheme, host and path prefix, as
// rest.DefaultServerUrlFor makes it) and the same TLS trust (the CA's
// bytes, CAData or CAFile's contents; Insecure; ServerName; NextProtos).
// The same identity is the same bearer token and token file (by path:
// client-go rereads it), username and password, client certificate and
// key (data, or files by path: a rotated file is the same identity), CA
// file (by path as well: client-go rereads it, so a CA file is not the
// same client as its bytes given as CAData), exec plugin (every field of
// its ExecConfig, as client-go's own cache of exec authenticators keys:
// command, arguments, environment, API version, cluster info and
// extension, interactive mode, standard input, and its PluginPolicy, which
// decides whether it runs at all), auth provider (name and config) and
// impersonation (user, UID, groups, extras); the HTTP client's settings
// (user agent, timeout, compression) are part of it, since the HTTP
// client is handed to its users. A Transport or an AuthConfigPersister
// that is a pointer is keyed by that pointer.
//
// A config with what cannot be compared gets a client of its own that
// nothing shares: a Dial or WrapTransport function, a Proxy function
// other than http.ProxyFromEnvironment (rest's default: a function may
// pick a proxy by anything in a request, its path included, so the one it
// picks for the server's URL says nothing of another request's, and
// client-go's transport cache does not share it either), a Transport or
// persister that is not a pointer, an exec extension that does not
// encode, and any field of rest.Config (or of its TLS, exec, auth
// provider and impersonation structs) that the key does not list, such
// as one a later client-go adds: the key fails closed. QPS, Burst,
// RateLimiter, the warning handlers, APIPath and the content settings
// are not part of the key: they are a RESTClient's, and change nothing
// the HTTP client sends (the shared discovery client's Config and
// Connection are a copy of the first config's, with its values of
// these). key.go lists every field and what the key does
// with it, and a test walks rest.Config by reflection so that a field
// client-go adds fails it until it is listed. Keys are SHA-256 sums: the
// registry's maps hold no credential.
//
// # What is shared, and what never is
//
// One server and identity have one discovery.Client, one
// restmapper.Mapper, one openapi3.Client (built at the first
// Handle.OpenAPI: most identities never ask) and one HTTP client: after the
// first lookup they cost no request until the server changes (see "One
// watch per server"), or the snapshot is older than its max age
// (discovery.WithMaxAge) at a lookup, and then two 304s in the
// background.
//
// Identities never share credentials: each has its own discovery client
// over its own HTTP client, built from its config, and each request
// carries that identity's credentials. Below them, client-go's transport
// cache gives configs with the same TLS settings (CA, client
// certificate, proxy, dialer) one http.Transport, and so one pool of
// connections, as in any client-go program: identities that differ only
// in a bearer token or impersonation send their requests, each with its
// own credentials, over connections they may share; the server
// authenticates each request. The HTTP client is client-go's
// (rest.HTTPClientFor), except for an identity whose only credentials
// are a bearer token and impersonation: its transport is then one object
// of its own that sets the headers client-go's user agent, bearer token
// and impersonating round trippers would (a test holds it to theirs),
// over the http.Transport client-go builds for its config without them,
// the same one. This package adds no sharing of its own below the HTTP
// client. What identities may share is content, and only
// content each one proves it sees: the clients of one server are given
// one discovery.Surfaces table, one restmapper.Indexes and one
// openapi3.Documents (as a fleet's clusters are), so a second identity's
// cold start sends its own conditional requests for /api and /apis, with
// the ETags of the surface the table holds; when both are answered 304 it
// takes the decoded snapshot (and so the mapper index, shared by
// generation), and when either is answered 200 (an aggregated API server
// that shows it another view) it decodes its own, which the table then
// holds beside the first. OpenAPI documents are shared by ?hash=, each
// fetched and verified once. Nothing is assumed from another identity's
// answer. Because the table checks each document against its ETag, the
// clients read discovery as JSON (discovery.WithSurfaces).
//
// The tables also hold once what the clients of a server have alike,
// which each would otherwise hold a copy of: their options, their base
// URL, and the rest.Config but for its bearer token and impersonation,
// which each client keeps of its own (see discovery.Surfaces); never a
// token, password, key, auth provider or exec plugin. An identity's
// config that differs in anything else is kept whole. A thousand
// identities of a server hold about 0.9 KiB each, 1.0 with impersonation
// (docs/frameworks.md).
//
// # Lifetime
//
// A Handle holds its client; Release gives it back, and a handle that
// is never released is released when the garbage collector finds it
// unreachable (runtime.AddCleanup), so a controller-runtime client built
// per reconcile and dropped gives its reference back with it (its HTTP
// client, Handle.HTTPClient, keeps the handle reachable as long as the
// controller-runtime client is). A client no handle holds lingers for
// WithLinger (DefaultLinger, 5m) and is taken back by an Acquire within
// it; then it leaves the server's watch (which ends with the server's
// last client) and is forgotten, and the objects it handed out keep
// working on their own (unshared, not watched).
//
// # One watch per server
//
// The clients of one server run one discovery/watch between them (CRDs
// and APIServices, or the served discovery API), however many identities
// and handles hold them, from the first Acquire until the last is
// forgotten; WithoutWatch runs none. It runs with the credentials of one
// of them that may watch (the first; when it is refused, a 403, the next
// that comes, or another held one), and of no other: when that client is
// forgotten, another runs it anew, with its own credentials. Every other
// client follows it (discovery.Client.FollowLeader): it counts as
// followed while the watch is synced and its snapshot holds what the
// watched client's does, content it proved with its own requests. A
// change the watch sees refreshes the watched client, and its new
// content makes every other client's view stale at once, without a
// request; each proves its view again with its own conditional requests
// at its next lookup that needs it (a miss, or a lookup without a
// version: restmapper's freshness), two requests (a 304 and the new
// document) when the watch has seen the change. A client that is not
// looked at sends nothing, however long it is held, and no goroutine
// runs for it. With no client whose credentials may watch, one of them
// polls for the server (watch.WithFallbackPoll), and a newcomer is tried
// in its place; the others are then not followed, and revalidate at
// lookups as without a watch. Handle.Watcher is the watch only for the
// handle whose identity runs it.
//
// The watch also marks every client's openapi3.Client, once built
// (watch.WithOnChange, openapi3.Client.Changed), at each change it sees,
// so that each reads its OpenAPI root again at its next call that needs
// it (at most once a second), with its own credentials: a CRD's new
// schema, which discovery does not show, reaches the typed converters
// and explain over a handle's OpenAPI client within about a second, as a
// new kind reaches the mapper. A client whose OpenAPI client is not used
// sends nothing.
//
// # Why a process-wide registry
//
// Default is package state, which kubeatlas otherwise avoids: sharing
// across code that does not know of each other (a controller's
// reconcilers, libraries that each build a client) is the point, so there
// must be one place they all find. New makes a registry of one's own
// (tests, or different options).
//
// It is a package of its own, over the public API of discovery,
// restmapper, openapi3 and discovery/watch (with their tables for
// sharing), so that a program that imports only discovery links none of
// it.
//
// # Files
//
// registry.go: [Registry], [New], [Default], its options, [Handle] and the
// lifetime of clients. leader.go: the server's one watch, who runs it and
// who follows it. key.go: the key of a rest.Config.
package shared
