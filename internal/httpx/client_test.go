package httpx

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestURLKeepsTheHostAndPrefix: a reference is resolved under the base's
// host and path prefix (a proxy's /k8s/clusters/<id>), with its query; one
// that names another host, by scheme or by //, is refused, so that
// credentials cannot leave the server's host through a listed URL.
func TestURLKeepsTheHostAndPrefix(t *testing.T) {
	base, _ := url.Parse("https://proxy.example/k8s/clusters/c-1/")
	c := NewClient(nil, base, 3)
	for ref, want := range map[string]string{
		"/apis":                            "https://proxy.example/k8s/clusters/c-1/apis",
		"/openapi/v3/apis/apps/v1?hash=AB": "https://proxy.example/k8s/clusters/c-1/openapi/v3/apis/apps/v1?hash=AB",
		"/api/v1#frag":                     "https://proxy.example/k8s/clusters/c-1/api/v1",
	} {
		u, err := c.URL(ref)
		if err != nil || u.String() != want {
			t.Errorf("URL(%q) = %v, %v; want %s", ref, u, err, want)
		}
	}
	for _, ref := range []string{"//evil.example/apis", "https://evil.example/apis", "apis", "http://user@proxy.example/apis"} {
		if u, err := c.URL(ref); err == nil {
			t.Errorf("URL(%q) = %v, want an error", ref, u)
		}
	}
}

// TestGetStatuses: 200 is an answer; 304 is one only after an ETag; any
// other status is an apimachinery StatusError with the server's
// Retry-After, and the body is read either way.
func TestGetStatuses(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("fine"))
		case "/same":
			w.WriteHeader(http.StatusNotModified)
		case "/busy":
			w.Header().Set("Retry-After", "9")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"slow down","reason":"TooManyRequests","code":429}`))
		}
	}))
	defer ts.Close()
	base, _ := url.Parse(ts.URL)
	c := NewClient(nil, base, 3)
	c.Body.Limit = 1 << 20
	ctx := context.Background()
	if r, err := c.Get(ctx, Request{Ref: "/ok"}); err != nil || string(r.Body) != "fine" {
		t.Errorf("200: %v", err)
	}
	if r, err := c.Get(ctx, Request{Ref: "/same", ETag: `"x"`}); err != nil || r.StatusCode != http.StatusNotModified {
		t.Errorf("304 after an ETag: %v", err)
	}
	if _, err := c.Get(ctx, Request{Ref: "/same"}); err == nil {
		t.Errorf("304 without an ETag: no error")
	}
	r, err := c.Get(ctx, Request{Ref: "/busy"})
	if d, ok := apierrors.SuggestsClientDelay(err); !apierrors.IsTooManyRequests(err) || !ok || d != 9 || r == nil {
		t.Errorf("429: %v (delay %d %v)", err, d, ok)
	}
}

// TestThrottledAnswerHeld: a 429 whose Retry-After the caller's deadline
// cannot wait out is answered again, for any path and without a request,
// until that wait has passed; then the next call is sent.
func TestThrottledAnswerHeld(t *testing.T) {
	var requests atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("fine"))
	}))
	defer ts.Close()
	base, _ := url.Parse(ts.URL)
	c := NewClient(nil, base, 3)
	c.Body.Limit = 1 << 20
	c.MaxRetries = DefaultMaxRetries
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, err := c.Get(short, Request{Ref: "/apis"}); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("a deadline shorter than the Retry-After: %v, want the 429", err)
	}
	for _, ref := range []string{"/apis", "/openapi/v3"} {
		r, err := c.Get(context.Background(), Request{Ref: ref})
		if d, ok := apierrors.SuggestsClientDelay(err); !apierrors.IsTooManyRequests(err) || !ok || d != 1 || r != nil {
			t.Errorf("%s within the Retry-After: %v, %v; want the 429 held, no response", ref, r, err)
		}
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests within the Retry-After, want 1", n)
	}
	time.Sleep(time.Until(began.Add(time.Second + 50*time.Millisecond)))
	if r, err := c.Get(context.Background(), Request{Ref: "/apis"}); err != nil || string(r.Body) != "fine" {
		t.Errorf("after the Retry-After: %v", err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}
