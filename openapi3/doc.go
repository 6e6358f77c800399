// Package openapi3 reads a cluster's OpenAPI v3 (KEP-2896): the root once,
// then one document per group-version through the ?hash= URL the root
// gives, so that with WithDiskCache an unchanged document costs no request.
// A stale hash's 301 is followed a few times, to the same host only. A JSON
// document's SHA-512 must be its ?hash= (ErrHashMismatch otherwise; see
// diskcache.VerifyHash for when a hash can be checked), and nothing that
// fails to parse is stored. A 429 or 5xx with Retry-After is retried
// (WithMaxRetries) within the caller's deadline. A root
// older than the max age (WithMaxAge, 30s) is answered from and read again
// in the background; a group-version or kind the client has not seen reads
// it again at once (at most once a second), so a long-lived client follows
// CRDs without a restart.
//
// Documents load lazily (Document) or all at once, a bounded number at a
// time (FetchAll). A document is indexed, not parsed, when it arrives: each
// components/schemas entry is parsed into spec.Schema the first time it is
// asked for (Document.Schema, Kind, Schema.Field), and the whole document
// into spec3 only by Document.OpenAPI. Kind and Schema.Field find a kind's
// schema and the schema at a field path (deployment.spec.template.spec.
// containers), through $refs and the allOf wrappers Kubernetes puts around
// them. Gnostic reads the protobuf form, decoded with gnostic-models.
// Aggregate merges documents into one valid document. ClientGo adapts a
// Client to client-go's openapi.Client, for openapi3.NewRoot and
// kubectl-style code.
package openapi3
