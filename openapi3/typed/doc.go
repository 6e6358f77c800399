// Package typed builds the structured-merge-diff types that server-side
// apply tooling needs from an [openapi3.Client]'s documents, and adapts
// them to what users hold today: managedfields.TypeConverter
// ([Converter.ObjectToTyped], [Converter.TypedToObject]), client-go's
// applyconfigurations/meta/v1.UnstructuredExtractor ([Extractor]), and the
// strategic-merge-patch metadata kubectl's client-side apply reads from
// OpenAPI v3 ([Converter.PatchMeta]).
//
// # One group-version at a time
//
// client-go's openapi.NewTypeConverter downloads and parses every
// group-version's document before it answers for one kind, and its
// NewUnstructuredExtractor parses the whole OpenAPI v2 document, again
// every minute. A [Converter] finds a kind's group-version from its
// apiVersion ("v1" is the core group's "api/v1", "apps/v1" is
// "apis/apps/v1"), reads that one document ([openapi3.Client.Document]),
// and builds the kind's type with managedfields' own code path
// (schemaconv.ToSchemaFromOpenAPI, a typed.Parser) the first time the kind
// is asked for, on the schemas of that document the kind reaches: a type
// names only those. A group-version's v3 document is self-contained: the
// io.k8s.apimachinery definitions every kind refers to (ObjectMeta, ...)
// are among its own components/schemas, so no other document is read.
//
// # Shared definitions converted once
//
// Every document repeats those io.k8s.apimachinery definitions byte for
// byte. Each schema is parsed and converted once per content (its name,
// the SHA-256 of its bytes and the preserve-unknown-fields flag), and
// shared by every document of the process that holds the same bytes: a
// definition one document changes is converted for that document alone.
// The shared conversions are held weakly, by the types that use them: they
// go when the last document using them does.
//
// # Kept by hash, shared by a fleet
//
// The types hang off the document ([openapi3.Document.Derived]), which the
// client keeps while the root gives its group-version the same ?hash=: a
// new hash is a new document, whose types are built anew, and only that
// group-version's. Clients given one [openapi3.Documents] table (a fleet's
// clusters: fleet gives its clusters its table) share documents of the
// same content, and with them the types built: a second cluster serving a
// document builds nothing. With [openapi3.WithDiskCache], a process that
// starts warm reads the root (one request, which carries the hashes; the
// server sends it uncacheable) and no unchanged document.
//
// # As fresh as the mapper
//
// The document a Converter uses is the one the client's root names now.
// Where a watch runs beside the client (package shared wires
// discovery/watch.WithOnChange to [openapi3.Client.Changed]), a CRD's new
// schema, a new group-version and a removed one reach the converter's next
// call within about a second. Without one, a kind the held document lacks,
// an object its type refuses (a field it does not declare: a CRD upgraded
// since), and a field a strategic merge patch looks up in PatchMeta's
// answer that its schema lacks, make the client read the root again, at
// most once a second however many callers miss, and the object is
// converted (or extracted from, or the field looked up) again with the
// new document's types when its hash changed.
//
// # Why a package of its own
//
// Building types links structured-merge-diff, schemaconv, managedfields and
// client-go's applyconfigurations: programs that read documents or explain
// fields with openapi3 alone do not pay for them.
//
// # Files
//
//   - converter.go: [Converter], [New], indexing a document's kinds and
//     building a kind's type.
//   - pieces.go: the schemas converted once per content.
//   - extract.go: [Extractor].
//   - patchmeta.go: [Converter.PatchMeta].
//   - options.go: [WithPreserveUnknownFields], [WithTimeout].
package typed
