package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// TestRedirectKeepsCredentialsOnTheHost: a redirect from /api or /apis to
// another host is not followed, so the bearer token that client-go's
// transport adds to every request never reaches that host.
func TestRedirectKeepsCredentialsOnTheHost(t *testing.T) {
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Add(1)
		t.Errorf("another host received %s with Authorization %q", r.URL.Path, r.Header.Get("Authorization"))
	}))
	defer other.Close()
	_, base := docserver.Start(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api":
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
		case "/apis":
			http.Redirect(w, r, base+"/apis", http.StatusFound) // same host? no: another port
		}
	}))
	defer front.Close()
	c, err := discovery.New(&rest.Config{Host: front.URL, BearerToken: "secret-token"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Snapshot(context.Background())
	if !errors.Is(err, discovery.ErrRedirect) {
		t.Fatalf("err = %v, want ErrRedirect", err)
	}
	if leaked.Load() != 0 {
		t.Fatalf("%d requests reached another host", leaked.Load())
	}
}

// TestRetryAfter: API Priority and Fairness answers 429 with Retry-After;
// the client waits as asked and tries again, as kubectl does, instead of
// failing the caller at once.
func TestRetryAfter(t *testing.T) {
	srv, base := docserver.Start(t)
	srv.InjectFault("/apis", docserver.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Times: 2})
	srv.InjectFault("/api", docserver.Fault{Status: http.StatusServiceUnavailable, RetryAfter: time.Second, Times: 1})
	c := newClient(t, base)
	s, err := c.Snapshot(context.Background())
	if err != nil || s == nil {
		t.Fatalf("after two 429s and a 503 with Retry-After: %v", err)
	}
	if got := c.Stats().Requests; got != 5 {
		t.Errorf("%d requests, want 2 + 3 retries", got)
	}

	// A wait the caller's deadline cannot afford is not made: the caller
	// gets the server's 429, with its Retry-After, before its deadline.
	srv.InjectFault("/apis", docserver.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Hour})
	fresh := newClient(t, base, discovery.WithRefreshTimeout(10*time.Second))
	_, err = fresh.Snapshot(context.Background())
	if d, ok := apierrors.SuggestsClientDelay(err); !apierrors.IsTooManyRequests(err) || !ok || d != 3600 {
		t.Fatalf("err = %v, want the server's 429 with Retry-After 3600", err)
	}
	if got := fresh.Stats().Requests; got != 2 {
		t.Errorf("%d requests, want 2 (no retry of the 429)", got)
	}
}

// TestNotAKubernetesServer: a URL whose server answers with a web page, not
// a Kubernetes Status, is named as probably not an API server, and the
// error still classifies (IsNotFound).
func TestNotAKubernetesServer(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<html><body>Not Found</body></html>"))
	}))
	defer ts.Close()
	c, err := discovery.NewForHTTPClient(nil, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Snapshot(context.Background())
	if !apierrors.IsNotFound(err) {
		t.Fatalf("not a NotFound: %v", err)
	}
	if want := "is this a Kubernetes API server?"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ts.URL) {
		t.Errorf("error %q does not name the URL and say %q", err, want)
	}
}

// TestRecycledBodiesLeaveSnapshotsAlone: without a disk cache, a protobuf
// body's buffer goes back to internal/httpx's pools once decoded, and later
// reads fill it again; a snapshot holds nothing of it, so it reads the same
// after other clients read other surfaces into those buffers.
func TestRecycledBodiesLeaveSnapshotsAlone(t *testing.T) {
	ctx := context.Background()
	// Bodies of a pooled size (32 KiB and more), gunzipped or read as sent.
	_, base := docserver.Start(t, docserver.WithCRDs(300, 30))
	_, other := docserver.Start(t, docserver.WithCRDs(300, 7))
	for _, identity := range []bool{false, true} {
		snapshot := func(base string) *discovery.Snapshot {
			c, err := discovery.NewForConfigAndClient(&rest.Config{Host: base, DisableCompression: identity}, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := c.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return snap
		}
		snap := snapshot(base)
		before := fmt.Sprint(snap.Groups())
		for range 5 {
			snapshot(other)
		}
		if fmt.Sprint(snap.Groups()) != before {
			t.Errorf("identity %v: a snapshot changed when other bodies were read after it", identity)
		}
	}
}
