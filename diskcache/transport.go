package diskcache

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// FromCache is the header a response served from the cache carries ("1"),
// as gregjones/httpcache marks its own; a server's own is removed, so that
// it cannot be forged.
const FromCache = "X-From-Cache"

// volatileParams are query parameters that do not change a response but
// would make every request a new cache key (client-go adds timeout=32s).
var volatileParams = []string{"timeout"}

// URLKey is the default key of a request (see WithKey): its URL without
// volatile parameters, then its Accept header, so that JSON and protobuf
// answers of one URL are stored apart, as the Name; no Version.
func URLKey(rawURL, accept string) Key {
	if u, err := url.Parse(rawURL); err == nil && u.RawQuery != "" {
		q := u.Query()
		for _, p := range volatileParams {
			q.Del(p)
		}
		u.RawQuery = q.Encode()
		rawURL = u.String()
	}
	return Key{Name: rawURL + "\n" + accept}
}

// NewTransport returns an HTTP cache over s, keyed by URLKey (URL without
// volatile parameters, and Accept) unless WithKey says otherwise. Every
// cached GET takes one path: a
// fresh entry (max-age after Date, or Expires: immutable OpenAPI documents
// a year out) is the answer, with no request; an entry with an ETag is
// revalidated with If-None-Match, and a 304 is answered from it (renewing
// its lifetime); a new 200 is stored as it is read, once read to its end.
// A response with neither an ETag nor a lifetime (the OpenAPI root of some
// servers, legacy discovery) is not stored: revalidating it by
// If-Modified-Since, whose resolution is a second, could hand back a stale
// root after a change within that second. Responses served from the cache
// carry FromCache: 1. A nil next means http.DefaultTransport.
//
// Nothing is stored that does not pass its checks: an empty 200, a body
// over the limit (WithMaxBodyBytes), and JSON that does not parse, or
// instead whatever WithCheck refuses (openapi3's check verifies a
// document's ?hash=); such a response is
// passed on to the caller as it came, and an older entry for its key is
// removed, so that a broken answer cannot leave a stale one to be
// revalidated. Requests other than GET, with a Range, or whose
// Cache-Control says no-store go past the cache; no-cache revalidates.
//
// A *Cache as s is read and written without copies (entries in the form
// gregjones/httpcache stores, so that either reads the other's); its clock
// decides freshness and its logger says what was not stored. Another Store
// gets the real clock and no logger.
func NewTransport(next http.RoundTripper, s Store, opts ...TransportOption) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	t := &transport{next: next, store: s, maxBody: DefaultMaxBodyBytes, clock: clock.RealClock{}, logger: slog.New(slog.DiscardHandler)}
	if c, ok := s.(*Cache); ok {
		t.cache = c
		t.maxBody = min(DefaultMaxBodyBytes, c.opts.maxBytes)
		t.clock, t.logger = c.opts.clock, c.opts.logger
	}
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

// WithCheck sets the check a response body must pass before it is stored,
// in place of the default's (a JSON body must parse); an empty body is
// never stored either way. resp's Request may be nil. The check runs once
// the caller has read the body to its end, on the caller's goroutine,
// before that last Read returns (or, for a caller that takes the body over
// through its Handover method, when it hands the body back), so a check
// may leave what it learnt (a verified digest, a decoded document) where
// the caller finds it, through the request's context. Default: JSON must
// parse.
func WithCheck(check func(resp *http.Response, body []byte) error) TransportOption {
	return func(t *transport) { t.check = check }
}

// WithKey sets how a request is named in the store: the caller's policy
// (openapi3 names a document at a ?hash= URL by its path and Accept, with
// the hash as the Version). The request is the caller's, before the
// transport adds a condition. Default: URLKey of its URL and Accept.
func WithKey(key func(req *http.Request) Key) TransportOption {
	return func(t *transport) { t.key = key }
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
	store   Store
	cache   *Cache // store, when it is one: its two-part put saves a copy
	check   func(*http.Response, []byte) error
	key     func(*http.Request) Key
	maxBody int64
	clock   clock.PassiveClock
	logger  *slog.Logger
}

// storable says whether a 200 response's body may be stored.
func (t *transport) storable(resp *http.Response, body []byte) error {
	if len(body) == 0 {
		return errors.New("an empty body")
	}
	if t.check != nil {
		return t.check(resp, body)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" && !json.Valid(body) {
		return errors.New("a JSON body that does not parse")
	}
	return nil
}

