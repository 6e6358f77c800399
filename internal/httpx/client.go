package httpx

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"
)

// UserAgent is the User-Agent of clients built from a rest.Config that
// names none.
const UserAgent = "kubeatlas"

// FromConfig is what a client built from a rest.Config sends through: a
// copy of cfg (User-Agent defaulted to UserAgent), the HTTP client
// client-go builds for it (auth, TLS, exec plugins, proxies, its User-Agent
// added where a request has none) and the server's base URL.
func FromConfig(cfg *rest.Config) (*rest.Config, *http.Client, *url.URL, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = UserAgent
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, hc, base, nil
}

// ParseBase checks a base URL given as a string: absolute, with a scheme
// and a host. A path is a prefix every request keeps (a proxy's
// /k8s/clusters/<id>).
func ParseBase(raw string) (*url.URL, error) {
	base, err := url.Parse(raw)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("base URL %q must be absolute (%v)", raw, err)
	}
	return base, nil
}

// Client sends GETs to one API server: every request of discovery and
// openapi3 goes through Get, so that the URL, headers, retries, size limit
// and the errors of a failed request are decided here once.
type Client struct {
	// HC sends the requests; NewClient gives it the redirect policy.
	HC *http.Client
	// Base is scheme://host[/prefix], without a trailing slash.
	Base *url.URL
	// MaxRetries bounds the retries of a 429 or 5xx with Retry-After (Do).
	// An int32 beside the two flags, so that a Client is 64 bytes: package
	// shared holds one per identity, and 72 is an 80-byte allocation.
	MaxRetries int32
	// Gzip asks for gzip explicitly and has ReadBody decompress it: the
	// gzip trailer then gives the size to allocate at once, and Response.
	// Wire counts the bytes on the wire. Without it, Go's transport still
	// asks for gzip and decompresses unseen (which a cache under the
	// transport needs: it must store what it can verify).
	Gzip bool
	// Identity asks for bodies uncompressed (Accept-Encoding: identity),
	// as a rest.Config with DisableCompression says, whatever the
	// transport would ask for (Go's own asks for gzip unless told not to).
	Identity bool
	// Body says how bodies are read: the limit after decompression.
	Body Options

	// held is a 429 whose Retry-After was not waited out (the caller's
	// deadline came first, or the retries ran out), until that wait has
	// passed: Get answers it again without a request. API Priority and
	// Fairness asks for up to 32 s, longer than a refresh or a root read
	// may wait, and a call each second would otherwise ask again each
	// second (issue 47's soak: 631 of 666 requests after a 429 came
	// before its Retry-After).
	held atomic.Pointer[heldAnswer]
}

// Clone is a client with c's settings and none of its state (a held
// 429): what a caller changes a setting of (HC, for a transport of new
// connections) without touching c.
func (c *Client) Clone() *Client {
	return &Client{HC: c.HC, Base: c.Base, Gzip: c.Gzip, Identity: c.Identity, MaxRetries: c.MaxRetries, Body: c.Body}
}

// HeldUntil is when the 429 Get answers again without a request stops
// being answered (its Retry-After), or the zero time when none is held:
// a caller that would only get that 429 back (a refresh a lookup wants)
// need not ask, nor count the answer against its own budget.
func (c *Client) HeldUntil() time.Time {
	if h := c.held.Load(); h != nil && time.Now().Before(h.until) {
		return h.until
	}
	return time.Time{}
}

// heldAnswer is a 429 Get answers again until until.
type heldAnswer struct {
	until time.Time
	err   *apierrors.StatusError
}

// NewClient is a client for base through a copy of hc (nil:
// http.DefaultClient) that follows at most maxRedirects redirects, on
// base's scheme and host only (CheckRedirect).
func NewClient(hc *http.Client, base *url.URL, maxRedirects int) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	b := *base
	b.Path = strings.TrimSuffix(b.Path, "/")
	b.RawPath = strings.TrimSuffix(b.RawPath, "/")
	return &Client{HC: WithRedirectPolicy(hc, maxRedirects), Base: &b}
}

