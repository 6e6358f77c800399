package shared

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestOpenAPIAtFirstUse pins Handle.OpenAPI's promise: Acquire builds no
// OpenAPI client (most identities never ask for one); the first call
// builds it, once however many call at once, the same for every handle
// of that identity and another for another identity, each sending its
// own credentials, with the registry's options (WithOpenAPIOptions).
func TestOpenAPIAtFirstUse(t *testing.T) {
	srv, err := docserver.NewServer(docserver.WithCRDs(4, 2))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sent := map[string]int{} // /openapi/v3 requests by token
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/openapi/v3") {
			mu.Lock()
			sent[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]++
			mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	cfg := func(tok string) *rest.Config { return &rest.Config{Host: ts.URL, BearerToken: tok} }

	for _, tc := range []struct {
		name string
		opts []Option
		err  error // of Paths
	}{
		{name: "default"},
		{name: "with options", opts: []Option{WithOpenAPIOptions(openapi3.WithMaxResponseBytes(10))}, err: openapi3.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(append(tc.opts, WithoutWatch(), WithLinger(0))...)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			clear(sent)
			mu.Unlock()
			var hs []*Handle
			for _, tok := range []string{"tok-a", "tok-a", "tok-b"} {
				h, err := r.Acquire(cfg(tok))
				if err != nil {
					t.Fatal(err)
				}
				defer h.Release()
				hs = append(hs, h)
			}
			for _, h := range hs {
				if h.c.openapi.Load() != nil {
					t.Fatal("Acquire built an OpenAPI client")
				}
			}
			got := make([]*openapi3.Client, 8)
			var wg sync.WaitGroup
			for i := range got {
				wg.Go(func() { got[i] = hs[i%2].OpenAPI() })
			}
			wg.Wait()
			for i, c := range got {
				if c == nil || c != got[0] {
					t.Fatalf("call %d of the one identity's handles: %p, the first %p", i, c, got[0])
				}
			}
			other := hs[2].OpenAPI()
			if other == nil || other == got[0] {
				t.Fatalf("another identity's client: %p, the first's %p", other, got[0])
			}
			ctx := context.Background()
			for i, c := range []*openapi3.Client{got[0], other} {
				_, err := c.Paths(ctx)
				if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
					t.Fatalf("client %d: Paths: %v, want %v", i, err, tc.err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(sent) != 2 || sent["tok-a"] == 0 || sent["tok-b"] == 0 {
				t.Errorf("/openapi/v3 requests by token: %v, want tok-a's and tok-b's only", sent)
			}
		})
	}
}

// TestUserAgentOnce: identities whose configs name no User-Agent send
// client-go's default, made once per registry: every identity's config
// holds the one string (64 bytes each when each made its own).
func TestUserAgentOnce(t *testing.T) {
	r, err := New(WithoutWatch(), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	var agents []string
	for _, tok := range []string{"tok-a", "tok-b"} {
		h, err := r.Acquire(&rest.Config{Host: "https://ua.invalid", BearerToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		_, cfg := h.Discovery().Connection()
		agents = append(agents, cfg.UserAgent)
	}
	if agents[0] != rest.DefaultKubernetesUserAgent() || agents[1] != agents[0] {
		t.Fatalf("User-Agents %q, want client-go's default %q", agents, rest.DefaultKubernetesUserAgent())
	}
	if unsafe.StringData(agents[0]) != unsafe.StringData(agents[1]) {
		t.Error("each identity holds a User-Agent of its own")
	}
}

// TestClientSize: a client is at most 112 bytes, a size class of Go's
// allocator (136, so 144 held, with its flags apart and an HTTP client of
// its own), and a handle one object of 32 (a handle and its reference
// were two of 32): a process may hold thousands, package shared's
// identities.
func TestClientSize(t *testing.T) {
	if size := unsafe.Sizeof(client{}); size > 112 {
		t.Errorf("a client is %d bytes, want at most 112", size)
	}
	if size := unsafe.Sizeof(Handle{}); size > 32 {
		t.Errorf("a Handle is %d bytes, want at most 32", size)
	}
}

// TestClientMapComparesWholeKeys: the registry's map holds clients by
// their key's first 8 bytes; two identities whose keys share them (which
// a SHA-256 gives only when made to) are both held, each found by its own
// whole key, never the other's client, however they come and go.
func TestClientMapComparesWholeKeys(t *testing.T) {
	var a, b, other identityKey
	for i := range a {
		a[i], b[i], other[i] = byte(i), byte(i), byte(i)
	}
	b[31], other[0] = 0xff, 0xff // b shares a's first 8 bytes; other does not
	ca, cb := &client{id: a}, &client{id: b}
	var m clientMap
	m.put(ca)
	if got := m.get(b); got != nil {
		t.Fatalf("b, not held, found a's client (%p)", got)
	}
	m.put(cb)
	check := func(when string, wantA, wantB *client, wantLen int) {
		t.Helper()
		if got := m.get(a); got != wantA {
			t.Errorf("%s: a found %p, want %p", when, got, wantA)
		}
		if got := m.get(b); got != wantB {
			t.Errorf("%s: b found %p, want %p", when, got, wantB)
		}
		if got := m.get(other); got != nil {
			t.Errorf("%s: a key not held found %p", when, got)
		}
		if n := m.len(); n != wantLen {
			t.Errorf("%s: %d held, want %d", when, n, wantLen)
		}
	}
	check("both held", ca, cb, 2)
	m.remove(ca)
	check("a removed", nil, cb, 1)
	m.put(ca) // its prefix's slot is free again: b stays where it is
	check("a held again", ca, cb, 2)
	m.remove(&client{id: b}) // another client of b's key is not b's
	check("a stranger removed", ca, cb, 2)
	m.remove(cb)
	check("b removed", ca, nil, 1)
	m.remove(ca)
	check("both removed", nil, nil, 0)
}
