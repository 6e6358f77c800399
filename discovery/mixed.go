package discovery

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// The API servers of an HA cluster behind a load balancer disagree while
// the cluster is upgraded (or when peer-aggregated discovery is off, or
// one server's aggregated API server is down). A client whose requests
// reach one server, then the other, would otherwise see resources added
// and removed on every other refresh, and tell its subscribers so.
//
// So a refresh whose discovery differs from the one before asks again, at
// once, on a new connection (conditional on what it just read: two 304s
// when a server confirms it). One server confirming a change is a change,
// and so is a third answer (A, then B, then C: one server moving on, as
// when CRDs install one after another). The view before coming back (A,
// then B, then A) means the servers disagree: the client then serves
// the union of the views it has seen lately (each view is kept until it
// has not been seen for mixedWindow refreshes or for mixedAge, whichever
// comes first, and looked for once more with a new connection before it
// leaves), marks what only some of them serve (Snapshot.Partial), and
// tells subscribers only when that union changes. A real change still
// shows: a resource new on one server is added at once (partial, until
// every view has it); one removed from every server goes at the first
// refresh a second after the last read that showed it.

// union is what a client keeps for servers that disagree behind its URL:
// the views it saw (none while they agree) and the client its resamples
// send through on new connections, built on first use. Only observe
// touches it, and the refresh machine runs one observe at a time (each
// run starts after the one before has returned), so it needs no lock.
type union struct {
	c       *Client      // whose reads and config (for a transport of the resamples' own) these are
	history *viewHistory // nil while the servers agree
	fresh   *resampling  // nil before the first resample
}

// resampling is the client a client's resamples send through.
type resampling struct {
	http *httpx.Client
	own  bool // http has a transport of its own (whose idle connections it may close)
}

// mixedWindow is how many refreshes a view of a disagreeing server stays
// in the union after it was last seen, and mixedAge how long: the first
// of the two it reaches ends it (after the resample that looks for it once
// more). The age matters to a client that refreshes seldom (package
// shared's identities prove their views only at a miss or when their
// leader's content lacks what they answer with): counted in refreshes
// alone, a view that no server served any more stayed in its union for
// minutes, and a resource removed from both servers was mapped (a 404 at
// every request) for as long. Servers that go on disagreeing keep their
// views: the resample before a view leaves finds the other server.
const (
	mixedWindow = 8
	mixedAge    = time.Second
)

// viewHistory is what a client whose servers disagree keeps: the views it
// saw lately and their union. A client whose servers agree has none (it
// costs a pointer), which is every client most of the time.
type viewHistory struct {
	seq   uint64 // refreshes observed since the servers were seen to disagree
	views []seenView
	union *content // the union served, reused while its views are the same
	of    []*content
}

type seenView struct {
	c    *content
	last uint64    // the refresh that last saw it (viewHistory.seq)
	at   time.Time // and when, on the client's clock (its read's validation)
}

func viewKey(c *content) [2]string { return [2]string{c.core.etag, c.named.etag} }

// see records a view seen at now and returns the one it holds for its
// key.
func (h *viewHistory) see(c *content, now time.Time) *content {
	k := viewKey(c)
	for i := range h.views {
		if viewKey(h.views[i].c) == k {
			h.views[i].last, h.views[i].at = h.seq, now
			return h.views[i].c
		}
	}
	h.views = append(h.views, seenView{c: c, last: h.seq, at: now})
	return c
}

// gone says whether v, not the view just read (latest), has not been seen
// for mixedWindow refreshes or for mixedAge at now.
func (h *viewHistory) gone(v seenView, latest *content, now time.Time) bool {
	return v.c != latest && (h.seq-v.last >= mixedWindow || now.Sub(v.at) >= mixedAge)
}