// URL resolves a server-relative reference ("/apis",
// "/openapi/v3/apis/apps/v1?hash=AB") under Base: Base's scheme, host and
// path prefix, the reference's path and query. A reference with a scheme
// or a host ("//elsewhere/x") is refused, so that credentials stay on
// Base's host whatever a server lists.
func (c *Client) URL(ref string) (*url.URL, error) {
	r, err := url.Parse(ref)
	if err != nil || r.Scheme != "" || r.Host != "" || r.User != nil || !strings.HasPrefix(r.Path, "/") {
		return nil, fmt.Errorf("%q is not a server-relative URL (%v)", ref, err)
	}
	u := *c.Base
	u.Path = c.Base.Path + r.Path
	u.RawPath = ""
	if c.Base.RawPath != "" || r.RawPath != "" {
		u.RawPath = c.Base.EscapedPath() + r.EscapedPath()
	}
	u.RawQuery, u.Fragment = r.RawQuery, ""
	return &u, nil
}

// Request is one GET.
type Request struct {
	Ref    string // server-relative, see URL
	Accept string
	// ETag, when set, is sent as If-None-Match, and a 304 is then an
	// answer rather than an error.
	ETag string
	// NewConnection asks for a connection of its own (req.Close), so that a
	// load balancer may pick another server.
	NewConnection bool
	// Range, when set, is sent as the Range header (without asking for
	// gzip, which would make the ranges the compressed bytes'), and a 206
	// is then an answer.
	Range string
	// Revalidate sends Cache-Control: no-cache, so that an HTTP cache
	// below (diskcache's transport) answers from a stored entry only
	// once the server has confirmed it (a 304 to its ETag), however
	// fresh the entry says it is.
	Revalidate bool
	// NoStore sends Cache-Control: no-store, so that an HTTP cache below
	// neither answers nor stores it: the server's answer only.
	NoStore bool
}

// Response is an answered request, its body read and closed.
type Response struct {
	*http.Response
	Body []byte
	// Wire is the bytes received, compressed; 0 when the transport
	// decompressed unseen (Client.Gzip off).
	Wire int64

	pooled bool // Body is a buffer of chunkPools (Options.Recyclable)
}

// Recycle gives Body back to httpx's pools when it came from them
// (Options.Recyclable), and sets it to nil: the caller holds nothing that
// points into it, nor will. Any other body is left to the collector.
func (r *Response) Recycle() {
	if r.pooled {
		putChunk(r.Body)
	}
	r.Body, r.pooled = nil, false
}

// Get sends r (again after a 429 or 5xx with Retry-After, as Do says) and
// reads the body within c.Body. Its latency and size are reported to
// client-go's metrics adapters, as rest.Request reports its own
// (recordRequest). Errors come unprefixed, for the caller to wrap:
//   - the transport's (ErrRedirect, context errors, *url.Error), with a nil
//     Response;
//   - one wrapping ErrTooLarge, or a read or gzip error, with the Response
//     (headers only);
//   - an *apierrors.StatusError (StatusError) for any status but 200, 304
//     after an ETag, or 206 after a Range, with the Response; and, with a
//     nil Response and no request sent, the StatusError of a 429 whose
//     Retry-After has not passed yet and was not waited out (the caller's
//     deadline came first, or the retries ran out): a client asked to
//     wait does not ask again sooner, whichever path, as API Priority and
//     Fairness throttles an identity, not a path.
func (c *Client) Get(ctx context.Context, r Request) (*Response, error) {
	u, err := c.URL(r.Ref)
	if err != nil {
		return nil, err
	}
	if h := c.held.Load(); h != nil {
		if time.Now().Before(h.until) {
			return nil, h.err
		}
		c.held.CompareAndSwap(h, nil)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", r.Accept)
	if r.ETag != "" {
		req.Header.Set("If-None-Match", r.ETag)
	}
	if r.Range != "" {
		req.Header.Set("Range", r.Range)
		// Go's transport asks for gzip itself only when no Range is set.
	} else if c.Gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	} else if c.Identity {
		req.Header.Set("Accept-Encoding", "identity")
	}
	switch {
	case r.NoStore:
		req.Header.Set("Cache-Control", "no-store")
	case r.Revalidate:
		req.Header.Set("Cache-Control", "no-cache")
	}
	req.Close = r.NewConnection
	start := time.Now()
	resp, err := Do(ctx, c.HC, req, int(c.MaxRetries))
	if err != nil {
		recordRequest(ctx, c.Base, u, start, nil)
		return nil, err
	}
	defer resp.Body.Close()
	body, wire, pooled, err := readBody(ctx, resp, c.Body)
	out := &Response{Response: resp, Body: body, Wire: wire, pooled: pooled}
	recordRequest(ctx, c.Base, u, start, out)
	if err != nil {
		return out, err
	}
	answered := resp.StatusCode == http.StatusOK ||
		resp.StatusCode == http.StatusNotModified && r.ETag != "" ||
		resp.StatusCode == http.StatusPartialContent && r.Range != ""
	if !answered {
		err := StatusError(resp, body)
		if wait, ok := RetryAfter(resp); ok && wait > 0 && resp.StatusCode == http.StatusTooManyRequests {
			c.held.Store(&heldAnswer{until: time.Now().Add(wait), err: err})
		}
		return out, err
	}
	return out, nil
}

