package discovery

import (
	"net/url"
	"reflect"
	"sync"
	"weak"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/weakmap"
)

// Surfaces is a table of decoded discovery that the clients given it
// (WithSurfaces) share, as openapi3.Documents is for OpenAPI documents:
// clients whose servers serve the same /api and /apis documents hold one
// copy of their groups and resources, however many clients there are; and
// a client that starts with nothing asks its server to confirm a surface
// the table holds, with conditional requests, instead of having it sent
// again: two 304s and no body. A wrong guess costs what no guess costs (the
// server sends the documents), never a wrong snapshot.
//
// A surface is named by its documents' ETags, which kube-apiserver
// computes as the SHA-512 of each, and enters the table only once the
// client has checked the documents against them: complete (a Stale or
// failed group-version may carry resources its own cluster last knew,
// which are not the documents' to give another), of one server's view, and
// read as JSON. A protobuf document cannot be checked (its ETag is of the
// list's JSON, whatever the Accept), so clients that share should read
// JSON (WithJSONOnly). A surface no client holds any more is forgotten.
//
// The table also holds once what its clients have alike, which each would
// otherwise hold a copy of (package shared's thousand identities of one
// server): the options and base URL of the first client given it, pointed
// at by every later client whose options and URL are equal, and the rest.
// Config of the first client built from one that carries no credential but
// a bearer token and impersonation, without those two: a later client
// whose config is that one but for its own token and impersonation holds
// only those, and Config and Connection put them back on a copy. No
// client's secret is in the table (no token, password, key, auth provider
// or exec plugin; paths client-go reads, a token file's, may be), and a
// client whose config or options differ in anything else holds its own.
//
// The table is data: it does no I/O and never waits, so a client's refresh
// does no work for another client (package fleet works out its guesses on
// its own goroutines and hands them over with Offer). It is safe for
// concurrent use.
type Surfaces struct {
	held weakmap.Map[surfaceKey, content]

	mu     sync.Mutex
	offers map[*Client]*content  // what Offer gave a client's next refresh
	last   weak.Pointer[content] // the surface a client read or confirmed last
	config *rest.Config          // what clients' configs share (tableConfig), once one was given
	opts   *options              // what clients' options share (sharedOptions), once one was given
	base   *url.URL              // what clients' base URLs share (sharedBase), once one was given
}

// surfaceKey names a surface: its documents' ETags, and the form of each.
type surfaceKey struct {
	api, apis   string
	core, named surface.Source
}

// NewSurfaces returns an empty table.
func NewSurfaces() *Surfaces { return &Surfaces{} }

// WithSurfaces shares decoded discovery with the other clients given t
// (see Surfaces). With a disk cache, each checked document is also
// persisted as an entry of its own, named by its ETag (a diskcache.Key
// with Content set), which a store shared by many clients may keep once
// (as package fleet's does); such an entry is loaded only once the ETag is
// recomputed from its body (another process may have written it), and one
// that is not the ETag's is dropped. The client reads JSON, the form
// that can be checked (as WithJSONOnly). Default: none; every client holds
// its own.
func WithSurfaces(t *Surfaces) Option {
	return named("WithSurfaces", func(o *options) error { o.surfaces = t; return nil })
}

// sharedOptions is o, or the options of the table's first client when
// they are equal (sameValue: by value, objects by identity): the clients
// of a table, package shared's identities of a server, are mostly given
// the same options, and each holds a pointer instead of its own copy (96
// bytes). With no table, o.
func (t *Surfaces) sharedOptions(o *options) *options {
	if t == nil {
		return o
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.opts == nil {
		t.opts = o
	}
	if sameValue(reflect.ValueOf(*t.opts), reflect.ValueOf(*o)) {
		return t.opts
	}
	return o
}

// sharedBase is b, or the equal base URL of the table's first client (a
// url.URL is 144 bytes). With no table, b. Neither is changed once a
// client holds it.
func (t *Surfaces) sharedBase(b *url.URL) *url.URL {
	if t == nil {
		return b
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.base == nil {
		t.base = b
	}
	if *t.base == *b {
		return t.base
	}
	return b
}

// Len is how many surfaces the table holds now.
func (t *Surfaces) Len() int { return t.held.Len() }

// Offer makes s the surface that c's next refresh, if it is a cold start
// (c has no snapshot), asks its server to confirm, in place of the one a
// client read or confirmed last (the default guess). It reports whether s was offered:
// a snapshot that may not be shared is not, and a nil s withdraws an offer.
// Any refresh of c takes the offer. A fleet offers what it knows of c's
// server (a cluster said to be like it, or one whose server answered
// alike), having found it out on its own goroutine.
func (t *Surfaces) Offer(c *Client, s *Snapshot) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.offers, c)
	if s == nil {
		return false
	}
	if _, ok := s.content.key(); !ok {
		return false
	}
	if t.offers == nil {
		t.offers = map[*Client]*content{}
	}
	t.offers[c] = s.content
	return true
}

// guess is the content a cold start of c is conditional on: what was
// offered to c, or the surface a client read or confirmed last; nil for
// none.
func (t *Surfaces) guess(c *Client) *content {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ct := t.offers[c]; ct != nil {
		delete(t.offers, c)
		return ct
	}
	return t.last.Value()
}

// forgetOffer drops an offer c has not taken (c has a snapshot).
func (t *Surfaces) forgetOffer(c *Client) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.offers, c)
}

// intern returns the held content of ct's surface, or holds ct and returns
// it; content that may not be shared is returned as it is.
func (t *Surfaces) intern(ct *content) *content {
	k, ok := ct.key()
	if !ok {
		return ct
	}
	return t.used(t.held.Put(k, ct))
}

// lookup returns the held content of a surface, or nil.
func (t *Surfaces) lookup(k surfaceKey) *content {
	if ct := t.held.Get(k); ct != nil {
		return t.used(ct)
	}
	return nil
}

// used makes ct, which a client read or confirmed, the default guess.
func (t *Surfaces) used(ct *content) *content {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = weak.Make(ct)
	return ct
}

// key names c's surface; ok is false when it must not be shared: a failed
// or Stale group-version, a document not checked against its ETag
// (protobuf, legacy discovery, no Surfaces), or a view of servers that
// disagree.
func (c *content) key() (k surfaceKey, ok bool) {
	return surfaceKey{api: c.core.etag, apis: c.named.etag, core: c.core.source, named: c.named.source},
		c.err == nil && c.core.verified && c.named.verified && c.partsOf == nil
}