// observe takes a refresh's snapshot s (prev is the client's snapshot
// before it: a first read, which has nothing to differ from, is not
// observed) and returns what the client serves: s, or the union of the
// views of disagreeing servers. Refreshes run one at a time, and so does
// observe.
func (u *union) observe(ctx context.Context, prev, s *Snapshot) *Snapshot {
	// Two 304s on a union answer for the view whose ETags it carries.
	view := s.etagView()
	k := viewKey(view)
	h := u.history
	now := s.validated
	if k[0] == "" || k[1] == "" {
		// Legacy discovery has no ETags to tell views apart.
		u.history = nil
		return s
	}
	if h == nil {
		if viewKey(prev.etagView()) == k {
			return s
		}
		// A change, or another server: ask again on new connections.
		other := u.resample(ctx, view, prev)
		if other == nil {
			return s // a change, confirmed
		}
		if viewKey(other) != viewKey(prev.etagView()) {
			// A third view (A, then B, then C): one server moving on
			// (CRDs installing one after another), not servers that
			// disagree, which show the old view again (A, B, A). The
			// newest is served; a disagreement shows itself on a later
			// refresh.
			return &Snapshot{content: other, validated: s.validated, fetched: s.fetched}
		}
		h = &viewHistory{}
		h.see(prev.etagView(), prev.validated)
		h.see(other, now)
		view = h.see(view, now)
		u.history = h
	}
	h.seq++
	view = h.see(view, now)
	expiring := slices.ContainsFunc(h.views, func(v seenView) bool { return h.gone(v, view, now) })
	if expiring {
		// A view about to leave the union is looked for once more: a
		// balancer's turns can keep a client's requests off one server for
		// a while (each refresh sends two requests at once), and a server
		// that still disagrees must not flap out and in.
		if other := u.resample(ctx, view, prev); other != nil {
			h.see(other, now)
		}
	}
	// Views not seen for mixedWindow refreshes or for mixedAge leave; the
	// latest stays.
	h.views = slices.DeleteFunc(h.views, func(v seenView) bool { return h.gone(v, view, now) })
	if len(h.views) < 2 {
		u.history = nil
		if s.content != view {
			return &Snapshot{content: view, validated: s.validated, fetched: s.fetched}
		}
		return s
	}
	// The union is of the views in the order first seen, whichever came
	// last: a resource two servers serve with different details (verbs,
	// short names) is the first view's, so that it does not change with
	// each answer.
	of := make([]*content, 0, len(h.views))
	for _, v := range h.views {
		of = append(of, v.c)
	}
	if h.union == nil || !sameViews(h.of, of) {
		h.union, h.of = unionContent(of, h.union), of
	}
	return &Snapshot{content: h.union, validated: s.validated, fetched: s.fetched}
}

// resample asks for /apis (twice if the first is a 304), then /api, each
// on a new connection and conditional on view's ETags, and returns what a server answered when it
// is not view (nil when it is, or on an error: a failed resample proves
// nothing). One after the other, not both at once: a balancer that sends
// each request to the next server would otherwise send them to the
// servers the refresh's two requests went to. A part the server sent
// anew keeps what prev (the client's own snapshot before the refresh)
// last knew of a group-version now Stale or failed, as the refresh's own
// read does: served as the third view of a server moving on, it would
// otherwise drop an aggregated API's kinds for as long as it is away.
func (u *union) resample(ctx context.Context, view *content, prev *Snapshot) *content {
	u.c.reader().stats.resamples.Add(1)
	on := u.newConnections()
	var named *part
	for range 2 {
		// Twice: the refresh sent two requests, so a balancer that sends
		// each request to the next of two servers may send the first to
		// the server that just answered /apis, never the second.
		var err error
		if named, err = u.c.reader().fetchPart(ctx, on, "/apis", &view.named); err != nil {
			return nil
		}
		if named != &view.named {
			break
		}
	}
	core, err := u.c.reader().fetchPart(ctx, on, "/api", &view.core)
	if err != nil || named == &view.named && core == &view.core {
		return nil
	}
	if core != &view.core {
		keepLastKnown(core, prev)
	}
	if named != &view.named {
		keepLastKnown(named, prev)
	}
	return newContent(*core, *named)
}

// sameViews reports whether a and b hold the same views.
func sameViews(a, b []*content) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

// etagView is the view whose parts (ETags) a union carries, so that a 304
// on the union is that view's; or the content itself.
func (c *content) etagView() *content {
	if c.partsOf != nil {
		return c.partsOf
	}
	return c
}

