// Package surface describes a cluster's API surface as discovery documents
// tell it: its groups, their versions (each with its freshness) and their
// resources (kind, scope, verbs, short names, categories, subresources), and
// decodes those documents, in every form a server sends them.
//
// A discovery.Snapshot holds a surface, as []Group, and finds its parts
// (Snapshot.Group, Snapshot.Version); this package is the model and its
// decoders, without I/O, so that code that reads discovery documents
// elsewhere (from a file, another server, a store) decodes them as the
// client does:
//
//   - [DecodeAggregated]: aggregated discovery (KEP-3352), apidiscovery.k8s.io
//     v2 or v2beta1, JSON or protobuf; with an ETag, whether the document is
//     the one it names.
//   - [DecodeLegacyGroups] and [DecodeLegacyVersion]: legacy discovery, the
//     root document and one document per group-version, JSON or protobuf.
//
// The model keeps what client-go's types need to be reproduced exactly
// (discovery/metaview does): the preferred version legacy discovery named
// ([Group.LegacyPreferred]), the type a legacy document carried
// ([Version.LegacyType]), whether a kind's group and version were given
// ([Resource.ExplicitKind]).
//
// # Files
//
//   - surface.go: the model ([Group], [Version], [Resource], [Subresource],
//     [Freshness], [Source]).
//   - decode.go: the decoders; JSON through k8s.io/api's types.
//   - protobuf.go: aggregated discovery in protobuf, decoded straight into
//     the model (hand-written for speed and size; fuzzed against the
//     generated decoder and protowire).
package surface
