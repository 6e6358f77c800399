package diskcache

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
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
// the cache carry the header X-From-Cache: 1 (a server's own X-From-Cache
// is removed). A nil next means http.DefaultTransport.
//
// Nothing is stored that does not pass its checks: an empty 200, a JSON
// OpenAPI document at a ?hash= URL whose SHA-512 is not that hash
// (VerifyHash), other JSON that does not parse, a body over the limit
// (WithMaxBodyBytes), and whatever WithCheck refuses. Such a response is
// passed on to the caller as it came.
func NewTransport(next http.RoundTripper, c *Cache, opts ...TransportOption) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	t := &transport{next: next, cache: c, maxBody: min(DefaultMaxBodyBytes, c.opts.maxBytes)}
	for _, opt := range opts {
		opt(t)
	}
	return t
}

// DefaultMaxBodyBytes is the largest body the transport stores, unless
// WithMaxBodyBytes says otherwise.
const DefaultMaxBodyBytes = 128 << 20

// TransportOption configures NewTransport.
type TransportOption func(*transport)

// WithCheck sets a check that a response body must pass, besides the
// transport's own, before it is stored; resp's Request may be nil. Default:
// none.
func WithCheck(check func(resp *http.Response, body []byte) error) TransportOption {
	return func(t *transport) { t.check = check }
}

// WithMaxBodyBytes sets the largest body the transport buffers to store: a
// longer one is passed on without being kept in memory a second time.
// Default: DefaultMaxBodyBytes, or the cache's WithMaxBytes if smaller.
func WithMaxBodyBytes(n int64) TransportOption {
	return func(t *transport) {
		if n > 0 {
			t.maxBody = n
		}
	}
}

type transport struct {
	next    http.RoundTripper
	cache   *Cache
	check   func(*http.Response, []byte) error
	maxBody int64
}

// storable says whether a 200 response's body, requested at u, may be
// stored.
func (t *transport) storable(u *url.URL, resp *http.Response, body []byte) error {
	if len(body) == 0 {
		return errors.New("an empty body")
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		verified, err := VerifyHash(u, body)
		if err != nil {
			return err
		}
		if !verified && !json.Valid(body) {
			return errors.New("a JSON body that does not parse")
		}
	}
	if t.check != nil {
		return t.check(resp, body)
	}
	return nil
}

// refused logs a response that is not stored.
func (t *transport) refused(u *url.URL, err error) {
	t.cache.opts.logger.Debug("diskcache: response not stored", "url", u.Redacted(), "err", err)
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
	ht := &httpcache.Transport{Transport: storePolicy{t}, Cache: view, MarkCachedResponses: true}
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
		resp, err := readStored(b, req)
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
	resp.Header.Del(httpcache.XFromCache)
	if resp.Request == nil {
		resp.Request = req
	}
	if resp.StatusCode == http.StatusNotModified && cached != nil {
		resp.Body.Close()
		for _, h := range []string{"Cache-Control", "Expires", "Date"} {
			if v := resp.Header.Get(h); v != "" {
				cached.Header.Set(h, v)
			}
		}
		if freshUntil(cached.Header).After(now) {
			cached.Body = t.storing(req.URL, cached, key)
		}
		cached.Header.Set(httpcache.XFromCache, "1")
		return cached, nil
	}
	if resp.StatusCode == http.StatusOK && freshUntil(resp.Header).After(now) {
		resp.Body = t.storing(req.URL, resp, key)
	}
	return resp, nil
}

// readStored reads a stored response. Its body is the stored bytes
// themselves, not a copy (documents run to megabytes): it has a Bytes
// method, which the kubeatlas clients use to take them without copying.
func readStored(b []byte, req *http.Request) (*http.Response, error) {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), req)
	if err != nil {
		return nil, err
	}
	if n := resp.ContentLength; n >= 0 && n <= int64(len(b)) && resp.Header.Get("Content-Encoding") == "" {
		resp.Body.Close()
		resp.Body = &StoredBody{Reader: bytes.NewReader(b[int64(len(b))-n:]), b: b[int64(len(b))-n:]}
	}
	return resp, nil
}

// StoredBody is the body of a response served from the cache: a reader
// over the stored bytes, which Bytes returns without a copy (do not modify
// them).
type StoredBody struct {
	*bytes.Reader
	b []byte
}

// Bytes returns the whole body.
func (s *StoredBody) Bytes() []byte { return s.b }

// Close does nothing.
func (s *StoredBody) Close() error { return nil }

// storing wraps resp's body to store resp under key once it is read to
// its end, if it passes the checks (storable).
func (t *transport) storing(u *url.URL, resp *http.Response, key string) io.ReadCloser {
	sb := &storingBody{ReadCloser: resp.Body, resp: resp, limit: t.maxBody, store: func(head, body []byte) {
		if err := t.storable(u, resp, body); err != nil {
			t.refused(u, err)
			return
		}
		_ = t.cache.put(key, head, body) // a failure is counted and said by the cache
	}}
	if n := resp.ContentLength; n > 0 && n <= t.maxBody {
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
// read to the end, or longer than limit, is not stored (nor kept).
type storingBody struct {
	io.ReadCloser
	resp   *http.Response
	body   []byte
	limit  int64
	over   bool
	stored bool
	store  func(head, body []byte)
}

func (s *storingBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if !s.over {
		if int64(len(s.body)+n) > s.limit {
			s.over, s.body = true, nil
		} else {
			s.body = append(s.body, p[:n]...)
		}
	}
	if err == io.EOF && !s.stored && !s.over {
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
//
// A response that may be stored is read here first (it is small: the root,
// legacy discovery) and checked as the immutable path checks documents; one
// that fails is marked no-store, so httpcache neither stores it nor keeps an
// older entry: a server that sends an ETag with an empty body cannot make a
// broken root stick.
type storePolicy struct{ t *transport }

func (s storePolicy) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.t.next.RoundTrip(req)
	if err != nil || resp.StatusCode == http.StatusNotModified {
		return resp, err
	}
	resp.Header.Del(httpcache.XFromCache)
	if resp.Request == nil {
		resp.Request = req
	}
	cc := resp.Header.Get("Cache-Control")
	if resp.Header.Get("ETag") == "" && !strings.Contains(cc, "immutable") && !strings.Contains(cc, "max-age") && resp.Header.Get("Expires") == "" {
		resp.Header.Set("Cache-Control", "no-store")
		return resp, nil
	}
	if resp.StatusCode != http.StatusOK || req.Method != http.MethodGet {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.t.maxBody+1))
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	if int64(len(body)) > s.t.maxBody {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		resp.Header.Set("Cache-Control", "no-store")
		return resp, nil
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := s.t.storable(req.URL, resp, body); err != nil {
		s.t.refused(req.URL, err)
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
