// Package discovery tells a Kubernetes client what APIs a cluster serves,
// in the fewest requests and bytes, and keeps that knowledge current for
// almost nothing.
//
// # Reading
//
// A [Client] reads /api and /apis in parallel with one Accept header that
// lists aggregated discovery (KEP-3352) in protobuf v2, JSON v2 and JSON
// v2beta1, then plain JSON, so every server answers with the best format it
// has: two requests on any server since 1.26, one request per
// group-version (a bounded number at a time) on older ones. The answer is
// an immutable [Snapshot]: groups in server order, versions with their
// freshness, resources with kind, scope, verbs, short names, categories and
// subresources (the model is package
// [github.com/kubeatlas/kubeatlas/discovery/surface], with the decoders of
// every form of discovery document).
//
// # Freshness
//
// [Client.Refresh] revalidates with If-None-Match: an unchanged cluster costs two
// 304 responses and no decoding. It returns discovery as of its call:
// callers that arrive while a refresh runs share the one after it.
// Refreshes run one at a time and publish in order, so generations only
// grow. Snapshot never waits for a refresh once there is a snapshot read
// from the server, and revalidates in the background when it is older
// than the max age ([WithMaxAge]). A snapshot read from the disk cache ([WithDiskCache]) past
// the max age is revalidated once before it is answered from; when that
// fails, it is answered from with the failure in [Snapshot.RefreshError].
// One read from a store others may write (Redis, any but a
// *diskcache.Cache) is answered only once the server has confirmed it
// (304s to the client's own requests conditional on its ETags): until
// then the client is cold.
//
// Requests answered 429 or 5xx with Retry-After are sent again after the
// wait asked for ([WithMaxRetries]), within the caller's deadline; a 429
// whose wait was not made is the answer of the client's every request,
// none sent, until its Retry-After has passed; redirects
// are followed only on the server's own host, so credentials stay there.
//
// # Failures
//
// Partial failure is explicit. A group-version whose aggregated API server
// is down (Stale) or whose legacy document failed stays in the snapshot,
// marked, with its last known resources when there were any; the snapshot's
// error is a [*PartialError] that unwraps to one [*GroupVersionError] each.
// HTTP errors are apimachinery StatusErrors, so apierrors.IsNotFound and
// friends work.
//
// # Changes
//
// Change notifications deliver what watchable discovery was proposed for,
// on the client: [Client.Subscribe] receives a [Change] ([Diff] of two
// snapshots) when a refresh brings new content, after it is published, on
// a goroutine of the subscriber's own, from which it may call back into
// the client (and a mapper over it). [Client.Poll] revalidates every
// interval. The package discovery/watch keeps the snapshot current in near
// real time: it watches what changes discovery (CRDs as metadata only, and
// APIServices) and revalidates when an event can change it, until the
// server shows the change, so a new CRD reaches subscribers about as soon
// as the server serves it; an idle cluster costs two 304s a minute (the
// slow poll that catches API server upgrades). Where watching is forbidden
// it falls back to Poll. It is a package of its own, so that this one does
// not link client-go's informers; it reaches the client through its public
// API alone, and counts what it does in its own Stats.
// A client whose requests reach API servers that disagree (mid-upgrade)
// serves the union of their views ([Snapshot.Mixed], [Snapshot.Partial])
// rather than flapping between them. Whether they disagree, and how (what
// coordinated discovery was proposed for), the package
// [github.com/kubeatlas/kubeatlas/consistency] tells: it asks each server
// on its own, through [Client.Config] and [NewSnapshot].
//
// # client-go
//
// The package discovery/clientgo adapts a Client to client-go's
// DiscoveryInterface, CachedDiscoveryInterface and
// AggregatedDiscoveryInterface, for code that takes those (restmapper,
// dynamic informers, controller-runtime); it is a package of its own so
// that this one does not link client-go's discovery and the built-in API
// types behind it.
//
// # Files
//
//   - client.go: [Client], its constructors and options.
//   - refresh.go: Snapshot, Refresh, Subscribe, Follow and FollowLeader, and the refresh machine
//     behind them: runs one at a time, the one publisher of snapshots,
//     who waits for which run, the delivery of changes to each subscriber.
//   - fetch.go: one refresh's requests (the one HTTP path, through
//     internal/httpx), content negotiation, the legacy fallback; the
//     documents, decoded by package discovery/surface, joined into a
//     snapshot's content (newContent).
//   - snapshot.go: [Snapshot], and what it holds of /api's and /apis's
//     documents (part).
//   - change.go: [Change], [Diff]; Poll.
//   - mixed.go: views of servers that disagree behind one URL, joined (the
//     union), and the client its resamples send through on new connections.
//   - surfaces.go: [Surfaces], the table through which clients (a
//     fleet's) share decoded discovery and a cold start is offered a
//     surface to confirm: data, which a refresh reads without waiting.
//   - persist.go: warm starts from the disk cache, last known resources;
//     with WithSurfaces, checked documents persisted once under their ETag.
//   - errors.go: typed errors.
//   - stats.go: counters ([Stats]).
//   - elsewhere.go: for packages that read API servers the client does not
//     (consistency): Client.Config, and NewSnapshot of documents they read.
package discovery
