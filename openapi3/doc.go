// Package openapi3 reads a cluster's OpenAPI v3 (KEP-2896): the root once,
// then one document per group-version through the ?hash= URL the root
// gives, so that with WithDiskCache an unchanged document costs no request.
// A stale hash's 301 is followed a few times, to the same host only.
//
// Documents load lazily (Document) or all at once, a bounded number at a
// time (FetchAll); Aggregate merges them into one valid document; Kind and
// Schema.Field find a kind's schema and the schema at a field path
// (deployment.spec.template.spec.containers), through $refs and the allOf
// wrappers Kubernetes puts around them. ClientGo adapts a Client to
// client-go's openapi.Client, for openapi3.NewRoot and kubectl-style code.
package openapi3