// StatusError turns an HTTP error response into the apimachinery error a
// client-go user expects: the server's own Status when it sent one, else a
// generic error for the code (with Retry-After for 429 and 5xx), which
// says, when the body is not a Kubernetes type, that the URL is probably
// not a Kubernetes API server.
func StatusError(resp *http.Response, body []byte) *apierrors.StatusError {
	retryAfter, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Code != 0 {
		if retryAfter > 0 && (st.Details == nil || st.Details.RetryAfterSeconds == 0) {
			if st.Details == nil {
				st.Details = &metav1.StatusDetails{}
			}
			st.Details.RetryAfterSeconds = int32(retryAfter)
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	// Worded as client-go words it: a text body is the message, any
	// other body (JSON of another kind, HTML) is "unknown".
	msg := "unknown"
	if base, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); base == "text/plain" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
	}
	err := apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet, schema.GroupResource{}, "", msg, retryAfter, true)
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "json") && !strings.Contains(ct, "protobuf") && resp.Request != nil {
		// A Kubernetes API server answers errors with a Status; anything
		// else (an HTML 404 from a web server, a proxy's page) says that
		// the URL is probably not one, which "the server could not find
		// the requested resource" alone does not.
		err.ErrStatus.Message += fmt.Sprintf(" (GET %s answered %s with Content-Type %q, not a Kubernetes Status: is this a Kubernetes API server?)",
			resp.Request.URL.Redacted(), resp.Status, ct)
	}
	return err
}

// DefaultMaxRetries is how many times Do sends a request again after a
// 429 or 5xx with Retry-After, unless told otherwise.
const DefaultMaxRetries = 5

// Do sends req through hc and, while the answer is a 429 or a 5xx carrying
// Retry-After (API Priority and Fairness sends 429 with Retry-After: 1), waits
// as asked and sends it again, at most maxRetries times. It never waits past
// ctx's deadline: when the wait would end after it, or ctx ends while
// waiting, the last answer is returned as it is (its body read, at most
// 64 KiB, and replayed), so that the caller reports the server's own status.
// This is client-go's rule (rest.Request's checkWait), bounded by the
// caller's deadline instead of a count of ten. Each attempt is reported to
// client-go's metrics adapters as rest.Request reports its own
// (recordAttempt).
func Do(ctx context.Context, hc *http.Client, req *http.Request, maxRetries int) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := hc.Do(req.Clone(ctx))
		recordAttempt(ctx, req, resp, attempt)
		if err != nil {
			return nil, err
		}
		wait, ok := RetryAfter(resp)
		if !ok || attempt >= maxRetries {
			return resp, nil
		}
		// The answer is kept to hand back if there is no retry after all.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		if deadline, has := ctx.Deadline(); has && time.Until(deadline) < wait {
			return resp, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return resp, nil
		}
	}
}

