// Package openapi3 reads a cluster's OpenAPI v3 (KEP-2896): the root once,
// then one document per group-version through the ?hash= URL the root
// gives, so that with [WithDiskCache] an unchanged document costs no
// request.
//
// # Fetching
//
// A stale hash's 301 is followed a few times, to the same host only; the
// bytes it leads to, another hash's (behind a balancer, the other server's
// older document), answer for the URL asked for a second at most. A JSON
// document's SHA-512 must be its ?hash= when the hash has kube-openapi's
// form, the uppercase hex SHA-512 of the JSON ([ErrHashMismatch]
// otherwise), and nothing that fails to parse is stored. With
// [WithDiskCache], the client gives the store its policy: a document at a
// ?hash= URL is named by its path and Accept with the hash as its Version
// (one document per group-version is kept, the live one), and is checked
// on its way in, where it is hashed (or, in protobuf, decoded) once for
// both the store and the caller. A 429 or 5xx with Retry-After is retried
// ([WithMaxRetries]) within the caller's deadline, and a 429 whose wait
// was not made is the answer of the client's every request, none sent,
// until its Retry-After has passed. An error status is an
// apimachinery *StatusError (apierrors.IsNotFound, IsTooManyRequests and
// SuggestsClientDelay work), as discovery's and client-go's are; requests
// go through the same helper as discovery's (internal/httpx), so a base
// URL's path prefix is kept and a listed URL never leads to another host.
// A root older than the max
// age ([WithMaxAge], 30s) is answered from and read again in the background;
// a group-version or kind the client has not seen, or a field a kind's
// schema lacks ([Client.Kind] with a field path), reads it again at once
// (at most once a second, however many callers miss), so a long-lived
// client follows CRDs without a restart.
//
// # Documents and schemas
//
// Documents load lazily ([Client.Document]) or all at once, a bounded number
// at a time ([Client.FetchAll]). A document is indexed, not parsed, when it
// arrives: each components/schemas entry is parsed into spec.Schema the
// first time it is asked for ([Document.Schema], [Client.Kind],
// [Schema.Field]), and the whole document into spec3 only by
// [Document.OpenAPI]. Kind and Field find a kind's schema and the schema at
// a field path (deployment.spec.template.spec.containers), through $refs,
// the allOf wrappers Kubernetes puts around them, array items and map
// values, as kubectl explain walks a path. [Client.Gnostic] reads the
// protobuf form, decoded with gnostic-models. [Aggregate] merges documents
// into one valid document. The package openapi3/clientgo adapts a [Client]
// to client-go's openapi.Client, for client-go's openapi3.NewRoot and
// kubectl-style code.
//
// # Files
//
//   - client.go: [Client], its options, the root, fetching documents.
//   - verify.go: the ?hash= check; how the disk cache names documents and
//     what it may store.
//   - document.go: [Document]: schemas by name and by kind, parsed on use.
//   - index.go: the JSON scanner that indexes a document's schemas without
//     parsing it (hand-written for speed; fuzzed against encoding/json).
//   - protobuf.go: the protobuf form's bounds, checked on the wire before it
//     is decoded ([Client.Gnostic], [Client.Raw]).
//   - lookup.go: [Client.Kind], [Schema], field paths.
//   - aggregate.go: [Aggregate].
//   - limits.go: [DocumentLimits] ([WithDocumentLimits]), the errors of a
//     document that could not be had, and how its failure is remembered.
//   - documents.go: [Documents], the table of parsed documents that clients
//     of a fleet share, keyed by the hash their bytes were verified against.
//   - offline.go: [WithStaleRootOnError]: the last root kept in the disk
//     cache, answered from while the server is unavailable (or does not
//     answer within [WithRootTimeout]).
package openapi3
