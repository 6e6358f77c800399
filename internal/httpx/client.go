package httpx

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
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
	// MaxRetries bounds the retries of a 429 or 5xx with Retry-After (Do).
	MaxRetries int
	// Body says how bodies are read: the limit after decompression.
	Body Options
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
//     after an ETag, or 206 after a Range, with the Response.
func (c *Client) Get(ctx context.Context, r Request) (*Response, error) {
	u, err := c.URL(r.Ref)
	if err != nil {
		return nil, err
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
	req.Close = r.NewConnection
	start := time.Now()
	resp, err := Do(ctx, c.HC, req, c.MaxRetries)
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
		return out, StatusError(resp, body)
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