// RetryAfter is how long a response asks to be waited for before its
// request is sent again: a 429 or 5xx with a Retry-After header, in seconds
// or as an HTTP date.
func RetryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && (resp.StatusCode < 500 || resp.StatusCode > 599) {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// Counting counts every request sent through it in N: retries and
// redirects too.
type Counting struct {
	Next http.RoundTripper
	N    *atomic.Int64
}

func (t Counting) RoundTrip(req *http.Request) (*http.Response, error) {
	t.N.Add(1)
	return t.Next.RoundTrip(req)
}

// WrappedRoundTripper is the transport below (utilnet.RoundTripperWrapper):
// utilnet.CloseIdleConnectionsFor reaches it through this, for requests
// that want a new connection, and discovery/watch counts its own requests
// below the client's counter.
func (t Counting) WrappedRoundTripper() http.RoundTripper { return t.Next }

// Closing closes each request's connection after it (req.Close), so that
// the next request opens a new one, which a load balancer may send to
// another server.
type Closing struct{ Next http.RoundTripper }

func (t Closing) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Close = true
	return t.Next.RoundTrip(req)
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the
// transport below.
func (t Closing) WrappedRoundTripper() http.RoundTripper { return t.Next }

// Requests are reported to client-go's metrics adapters
// (k8s.io/client-go/tools/metrics, a package of interfaces that links
// nothing but the standard library) as rest.Request reports its own, with
// the same labels, so that whatever a program registered there
// (controller-runtime's rest_client_requests_total, component-base's) counts
// kubeatlas's requests beside client-go's. Watches (discovery/watch) go
// through client-go's metadata client, which reports them itself.

// recordAttempt reports one attempt of req, as rest.Request does after
// each (its withRetry.After): RequestResult for every attempt, RequestRetry
// for every one after the first, with the status code as a string, or
// "<error>" when no response came back (client-go's label for an
// error of any kind, whose text would make labels unbounded; a refused
// redirect comes back with its response, and so its code).
func recordAttempt(ctx context.Context, req *http.Request, resp *http.Response, attempt int) {
	code := "<error>"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	metrics.RequestResult.Increment(ctx, code, req.Method, req.URL.Host)
	if attempt > 0 {
		metrics.RequestRetry.IncrementRetry(ctx, code, req.Method, req.URL.Host)
	}
}

// recordRequest reports a request's whole latency, retries and the body
// read included (rest.Request.request's), and the size of the body read
// when there is one or the answer was a success (rest.Request.Do's).
func recordRequest(ctx context.Context, base, u *url.URL, start time.Time, resp *Response) {
	metrics.RequestLatency.Observe(ctx, http.MethodGet, metricURL(base, u), time.Since(start))
	if resp != nil && (len(resp.Body) > 0 || resp.StatusCode/100 == 2) {
		metrics.ResponseSize.Observe(ctx, http.MethodGet, u.Host, float64(len(resp.Body)))
	}
}

// metricURL is u as rest.Request reports it to RequestLatency (its
// unexported finalURLTemplate, ported: the label must be the same for the
// same request whichever client sent it): every query value is "{value}",
// a resource's namespace and name in an /api or /apis path are
// "{namespace}" and "{name}", and any other path (/openapi/v3/...) is
// "/{prefix}", so that the label takes few values. client-go's base path
// always ends in "/" (rest.NewRESTClient adds it); base's may not.
func metricURL(base, u *url.URL) url.URL {
	t := *u
	t.RawPath, t.Fragment = "", ""
	q := u.Query()
	for k := range q {
		q[k] = []string{"{value}"}
	}
	t.RawQuery = q.Encode()

	basePath := strings.TrimSuffix(base.Path, "/") + "/"
	segments := strings.Split(t.Path, "/")
	groupIndex, trimmed := 0, ""
	if strings.Contains(t.Path, basePath) {
		p := strings.TrimPrefix(t.Path, basePath)
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		trimmed = basePath
		segments = strings.Split(p, "/")
		groupIndex = 1
	}
	if len(segments) <= 2 {
		return t
	}
	var index int
	switch segments[groupIndex] {
	case "api":
		index = groupIndex + 2
	case "apis":
		index = groupIndex + 3
	default:
		t.Path, t.RawQuery = "/{prefix}", ""
		return t
	}
	switch n := len(segments) - index; {
	case n == 2:
		segments[index+1] = "{name}"
	case n == 3:
		if segments[index+2] == "finalize" || segments[index+2] == "status" {
			segments[index+1] = "{name}"
		} else {
			segments[index+1] = "{namespace}"
		}
	case n >= 4:
		segments[index+1] = "{namespace}"
		if segments[index+3] != "finalize" && segments[index+3] != "status" {
			segments[index+3] = "{name}"
		}
	}
	t.Path = path.Join(trimmed, path.Join(segments...))
	return t
}

// ErrTooLarge is the cause of the error for a body over the size limit.
var ErrTooLarge = errors.New("response body exceeds the size limit")

// Sizes that bound what a body costs beyond its own bytes.
const (
	// presizeMax bounds the buffer allocated on a server's word (a
	// Content-Length or a gzip trailer): a 60 MB claim followed by 1 KB
	// costs this much, not 60 MB.
	presizeMax = 8 << 20
	// chunkMax bounds one read buffer; a body is read into chunks of
	// doubling size and joined once at the end, so reading a body costs at
	// most about twice its size, never the repeated regrowth of a single
	// buffer.
	chunkMax = 8 << 20
	// LargeBody is the size past which ReadBody takes Options.Large.
	LargeBody = 16 << 20
)

// Options says how ReadBody reads.
type Options struct {
	// Limit is the most a body may hold, after decompression.
	Limit int64
	// Large, when not nil, is acquired (weight 1) while a body grows past
	// LargeBody, so that concurrent readers of oversized bodies (FetchAll
	// against a server that sends nothing but huge documents) hold one
	// limit's worth at a time instead of one each.
	Large Semaphore
	// Recyclable lets a body of firstChunk bytes or more come back in a
	// buffer of chunkPools (its capacity less than twice its length), for
	// the caller to give back with Response.Recycle once nothing points
	// into it: a caller that decodes a body into copies and drops it
	// (discovery without a disk cache) then costs the collector no body
	// per read. A caller that keeps bodies leaves it off, so that what it
	// keeps has no spare capacity. A body a caching transport keeps (its
	// Handover) or holds already (Bytes) is never pooled.
	Recyclable bool
}

// Semaphore is what Options.Large needs of a *semaphore.Weighted
// (golang.org/x/sync), which openapi3 passes. An interface, not that type,
// so that discovery, which has no use for it, does not link the package.
type Semaphore interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}

