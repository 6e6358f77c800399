// Package watch keeps a discovery.Client current in near real time: [Run]
// watches what changes discovery (CustomResourceDefinitions as metadata
// only, and APIServices) and revalidates the client when an event can
// change it, until the server shows the change, so a new CRD reaches the
// client's subscribers about as soon as the server serves it; an idle
// cluster costs two 304s a minute (the slow poll that catches API server
// upgrades). Where watching is forbidden it falls back to
// discovery.Client.Poll. Whatever the server does, its cost is bounded:
// failed lists and watches (410 Gone on every request included) back off
// exponentially with jitter, refreshes that events ask for are rate
// limited (a flood of MODIFIED events costs about one a second), and the
// expectations it keeps are capped. Where the cluster serves kubeatlas's
// discovery API (discovery.kubeatlas.io apigroups, apiserver/ in this
// repository), Run watches that one resource instead.
//
//	c, err := discovery.New(cfg)
//	go watch.Run(ctx, c) // until ctx ends
//
// A [Watcher] (New) is the same with its counters readable ([Watcher.Stats]).
// [WithOnChange] tells what lies beside discovery of the same events
// (openapi3.Client.Changed: a CRD's new schema, which discovery does not
// show).
//
// It is a package of its own, over the client's public API alone (its
// Connection, Snapshot, Current, Refresh, Poll and Follow), so that a
// program that imports only discovery does not link client-go's
// informers and its dynamic and metadata clients.
//
// # Files
//
//   - bound.go: what each informer may hold (10,000 objects, 32 MiB), each
//     object slimmed as its list or watch event arrives.
//   - follow.go: when Run follows the client (discovery.Client.Follow):
//     its watches open and synced, its last refresh successful, no
//     CRD's change overdue.
//   - watch.go: [Run], [Watcher] and their options, its [Stats], the informers on CRDs and
//     APIServices (their lists and watches paced by a backoff), and the
//     loop that turns their events into rate-limited refreshes; or the
//     informer on the served discovery API, where the cluster serves it.
package watch