// refused logs a response that is not stored.
func (t *transport) refused(u *url.URL, err error) {
	t.logger.Debug("diskcache: response not stored", "url", u.Redacted(), "err", err)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	cc := strings.ToLower(req.Header.Get("Cache-Control"))
	if req.Method != http.MethodGet || req.Header.Get("Range") != "" || strings.Contains(cc, "no-store") {
		return t.next.RoundTrip(req)
	}
	var key Key
	if t.key != nil {
		key = t.key(req)
	} else {
		key = URLKey(req.URL.String(), req.Header.Get("Accept"))
	}
	now := t.clock.Now()
	var cached *http.Response
	if b, ok := t.store.Get(key); ok {
		resp, err := readStored(b, req)
		if err == nil && resp.StatusCode == http.StatusOK {
			if freshUntil(resp.Header).After(now) && !strings.Contains(cc, "no-cache") {
				resp.Header.Set(FromCache, "1")
				return resp, nil
			}
			// The caller's own condition, if it has one, is the caller's
			// to answer.
			if etag := resp.Header.Get("ETag"); etag != "" && req.Header.Get("If-None-Match") == "" {
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
	resp.Header.Del(FromCache)
	if resp.Request == nil {
		resp.Request = req
	}
	if resp.StatusCode == http.StatusNotModified && cached != nil {
		resp.Body.Close()
		renewed := false
		for _, h := range []string{"Cache-Control", "Expires", "Date"} {
			if v := resp.Header.Get(h); v != "" && v != cached.Header.Get(h) {
				cached.Header.Set(h, v)
				renewed = renewed || h != "Date"
			}
		}
		if renewed && freshUntil(cached.Header).After(now) {
			cached.Body = t.storing(req.URL, cached, key)
		}
		cached.Header.Set(FromCache, "1")
		return cached, nil
	}
	if resp.StatusCode == http.StatusOK && storedKind(resp.Header, now) {
		resp.Body = t.storing(req.URL, resp, key)
	}
	return resp, nil
}

// storedKind says whether a 200 may be stored: it may be revalidated
// exactly (an ETag) or has a lifetime, and nothing forbids it.
func storedKind(h http.Header, now time.Time) bool {
	cc := strings.ToLower(h.Get("Cache-Control"))
	if strings.Contains(cc, "no-store") || strings.Contains(cc, "private") {
		return false
	}
	return h.Get("ETag") != "" || freshUntil(h).After(now)
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
// its end, if it passes the checks (storable); a body over the limit
// removes the older entry instead.
func (t *transport) storing(u *url.URL, resp *http.Response, key Key) io.ReadCloser {
	sb := &storingBody{ReadCloser: resp.Body, resp: resp, limit: t.maxBody, store: func(head, body []byte) {
		if err := t.storable(resp, body); err != nil {
			t.refused(u, err)
			t.store.Delete(key)
			return
		}
		// A failure is the store's to count and say (a Cache logs the
		// first); the response goes on to the caller either way.
		if t.cache != nil {
			_ = t.cache.put(key, head, body)
		} else {
			_ = t.store.Put(key, append(head, body...))
		}
	}, dropped: func() { t.store.Delete(key) }}
	if n := resp.ContentLength; n > 0 && n <= t.maxBody {
		// Sized up front, but not beyond what a server may claim cheaply
		// (on the first Read: a caller that takes the body over needs none).
		sb.presize = min(n, maxPresize)
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
//
// A caller that reads the whole body into memory anyway (kubeatlas's
// clients, through Handover) keeps the only copy: the body then keeps
// none, and is handed the caller's bytes to store. Two copies of a
// document (and the regrowth of an appended buffer, outside the caller's
// size accounting) cost 4.5 times the size limit on one oversized OpenAPI
// document, and 1.1-1.3 GB for FetchAll's concurrent ones.
type storingBody struct {
	io.ReadCloser
	resp    *http.Response
	body    []byte
	n       int64 // bytes read
	presize int64 // the buffer's first size, from the Content-Length
	limit   int64
	over    bool
	eof     bool
	handed  bool // the caller keeps the body and hands it over (Handover)
	stored  bool
	store   func(head, body []byte)
	dropped func()
}

func (s *storingBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.n += int64(n)
	if !s.over {
		if s.n > s.limit {
			s.over, s.body = true, nil
			if s.dropped != nil {
				s.dropped()
			}
		} else if !s.handed {
			if s.body == nil && s.presize > 0 {
				s.body = make([]byte, 0, s.presize)
			}
			s.body = append(s.body, p[:n]...)
		}
	}
	if err == io.EOF {
		s.eof = true
		if !s.handed {
			s.storeBody(s.body)
		}
	}
	return n, err
}

// Handover is for a caller that reads the whole body into memory: called
// before the first Read, it makes the body keep no copy of what is read,
// and returns the function the caller then hands every byte it read to,
// once it has read to the end, for the checks (WithCheck, on the caller's
// goroutine) and the store. Bytes other than those read (a part, or a
// decompressed form) are not stored. The caller must not modify them
// afterwards: the store may keep them.
func (s *storingBody) Handover() func(body []byte) {
	if s.n == 0 {
		s.handed = true
	}
	return func(body []byte) {
		if s.handed && s.eof && int64(len(body)) == s.n {
			s.storeBody(body)
		}
	}
}

// storeBody stores the response with body, once, unless it is over the
// limit.
func (s *storingBody) storeBody(body []byte) {
	if s.stored || s.over {
		return
	}
	s.stored = true
	var head bytes.Buffer
	fmt.Fprintf(&head, "HTTP/1.1 %s\r\n", s.resp.Status)
	h := s.resp.Header.Clone()
	h.Del(FromCache)
	h.Set("Content-Length", fmt.Sprint(len(body)))
	h.Write(&head)
	head.WriteString("\r\n")
	s.store(head.Bytes(), body)
}