// ReadBody reads resp's body within o.Limit, decompressing it when its
// Content-Encoding is gzip (the caller asked for gzip itself, so Go's
// transport left it compressed). A body over the limit is an error wrapping
// ErrTooLarge; a Content-Length over the limit is refused before a byte is
// read. Whatever the server sends, reading costs about twice the limit at
// most, plus presizeMax. wire is the number of bytes received (compressed).
func ReadBody(ctx context.Context, resp *http.Response, o Options) (body []byte, wire int64, err error) {
	body, wire, _, err = readBody(ctx, resp, o)
	return body, wire, err
}

// readBody is ReadBody, and says whether body is a buffer of chunkPools
// (Options.Recyclable) that the caller may give back once done with it.
func readBody(ctx context.Context, resp *http.Response, o Options) (body []byte, wire int64, pooled bool, err error) {
	gzipped := strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip")
	if resp.ContentLength > o.Limit {
		return nil, 0, false, fmt.Errorf("%w (%d bytes; Content-Length %d)", ErrTooLarge, o.Limit, resp.ContentLength)
	}
	if b, ok := resp.Body.(interface{ Bytes() []byte }); ok && !gzipped {
		// A body already in memory (diskcache's StoredBody): taken as it is.
		body = b.Bytes()
		if int64(len(body)) > o.Limit {
			return nil, 0, false, fmt.Errorf("%w (%d bytes)", ErrTooLarge, o.Limit)
		}
		return body, 0, false, nil
	}
	// A caching transport's body (diskcache's) that would keep a copy of
	// its own, outside the limit, is handed the one read here instead.
	var handover func([]byte)
	if h, ok := resp.Body.(interface{ Handover() func([]byte) }); ok && !gzipped {
		handover = h.Handover()
		o.Recyclable = false // the transport keeps it
	}
	body, err = readAtMost(ctx, resp.Body, o, resp.ContentLength)
	if err != nil {
		return nil, 0, false, err
	}
	if handover != nil {
		handover(body)
	}
	wire = int64(len(body))
	if gzipped {
		compressed := body
		body, err = gunzip(ctx, compressed, o)
		if pooledBuffer(compressed, o) {
			putChunk(compressed) // read by gunzip into body, and no longer
		}
		if err != nil {
			return nil, wire, false, err
		}
	}
	return body, wire, pooledBuffer(body, o), nil
}

// pooledBuffer says whether b, read by readAtMost under o, is a buffer of
// chunkPools: under Recyclable, every buffer of a pooled size is (read
// into one from getChunk, or joined into one), and no other is.
func pooledBuffer(b []byte, o Options) bool {
	return o.Recyclable && chunkClass(cap(b)) >= 0
}

