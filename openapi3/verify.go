package openapi3

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// ErrHashMismatch is the cause of the error for a JSON document whose
// SHA-512 is not the ?hash= of its URL: damaged on the way, or not what the
// server meant to send. Such a document is never used nor stored.
var ErrHashMismatch = errors.New("the document's SHA-512 is not the ?hash= of its URL")

// namedHash is the SHA-512 a ?hash= URL names, when the hash has the form
// kube-openapi's handler3 gives it (which every kube-apiserver, and the
// aggregated API servers built on k8s.io/apiserver, serve /openapi/v3
// with): the uppercase hexadecimal SHA-512 of the document's JSON bytes
// (the ETag is the same digest). A hash of another form, from a server that
// names documents its own way, cannot be checked: ok is false. The
// protobuf form of a document shares the JSON's URL and hash but not its
// bytes, so it cannot be checked this way either.
func namedHash(u *url.URL) (sum [sha512.Size]byte, ok bool) {
	want := u.Query().Get("hash")
	if len(want) != 2*sha512.Size {
		return sum, false
	}
	if _, err := hex.Decode(sum[:], []byte(want)); err != nil {
		return sum, false
	}
	return sum, true
}

// verifyHash checks a JSON document against the ?hash= of the URL it was
// served at; verified is false, and err nil, for a hash that cannot be
// checked (namedHash).
func (c *Client) verifyHash(u *url.URL, body []byte) (verified bool, err error) {
	want, ok := namedHash(u)
	if !ok {
		return false, nil
	}
	c.work.hashes.Add(1)
	if sha512.Sum512(body) != want {
		return false, fmt.Errorf("%w (%s)", ErrHashMismatch, u.Path)
	}
	return true, nil
}

// storeKey is how the disk cache names a request (diskcache.WithKey): a
// document at a ?hash= URL by its path (the server's path prefix, a fleet
// proxy's /k8s/clusters/<id>, included) and Accept, with the hash as the
// Version, so that the document's next hash replaces it in any process and
// a store holds one document per group-version, the live one. A JSON
// document whose hash can be checked is Content: checkBeforeStoring stores
// it only once its SHA-512 is the hash. Anything else is the default
// (diskcache.URLKey).
func storeKey(req *http.Request) diskcache.Key {
	accept := req.Header.Get("Accept")
	hash := req.URL.Query().Get("hash")
	if hash == "" || !strings.Contains(req.URL.Path, "/openapi/v3/") {
		return diskcache.URLKey(req.URL.String(), accept)
	}
	_, checkable := namedHash(req.URL)
	return diskcache.Key{Name: req.URL.Path + "\n" + accept, Version: hash, Content: checkable && accept == "application/json"}
}

// checkBeforeStoring is what the disk cache checks before it stores a
// response (diskcache.WithCheck). A response is stored only in a content
// type the request asked for (its Accept), and only one that can be
// checked: the root must be JSON and parse; a JSON document's SHA-512 must
// be its ?hash= when the hash can be checked, and it must parse when it
// cannot; a protobuf document (whose bytes no hash vouches for) must
// decode. Anything else (text/plain, HTML, octet-stream, JSON answered to
// a request for protobuf) is passed on to the caller, who refuses it, and
// not stored, so that it is asked for again next time rather than served
// from the disk for as long as the server's Expires says (a year for a
// ?hash= URL). What it learns (a hash verified, a protobuf document
// decoded) it leaves in the request's verdict, so that the caller does not
// hash or decode the same bytes again.
func (c *Client) checkBeforeStoring(resp *http.Response, body []byte) error {
	ct := resp.Header.Get("Content-Type")
	mt := mediaType(ct)
	if resp.Request == nil {
		if mt == "application/json" && !json.Valid(body) {
			return errors.New("a JSON body that does not parse")
		}
		return nil
	}
	u := resp.Request.URL
	if accept := resp.Request.Header.Get("Accept"); !asked(accept, mt) {
		return fmt.Errorf("%w: Content-Type %q, asked for %q", ErrContentType, ct, accept)
	}
	if strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/openapi/v3") {
		if mt != "application/json" {
			return fmt.Errorf("%w: Content-Type %q for the root", ErrContentType, ct)
		}
		_, err := parseRoot(body, c.opts.limits.Paths)
		return err
	}
	switch mt {
	case "application/json":
		verified, err := c.verifyHash(u, body)
		if err != nil {
			return err
		}
		if verified {
			noteVerdict(resp, func(v *verdict) { v.hashed = true })
			return nil
		}
		if !json.Valid(body) {
			return errors.New("a JSON body that does not parse")
		}
	case ProtobufType, ProtobufTypeDeprecated:
		doc, err := c.decodeGnostic(body) // within DocumentLimits
		if err != nil {
			return err
		}
		noteVerdict(resp, func(v *verdict) { v.gnostic = doc })
	default:
		return fmt.Errorf("%w: Content-Type %q: only JSON and protobuf documents, checked, are stored", ErrContentType, ct)
	}
	return nil
}

