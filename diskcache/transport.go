package diskcache

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gregjones/httpcache"
)

// volatileParams are query parameters that do not change a response but
// would make every request a new cache key (client-go adds timeout=32s).
var volatileParams = []string{"timeout"}

// Key is the cache key of a request: its URL without volatile parameters,
// then its Accept header, so that JSON and protobuf answers of one URL are
// stored apart.
func Key(rawURL, accept string) string {
	if u, err := url.Parse(rawURL); err == nil && u.RawQuery != "" {
		q := u.Query()
		for _, p := range volatileParams {
			q.Del(p)
		}
		u.RawQuery = q.Encode()
		rawURL = u.String()
	}
	return rawURL + "\n" + accept
}

// NewTransport returns an HTTP cache over c (gregjones/httpcache's RFC 7234
// logic), keyed by Key: immutable OpenAPI documents are served without a
// request, ETag'd responses are revalidated with If-None-Match, and
// Cache-Control: no-cache responses are not stored. Responses served from
// the cache carry the header X-From-Cache: 1. A nil next means
// http.DefaultTransport.
func NewTransport(next http.RoundTripper, c *Cache) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{next: next, cache: c}
}

type transport struct {
	next  http.RoundTripper
	cache *Cache
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return t.next.RoundTrip(req)
	}
	// httpcache keys entries by URL alone; this view adds the Accept header
	// and drops volatile parameters. A Transport is a small struct, so one
	// per request is cheap.
	view := keyedView{cache: t.cache, accept: req.Header.Get("Accept")}
	ht := &httpcache.Transport{Transport: storePolicy{t.next}, Cache: view, MarkCachedResponses: true}
	return ht.RoundTrip(req)
}

// storePolicy keeps out of the cache what cannot be revalidated exactly:
// a response with neither an ETag nor a freshness lifetime (the OpenAPI
// root, legacy discovery) would be revalidated with If-Modified-Since, whose
// one-second resolution hands back a stale root (and with it stale ?hash=
// URLs) after a change within the same second.
type storePolicy struct{ next http.RoundTripper }

func (s storePolicy) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusNotModified {
		return resp, err
	}
	cc := resp.Header.Get("Cache-Control")
	if resp.Header.Get("ETag") == "" && !strings.Contains(cc, "immutable") && !strings.Contains(cc, "max-age") && resp.Header.Get("Expires") == "" {
		resp.Header.Set("Cache-Control", "no-store")
	}
	return resp, nil
}

type keyedView struct {
	cache  *Cache
	accept string
}

func (v keyedView) key(k string) string {
	// httpcache prefixes non-GET keys with the method.
	if method, rest, ok := strings.Cut(k, " "); ok && !strings.Contains(method, "/") {
		return method + " " + Key(rest, v.accept)
	}
	return Key(k, v.accept)
}

func (v keyedView) Get(k string) ([]byte, bool) { return v.cache.Get(v.key(k)) }
func (v keyedView) Set(k string, b []byte)      { v.cache.Set(v.key(k), b) }
func (v keyedView) Delete(k string)             { v.cache.Delete(v.key(k)) }

var _ httpcache.Cache = (*Cache)(nil)