// gunzip decompresses a gzip body into a buffer of the size its trailer
// states (trusted only up to presizeMax), reading at most limit+1 bytes.
func gunzip(ctx context.Context, compressed []byte, o Options) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	defer zr.Close()
	var hint int64
	if n := len(compressed); n >= 4 {
		hint = int64(binary.LittleEndian.Uint32(compressed[n-4:]))
	}
	out, err := readAtMost(ctx, zr, o, hint)
	if err != nil && !errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return out, err
}

// readAtMost reads r to its end, or fails with ErrTooLarge as soon as it
// has read more than the limit, starting with a buffer of hint bytes (bounded by presizeMax).
// Without a hint, the body is read into chunks taken from chunkPools and
// copied into one buffer of its size at the end.
func readAtMost(ctx context.Context, r io.Reader, o Options, hint int64) ([]byte, error) {
	want := o.Limit + 1
	var buf []byte
	if hint > 0 {
		// One more, to see the end without another buffer.
		n := min(hint+1, presizeMax, want)
		if o.Recyclable {
			buf = getChunk(pooledSize(n))
		} else {
			buf = make([]byte, 0, n)
		}
	} else {
		buf = getChunk(min(firstChunk, want))
	}
	var chunks [][]byte
	var total int64
	large := false
	defer func() {
		if large {
			o.Large.Release(1)
		}
		for _, c := range chunks {
			putChunk(c)
		}
	}()
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		total += int64(n)
		if total >= want {
			putChunk(buf)
			return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, o.Limit)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			putChunk(buf)
			return nil, err
		}
		if len(buf) < cap(buf) {
			continue
		}
		if total > LargeBody && o.Large != nil && !large {
			if err := o.Large.Acquire(ctx, 1); err != nil {
				putChunk(buf)
				return nil, err
			}
			large = true
		}
		chunks = append(chunks, buf)
		buf = getChunk(min(max(2*int64(cap(buf)), firstChunk), chunkMax, want-total))
	}
	if chunks == nil && (chunkClass(cap(buf)) < 0 || o.Recyclable && 2*len(buf) > cap(buf)) {
		return buf, nil // presized, sized by the limit, or recyclable: the caller's
	}
	var out []byte
	if o.Recyclable && total >= firstChunk {
		out = getChunk(pooledSize(total))
	} else {
		out = make([]byte, 0, total)
	}
	for _, c := range chunks {
		out = append(out, c...)
	}
	out = append(out, buf...)
	putChunk(buf)
	return out, nil
}

// firstChunk is the first buffer of a body read without a size hint.
const firstChunk = 32 << 10

// chunkPools keep the chunks of bodies read without a size (a chunked
// response, or one Go's transport decompressed), one pool per size from
// firstChunk doubling to chunkMax. Such a body is joined into one buffer
// at the end, and its chunks, about its own size again (3 MB of a cold
// discovery read at 3,000 CRDs), were garbage for the collector to find
// on every read. sync.Pool rather than a free list of our own: it drops
// what stays unused over two collections, so an idle process holds none.
var chunkPools [chunkClasses]sync.Pool

const chunkClasses = 9 // 32 KiB .. 8 MiB (chunkMax)

// chunkClass is the pool of a buffer of capacity c, or -1.
func chunkClass(c int) int {
	if c < firstChunk || c > chunkMax || c&(c-1) != 0 {
		return -1
	}
	return bits.TrailingZeros(uint(c)) - bits.TrailingZeros(firstChunk)
}

// pooledSize is the capacity of the pooled buffer that holds n bytes: the
// smallest class at least n, or n itself when none is (below firstChunk,
// past chunkMax).
func pooledSize(n int64) int64 {
	if n < firstChunk || n > chunkMax {
		return n
	}
	return 1 << bits.Len64(uint64(n-1))
}

// getChunk is an empty buffer of capacity n, from its pool when n is a
// pooled size.
func getChunk(n int64) []byte {
	if i := chunkClass(int(n)); i >= 0 {
		if p, ok := chunkPools[i].Get().(*[]byte); ok {
			return (*p)[:0]
		}
	}
	return make([]byte, 0, n)
}

// putChunk gives b back to its pool, when it is of a pooled size: the
// caller no longer holds it, nor anything that points into it.
func putChunk(b []byte) {
	if i := chunkClass(cap(b)); i >= 0 {
		b = b[:0]
		chunkPools[i].Put(&b)
	}
}

// DefaultMaxResponseBytes is discovery's default limit of one response body
// (discovery.WithMaxResponseBytes).
const DefaultMaxResponseBytes = 64 << 20