// asked says whether the media type mt is one that accept lists by name
// (a wildcard does not count: what is stored is what was asked for).
func asked(accept, mt string) bool {
	for a := range strings.SplitSeq(accept, ",") {
		if mediaType(a) == mt {
			return true
		}
	}
	return false
}

// verdict is what checkBeforeStoring learnt of a response on its way to
// the disk cache. The check runs as the caller reads the body's end, on
// the caller's goroutine (diskcache.WithCheck), and finds the verdict
// through the request's context: a value of one request, handed across the
// RoundTripper, as net/http/httptrace hands its hooks.
type verdict struct {
	resp    *http.Response // the response it is about
	hashed  bool           // its body's SHA-512 is the ?hash= of its URL
	gnostic *openapi_v3.Document
}

type verdictKey struct{}

// withVerdict returns ctx carrying an empty verdict for the requests made
// with it.
func withVerdict(ctx context.Context) (context.Context, *verdict) {
	v := &verdict{}
	return context.WithValue(ctx, verdictKey{}, v), v
}

// noteVerdict records in resp's request's verdict, if it has one, what the
// check learnt of resp.
func noteVerdict(resp *http.Response, note func(*verdict)) {
	v, ok := resp.Request.Context().Value(verdictKey{}).(*verdict)
	if !ok {
		return
	}
	if v.resp != resp {
		*v = verdict{resp: resp}
	}
	note(v)
}

// about returns the verdict if it is about resp (a retried or redirected
// request leaves one about another response), else an empty one.
func (v *verdict) about(resp *http.Response) verdict {
	if v == nil || v.resp != resp {
		return verdict{}
	}
	return *v
}

// verify checks a JSON document against the ?hash= it was served at,
// unless checkBeforeStoring did on its way to the disk cache (v). A
// document read from a store that others write is checked again: a
// fleet's content store (shared by every cluster), Redis (shared by
// hosts), any Store but a *diskcache.Cache; their checksums vouch for the
// bytes, not for who wrote them. A *diskcache.Cache's own entries are not
// hashed again (which cost a warm read of every document about as much
// again): only the user or root can write its directory (diskcache.Open
// refuses any other), and what this package stores there it checked
// first, as discovery trusts its own entries.
//
// verified says the body is the one its URL's ?hash= names.
func (c *Client) verify(resp *http.Response, body []byte, v verdict) (verified bool, err error) {
	if resp.Request == nil {
		return false, nil
	}
	if v.hashed {
		return true, nil
	}
	if c.ownDisk && resp.Header.Get(diskcache.FromCache) == "1" {
		_, checkable := namedHash(resp.Request.URL)
		return checkable, nil
	}
	return c.verifyHash(resp.Request.URL, body)
}

// dropCached removes the disk cache's entry that resp was served from,
// if it was: a caller that refuses it then asks the server, once, instead
// of being served it again until it expires.
func (c *Client) dropCached(resp *http.Response) bool {
	if c.opts.disk == nil || resp == nil || resp.Request == nil || resp.Header.Get(diskcache.FromCache) != "1" {
		return false
	}
	c.opts.disk.Delete(storeKey(resp.Request))
	return true
}
