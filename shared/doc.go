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
// controllerruntime.ClientOptions (client.New), controllerruntime.Shared
// (cluster.New, managers) and cliruntime.WithShared.
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
// restmapper.Mapper, one openapi3.Client and one HTTP client: after the
// first lookup they cost no request until the snapshot is older than its
// max age (discovery.WithMaxAge), and then two 304s in the background.
//
// Identities never share credentials, HTTP transports or connections:
// each has its own discovery client over its own HTTP client, built by
// client-go from its config. What they may share is content, and only
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
// # Lifetime
//
// A Handle holds its client; Release gives it back, and a handle that
// is never released is released when the garbage collector finds it
// unreachable (runtime.AddCleanup), so a controller-runtime client built
// per reconcile and dropped gives its reference back with it (its HTTP
// client, Handle.HTTPClient, keeps the handle reachable as long as the
// controller-runtime client is). A client no handle holds lingers for
// WithLinger (DefaultLinger, 5m) and is taken back by an Acquire within
// it; then it stops its watch and is forgotten, and the objects it handed
// out keep working on their own (unshared, not watched).
//
// Each client runs one discovery/watch (CRDs and APIServices, or the
// served discovery API), however many handles hold it, from its first
// Acquire until it is forgotten; WithoutWatch runs none. The events that
// make the watch revalidate discovery also mark the client's
// openapi3.Client (watch.WithOnChange, openapi3.Client.Changed), so that
// its next answer reads the OpenAPI root again (at most once a second):
// a CRD's new schema, which discovery does not show, reaches the typed
// converters and explain over the handle's OpenAPI client within about a
// second, as a new kind reaches the mapper.
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
// lifetime of clients. key.go: the key of a rest.Config.
package shared
