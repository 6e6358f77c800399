// Package restmapper maps between kinds and resources (meta.RESTMapper)
// over kubeatlas discovery snapshots.
//
// Its answers are client-go's own: the same discovery REST mapper client-go
// builds (restmapper.NewDiscoveryRESTMapper), fed the same APIGroupResources,
// behind an index that expands short names exactly as client-go's
// ShortcutExpander does and a category index like its category expander. What
// differs is the cost. Common questions are answered from indexes of names
// and kinds built once per snapshot generation, the rest by client-go's
// mapper once per generation and input, then kept: a lookup takes a few
// hundred nanoseconds or less, the first one included, and allocates
// nothing, where client-go's deferred mapper scans every resource and its
// shortcut expander re-reads all of discovery on every call. A lookup that
// finds nothing refreshes discovery conditionally (two 304s when nothing
// changed), at most once a second for the whole mapper, so a kind that was
// just installed is found within a second and a kind that never existed
// costs almost nothing to ask for again. Installed, deleted, re-scoped and
// re-versioned CRDs show after the next refresh, without a new mapper.
//
// One deliberate difference: when two resources share a short name (the core
// group's and events.k8s.io's "ev"), client-go picks one in map order, so
// differently from run to run; kubeatlas picks the first in discovery order.
package restmapper
