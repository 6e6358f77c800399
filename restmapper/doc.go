// Package restmapper maps between kinds and resources: [Mapper] is a
// meta.ResettableRESTMapper and a client-go CategoryExpander over a
// [discovery.Client]'s snapshots, with short names expanded as client-go's
// ShortcutExpander expands them.
//
// # Answers
//
// Its answers are client-go's own: the same discovery REST mapper client-go
// builds (restmapper.NewDiscoveryRESTMapper), fed the same APIGroupResources,
// behind an index that expands short names exactly as client-go's
// ShortcutExpander does and a category index like its category expander.
//
// One deliberate difference: when two resources share a short name (the core
// group's and events.k8s.io's "ev"), client-go picks one in map order, so
// differently from run to run; kubeatlas picks the first in discovery order.
//
// # Cost
//
// Common questions are answered from the snapshot's resources (the first
// few distinct questions of a generation by a scan, tens of microseconds
// at 5,000 resources; after them from indexes of names and kinds, built
// once per generation), the rest by client-go's mapper once per generation
// and input, then kept: a lookup asked before takes a few hundred
// nanoseconds or less and allocates nothing, where client-go's deferred
// mapper scans every resource and its shortcut expander re-reads all of
// discovery on every call.
//
// # Freshness
//
// A lookup that finds nothing refreshes discovery conditionally (two 304s
// when nothing changed): at once the first time a question misses, so a kind
// whose CRD was just served is found at its first lookup whatever missed
// before, and then after a backoff that grows from 50 ms to
// [WithMissRefreshInterval] (a second), within budgets that keep a loop over
// kinds that never exist to about one refresh a second. While the client is
// followed ([discovery.Client.Following]: discovery/watch refreshes it on
// every change it sees), a question that missed before does not refresh
// again: such a loop costs its first refresh. Installed, deleted,
// re-scoped and re-versioned CRDs show after the next refresh, without a
// new mapper; discovery/watch makes that refresh happen as soon as the
// server serves the change.
//
// A lookup without a version (RESTMapping(gk), RESTMappings(gk),
// KindsFor or ResourcesFor of a group and resource, KindFor of a short
// name) finds an answer whichever versions the group has, so no miss
// tells the mapper that a version was added or removed
// (controller-runtime's mapper kept such a group's versions for ever:
// kubernetes-sigs/controller-runtime#3542). Such a lookup is answered from
// discovery validated within the last interval ([WithMissRefreshInterval],
// a second): the first one after that revalidates discovery before it
// answers (two 304s when nothing changed; like a miss, it waits at most
// for a refresh under way and the one after it), while lookups meanwhile
// answer from the snapshot at hand without waiting for it. So a version added to
// or removed from a group more than an interval ago is in every
// versionless answer, in the order client-go's deferred mapper gives
// after a Reset (the preferred version first). These refreshes spend the
// budget of repeated misses: all lookups together, of any kind, cost the
// server about one refresh an interval, and only while versionless
// lookups are made; a dead server gets one try an interval. Lookups that
// name a version do not revalidate for this: their answer changes only
// when that version is removed.
//
// While the client is followed ([discovery.Client.Following]:
// discovery/watch whose watches are open and synced, as the
// controller-runtime Provider runs one), versionless lookups send nothing,
// however long they go on: the watch refreshes the client on every change
// it sees, so a version added or removed is in their answers as soon as
// the watch's refresh is (its debounce and one refresh after the event,
// tens of milliseconds), and a change no object shows (an API server
// upgrade) at the watch's upgrade poll. When it stops following (its
// connection lost, backing off, its context ended), the interval counts
// from the last validation again, as if it had never followed: on an idle
// cluster the first versionless lookup after that revalidates at once.
//
// # Files
//
//   - mapper.go: [Mapper], its options and methods.
//   - misses.go: which lookups that find nothing refresh discovery.
//   - fresh.go: when lookups without a version revalidate discovery (not
//     while it is followed).
//   - state.go: what one snapshot generation derives (indexes built on first
//     use, client-go's mapper for the rest) and how a question is answered.
//   - native.go: the name and kind indexes that answer common questions.
//   - shortnames.go: short-name expansion, as client-go's ShortcutExpander.
//   - memo.go: the questions and answers, and the memo of client-go's answers.
//   - discoverymapper.go: client-go's NewDiscoveryRESTMapper, copied so that
//     the package does not link client-go's discovery and scheme (pinned to
//     the original by TestDiscoveryMapperIsClientGos).
//   - indexes.go: [Indexes], the table that mappers of a fleet share
//     indexes through, by snapshot generation.
package restmapper