// unionContent joins views: groups, versions and resources in the first
// view's order, then those only later ones have; a resource several
// describe differently is as the union before (if any) described it, when
// one of them still does, else as the first describes it. What not every view serves is partial. The union's
// parts (its ETags, which the next refresh sends) are the first view's:
// whichever is sent, one of the disagreeing servers answers with its
// documents.
func unionContent(views []*content, before *content) *content {
	first := views[0]
	u := &content{core: first.core, named: first.named, err: first.err, generation: generations.Add(1), partsOf: first, of: views}
	u.core.raw, u.named.raw = nil, nil
	u.partialVersions = map[schema.GroupVersion]bool{}
	u.partialResources = map[schema.GroupVersionResource]bool{}
	versions := map[schema.GroupVersion]int{}          // views that serve it
	resources := map[schema.GroupVersionResource]int{} // views that serve it
	groupAt := map[string]int{}
	for _, v := range views {
		for gi := range v.groups {
			g := &v.groups[gi]
			i, ok := groupAt[g.Name]
			if !ok {
				i = len(u.groups)
				groupAt[g.Name] = i
				u.groups = append(u.groups, surface.Group{Name: g.Name})
			}
			ug := &u.groups[i]
			for vi := range g.Versions {
				ver := &g.Versions[vi]
				gv := schema.GroupVersion{Group: g.Name, Version: ver.Version}
				versions[gv]++
				j := slices.IndexFunc(ug.Versions, func(x surface.Version) bool { return x.Version == ver.Version })
				if j < 0 {
					j = len(ug.Versions)
					ug.Versions = append(ug.Versions, surface.Version{Version: ver.Version, Freshness: ver.Freshness, LastKnown: ver.LastKnown})
				}
				uv := &ug.Versions[j]
				for ri := range ver.Resources {
					r := &ver.Resources[ri]
					resources[gv.WithResource(r.Name)]++
					i := slices.IndexFunc(uv.Resources, func(x surface.Resource) bool { return x.Name == r.Name })
					switch {
					case i < 0:
						uv.Resources = append(uv.Resources, *r)
					case before != nil && !reflect.DeepEqual(uv.Resources[i], *r):
						// Servers describe it differently (verbs, short
						// names): the description the union served before
						// stays while a server still gives it.
						if old, ok := before.resource(gv, r.Name); ok && reflect.DeepEqual(*old, *r) {
							uv.Resources[i] = *r
						}
					}
				}
			}
		}
	}
	for gv, n := range versions {
		if n < len(views) {
			u.partialVersions[gv] = true
		}
	}
	for gvr, n := range resources {
		if n < len(views) {
			u.partialResources[gvr] = true
		}
	}
	return u
}

// Mixed reports whether the snapshot joins the views of API servers that
// disagree on what they serve, seen through one URL (a load balancer in
// front of an HA cluster that is being upgraded, say): see Partial.
// (Servers whose documents differ only in order are joined too, so that
// the snapshot does not change with every other refresh, but are not
// Mixed.)
func (s *Snapshot) Mixed() bool { return len(s.partialVersions)+len(s.partialResources) > 0 }

// Partial lists, for a Mixed snapshot, the group-versions and resources
// that only some of the cluster's API servers serve, sorted; a request for
// them may fail on the others. Both are nil otherwise.
func (s *Snapshot) Partial() (versions []schema.GroupVersion, resources []schema.GroupVersionResource) {
	for gv := range s.partialVersions {
		versions = append(versions, gv)
	}
	for gvr := range s.partialResources {
		resources = append(resources, gvr)
	}
	slices.SortFunc(versions, func(a, b schema.GroupVersion) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Version, b.Version))
	})
	slices.SortFunc(resources, func(a, b schema.GroupVersionResource) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Version, b.Version), strings.Compare(a.Resource, b.Resource))
	})
	return versions, resources
}

// newConnections is the client a resample sends through, each request on
// a connection of its own (so that a load balancer may pick another
// server): each asks for its connection to be closed after it
// (req.Close). With a rest.Config (New), its transport is also its own (a
// config with a Dial is never shared by client-go's transport cache), and
// its idle connections are closed first, so that the first request does
// not reuse one. Without one (NewForHTTPClient), the transport is the
// caller's, whose idle connections are not the client's to close. Built on
// first use: a client whose servers agree never needs it.
func (u *union) newConnections() *httpx.Client {
	if u.fresh == nil {
		u.fresh = &resampling{}
		u.fresh.http, u.fresh.own = u.newConnectionsClient()
	}
	if u.fresh.own {
		utilnet.CloseIdleConnectionsFor(u.fresh.http.HC.Transport)
	}
	return u.fresh.http
}

func (u *union) newConnectionsClient() (fresh *httpx.Client, own bool) {
	f := u.c.reader().http.Clone()
	if cfg := u.c.config.copy(); cfg != nil {
		cfg.Dial = (&net.Dialer{}).DialContext
		hc, err := rest.HTTPClientFor(cfg)
		if err == nil {
			f.HC = httpx.WithRedirectPolicy(&http.Client{Transport: httpx.Closing{Next: httpx.Counting{Next: hc.Transport, N: &u.c.reader().stats.requests}}, Timeout: hc.Timeout}, httpx.DefaultMaxRedirects)
			return f, true
		}
		u.c.reader().opts.logger.Debug("discovery: no transport of its own for new connections", "err", err)
	}
	hc := *u.c.reader().http.HC
	hc.Transport = httpx.Closing{Next: hc.Transport}
	f.HC = &hc
	return f, false
}

// resource finds a resource of a group-version in c.
func (c *content) resource(gv schema.GroupVersion, name string) (*surface.Resource, bool) {
	v, ok := (&Snapshot{content: c}).Version(gv)
	if !ok {
		return nil, false
	}
	i := slices.IndexFunc(v.Resources, func(r surface.Resource) bool { return r.Name == name })
	if i < 0 {
		return nil, false
	}
	return &v.Resources[i], true
}
