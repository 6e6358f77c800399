package discovery

import (
	"context"
	"strings"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// Shared is the hook through which the clients of a fleet share decoded
// discovery (WithShared): package fleet implements it; discovery only
// calls it, and checks what it is handed.
//
// What is shared is a snapshot's content: the groups and resources its
// /api and /apis documents hold, named by the documents' ETags, which
// kube-apiserver computes as the SHA-512 of each. Only content whose
// ContentKey is ok is ever handed to Shared or taken from it: complete
// content whose documents the client checked against their ETags. A
// snapshot with a Stale or failed group-version may carry resources its
// own cluster last knew, which are not the documents' to give another; a
// cluster must not hand the others documents of its own making under
// another surface's ETag. A protobuf document is not checked: its ETag is
// the SHA-512 of the list's JSON too (kube-apiserver computes it once, of
// json.Marshal of the list, whatever the Accept), so a check would hash
// what the generated decoder reads while the snapshot holds what
// package surface's protobuf decoder reads, and any difference between the
// two would be trusted.
// Clients that share should read JSON (WithJSONOnly).
//
// The methods are called on refresh goroutines, concurrently, and must
// not call back into the client that calls them (its Snapshot or Refresh
// would wait for the refresh that is calling).
type Shared interface {
	// Guess is called once per cold start (a read with no snapshot
	// before it) of c: the snapshot whose documents the requests are
	// conditional on, or nil. Two 304s adopt its content, without a body;
	// a wrong guess costs what no guess costs. done, when not nil, is
	// called once the cold start ends, with the snapshot read (nil when
	// none was). An error (ctx's) ends the cold start.
	Guess(ctx context.Context, c *Client) (guess *Snapshot, done func(read *Snapshot), err error)
	// Intern returns the snapshot held for s's content (the same
	// ContentKey), or holds s and returns it. The client keeps the
	// content of what is returned; s has no times of its own, and lives
	// as long as some client's snapshot holds its content, so a Shared
	// that holds it weakly forgets it when no client holds it.
	Intern(s *Snapshot) *Snapshot
	// Lookup returns the held snapshot of a ContentKey, or nil: a warm
	// start whose persisted ETags name it decodes nothing.
	Lookup(key string) *Snapshot
}

// WithShared shares decoded discovery with the other clients of s (see
// Shared): clusters that serve the same documents hold one copy of them,
// and a cold start may offer the server one it holds. With a disk cache,
// each checked document is persisted as an entry of its own, named by
// its ETag (the canonical encoding that was checked, not the server's
// bytes: see surface.VerifyAggregated), which a store may keep once for many clusters (as fleet's
// does); such an entry is loaded only once the ETag is recomputed from
// its body (another process, or an older build, may have written it),
// and one that is not the ETag's is dropped. Default: none; every client
// holds its own.
func WithShared(s Shared) Option {
	return func(o *options) error { o.shared = s; return nil }
}

// ContentKey names the snapshot's content for sharing: the ETags of its
// /api and /apis documents and the form each came in. ok is false when
// the content must not be shared: a failed or Stale group-version, a
// document not checked against its ETag (protobuf, legacy discovery,
// WithShared unset), or a view of servers that disagree.
func (s *Snapshot) ContentKey() (key string, ok bool) {
	return contentKeyOf(s.core.etag, s.named.etag, s.core.source, s.named.source),
		s.err == nil && s.core.verified && s.named.verified && s.partsOf == nil
}

func contentKeyOf(api, apis string, core, named surface.Source) string {
	return strings.Join([]string{api, apis, core.String(), named.String()}, "\n")
}

// persistedKey is the ContentKey of the documents a persisted entry names.
func persistedKey(h persisted) (string, bool) {
	var src [2]surface.Source
	for i, sp := range h.Parts {
		var err error
		if src[i], err = surface.SourceOf(sp.ContentType); err != nil {
			return "", false
		}
	}
	return contentKeyOf(h.Parts[0].ETag, h.Parts[1].ETag, src[0], src[1]), true
}

// shareable is the snapshot of c that Shared is handed: one per content,
// which lives exactly as long as c does (each points to the other).
func (c *content) shareable() *Snapshot {
	if s := c.self.Load(); s != nil {
		return s
	}
	c.self.CompareAndSwap(nil, &Snapshot{content: c})
	return c.self.Load()
}

// shareableKey is s's ContentKey when ok, else "".
func shareableKey(s *Snapshot) string {
	if s == nil {
		return ""
	}
	k, ok := s.ContentKey()
	if !ok {
		return ""
	}
	return k
}

// intern hands c to the Shared hook and keeps what it returns when that
// is the same content; anything else stays the client's own.
func (c *Client) intern(ct *content) *content {
	if c.opts.shared == nil {
		return ct
	}
	s := ct.shareable()
	k := shareableKey(s)
	if k == "" {
		return ct
	}
	if held := c.opts.shared.Intern(s); held != nil && held.content != ct && shareableKey(held) == k {
		return held.content
	}
	return ct
}

// guess asks the Shared hook what a cold start offers (see Shared.Guess).
// A guess whose content could not be shared is not offered.
func (c *Client) guess(ctx context.Context) (*content, func(*Snapshot), error) {
	if c.opts.shared == nil {
		return nil, nil, nil
	}
	g, done, err := c.opts.shared.Guess(ctx, c)
	if err != nil {
		if done != nil {
			done(nil)
		}
		return nil, nil, err
	}
	if shareableKey(g) == "" {
		return nil, done, nil
	}
	return g.content, done, nil
}
