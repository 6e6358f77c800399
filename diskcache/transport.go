package diskcache

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

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
	if req.Method == http.MethodGet && req.Header.Get("Range") == "" {
		key := Key(req.URL.String(), req.Header.Get("Accept"))
		if _, ok := openAPIIdentity(key); ok {
			return t.immutable(req, key)
		}
	}
	// httpcache keys entries by URL alone; this view adds the Accept header
	// and drops volatile parameters. A Transport is a small struct, so one
	// per request is cheap.
	view := keyedView{cache: t.cache, accept: req.Header.Get("Accept")}
	ht := &httpcache.Transport{Transport: storePolicy{t.next}, Cache: view, MarkCachedResponses: true}
	return ht.RoundTrip(req)
}

// immutable serves an OpenAPI document at a ?hash= URL, which never
// changes (KEP-2896: Cache-Control: public, immutable, Expires a year out),
// without httpcache: a fresh entry is the answer, with no request; a new
// response is stored as it is read, in the form httpcache stores (either
// path reads the other's entries). httpcache would buffer the body, then
// copy it twice more to dump the response: at 3000 CRDs that was a
// gigabyte of allocations to store 100 MB of documents. An entry that is
// no longer fresh is revalidated with its ETag; a 304 renews it.
func (t *transport) immutable(req *http.Request, key string) (*http.Response, error) {
	now := t.cache.opts.clock.Now()
	var cached *http.Response
	if b, ok := t.cache.Get(key); ok {
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), req)
		if err == nil && resp.StatusCode == http.StatusOK {
			if freshUntil(resp.Header).After(now) {
				resp.Header.Set(httpcache.XFromCache, "1")
				return resp, nil
			}
			if etag := resp.Header.Get("ETag"); etag != "" {
				cached = resp
				req = req.Clone(req.Context())
				req.Header.Set("If-None-Match", etag)
			}
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotModified && cached != nil {
		resp.Body.Close()
		for _, h := range []string{"Cache-Control", "Expires", "Date"} {
			if v := resp.Header.Get(h); v != "" {
				cached.Header.Set(h, v)
			}
		}
		if freshUntil(cached.Header).After(now) {
			cached.Body = t.storing(cached, key)
		}
		cached.Header.Set(httpcache.XFromCache, "1")
		return cached, nil
	}
	if resp.StatusCode == http.StatusOK && freshUntil(resp.Header).After(now) {
		resp.Body = t.storing(resp, key)
	}
	return resp, nil
}

// storing wraps resp's body to store resp under key once it is read.
func (t *transport) storing(resp *http.Response, key string) io.ReadCloser {
	sb := &storingBody{ReadCloser: resp.Body, resp: resp, store: func(head, body []byte) {
		if err := t.cache.put(key, head, body); err != nil {
			t.cache.opts.logger.Warn("diskcache: could not store entry", "key", key, "err", err)
		}
	}}
	if n := resp.ContentLength; n > 0 {
		// Sized up front, but not beyond what a server may claim cheaply.
		sb.body = make([]byte, 0, min(n, maxPresize))
	}
	return sb
}

// maxPresize bounds the buffer sized from a Content-Length.
const maxPresize = 32 << 20

// freshUntil is when a response stops being fresh: its max-age after its
// Date, or its Expires; the zero time when it may not be stored or reused
// without asking.
func freshUntil(h http.Header) time.Time {
	var maxAge string
	for d := range strings.SplitSeq(h.Get("Cache-Control"), ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "no-store" || d == "no-cache" || d == "private" {
			return time.Time{}
		}
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			maxAge = v
		}
	}
	if maxAge != "" {
		date, err := http.ParseTime(h.Get("Date"))
		if secs, perr := time.ParseDuration(maxAge + "s"); err == nil && perr == nil {
			return date.Add(secs)
		}
		return time.Time{}
	}
	// kube-apiserver writes Expires in time.RFC1123 with a "UTC" zone,
	// which http.ParseTime refuses.
	v := h.Get("Expires")
	expires, err := http.ParseTime(v)
	if err != nil {
		if expires, err = time.Parse(time.RFC1123, v); err != nil {
			return time.Time{}
		}
	}
	return expires
}

// storingBody keeps what the caller reads of a response and stores the
// whole response once the caller has read it to the end; a response not
// read to the end is not stored.
type storingBody struct {
	io.ReadCloser
	resp   *http.Response
	body   []byte
	stored bool
	store  func(head, body []byte)
}

func (s *storingBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.body = append(s.body, p[:n]...)
	if err == io.EOF && !s.stored {
		s.stored = true
		var head bytes.Buffer
		fmt.Fprintf(&head, "HTTP/1.1 %s\r\n", s.resp.Status)
		h := s.resp.Header.Clone()
		h.Del(httpcache.XFromCache)
		h.Set("Content-Length", fmt.Sprint(len(s.body)))
		h.Write(&head)
		head.WriteString("\r\n")
		s.store(head.Bytes(), s.body)
	}
	return n, err
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
