package shared_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/shared"
)

// authServer is a kube-apiserver's front door over docserver: it accepts
// the bearer tokens "tok-*" (401 for any other), sends the token "other"
// to a second server (an aggregated API server that shows it another
// view), and logs who asked for what.
type authServer struct {
	main, other *docserver.Server
	url         string

	mu  sync.Mutex
	log []hit
}

type hit struct {
	token, path, ifNoneMatch, etag string
	status                         int
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	main, err := docserver.NewServer(docserver.WithCRDs(20, 2))
	if err != nil {
		t.Fatal(err)
	}
	other, err := docserver.NewServer(docserver.WithCRDs(21, 2))
	if err != nil {
		t.Fatal(err)
	}
	a := &authServer{main: main, other: other}
	ts := httptest.NewServer(a)
	t.Cleanup(ts.Close)
	a.url = ts.URL
	return a
}

func (a *authServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	rec := httptest.NewRecorder()
	switch {
	case !ok || !strings.HasPrefix(tok, "tok-") && tok != "other":
		http.Error(rec, "Unauthorized", http.StatusUnauthorized)
	case tok == "other":
		a.other.ServeHTTP(rec, r)
	default:
		a.main.ServeHTTP(rec, r)
	}
	if r.URL.Path == "/api" || r.URL.Path == "/apis" {
		a.mu.Lock()
		a.log = append(a.log, hit{token: tok, path: r.URL.Path, ifNoneMatch: r.Header.Get("If-None-Match"),
			etag: rec.Header().Get("ETag"), status: rec.Code})
		a.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// discovery is the discovery requests (/api and /apis) of token, or of
// everyone for "".
func (a *authServer) discovery(token string) []hit {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []hit
	for _, h := range a.log {
		if token == "" || h.token == token {
			out = append(out, h)
		}
	}
	return out
}

func (a *authServer) config(token string) *rest.Config {
	return &rest.Config{Host: a.url, BearerToken: token}
}

func newRegistry(t *testing.T, opts ...shared.Option) *shared.Registry {
	t.Helper()
	// The fake serves no CRDs or APIServices to watch: the watch runs,
	// and polls (as where watching is forbidden) every hour.
	opts = append(opts, shared.WithWatchOptions(watch.WithFallbackPoll(time.Hour), watch.WithUpgradePoll(time.Hour)))
	r, err := shared.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var widget = schema.GroupKind{Group: "g000.stress.example.com", Kind: "Widget0000"}

// A hundred users of one server and identity (a client built per
// reconcile) cost the first one's cold read and nothing after.
func TestOneIdentityReadsOnce(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(0))
	var first *shared.Handle
	for i := range 100 {
		h, err := r.Acquire(a.config("tok-1")) // a new config each time, as callers copy theirs
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Mapper().RESTMapping(widget); err != nil {
			t.Fatalf("user %d: %v", i, err)
		}
		if first == nil {
			first = h
			continue
		}
		if h.Discovery() != first.Discovery() || h.Mapper() != first.Mapper() || h.OpenAPI() != first.OpenAPI() {
			t.Fatalf("user %d got clients of its own", i)
		}
		h.Release()
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d, want the one client", r.Len())
	}
	first.Release()
	if got := a.discovery(""); len(got) != 2 || got[0].status != 200 || got[1].status != 200 {
		t.Fatalf("discovery requests: %+v, want the first user's two", got)
	}
	waitWatchStopped(t)
}

// Another identity on the same server takes the decoded snapshot only
// after its own two conditional requests are answered 304; an identity
// that is shown another view (200) gets a snapshot of its own.
func TestIdentitiesShareAfterTheirOwn304s(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(0))
	var handles []*shared.Handle
	defer func() {
		for _, h := range handles {
			h.Release()
		}
		waitWatchStopped(t)
	}()
	acquire := func(token string) *shared.Handle {
		h, err := r.Acquire(a.config(token))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
		if _, err := h.Mapper().RESTMapping(widget); err != nil {
			t.Fatalf("%s: %v", token, err)
		}
		return h
	}
	first := acquire("tok-0")
	snap := first.Discovery().Current()
	apiETag, apisETag := snap.ETags()
	for i := 1; i < 50; i++ {
		tok := fmt.Sprintf("tok-%d", i)
		h := acquire(tok)
		if h.Discovery() == first.Discovery() {
			t.Fatalf("%s shares the first identity's client", tok)
		}
		got := a.discovery(tok)
		if len(got) != 2 {
			t.Fatalf("%s: %d discovery requests, want 2: %+v", tok, len(got), got)
		}
		for _, g := range got {
			want := map[string]string{"/api": apiETag, "/apis": apisETag}[g.path]
			if g.status != http.StatusNotModified || g.ifNoneMatch != want {
				t.Fatalf("%s: %s answered %d to If-None-Match %q, want 304 to %q", tok, g.path, g.status, g.ifNoneMatch, want)
			}
		}
		if s := h.Discovery().Current(); s.Generation() != snap.Generation() {
			t.Fatalf("%s: generation %d, want the shared %d", tok, s.Generation(), snap.Generation())
		}
	}
	// Another view: the token's server serves one CRD more.
	other := acquire("other")
	got := a.discovery("other")
	if len(got) != 2 || got[0].status != 200 && got[1].status != 200 {
		t.Fatalf("other: %+v, want its own read (a 200)", got)
	}
	if other.Discovery().Current().Generation() == snap.Generation() {
		t.Fatal("an identity shown another view shares the first one's snapshot")
	}
	extra := schema.GroupKind{Group: "g000.stress.example.com", Kind: "Widget0020"}
	if _, err := other.Mapper().RESTMapping(extra); err != nil {
		t.Fatalf("other does not see its own view: %v", err)
	}
	if _, err := first.Mapper().RESTMapping(extra); err == nil {
		t.Fatal("the first identity sees the other's view")
	}
}

// watchRunning reports whether a goroutine of discovery/watch runs.
func watchRunning() (bool, string) {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	return strings.Contains(stacks, "kubeatlas/discovery/watch."), stacks
}

func waitWatchStopped(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		running, stacks := watchRunning()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a watch still runs 5s after the last release:\n%s", stacks)
		}
	}
}

// One watch per client, not per user; it stops at the last release (no
// linger), and an Acquire after that makes a new client.
func TestWatchStopsWithTheLastUser(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(0))
	h1, err := r.Acquire(a.config("tok-1"))
	if err != nil {
		t.Fatal(err)
	}
	h2, err := r.Acquire(a.config("tok-1"))
	if err != nil {
		t.Fatal(err)
	}
	if h1.Watcher() != h2.Watcher() {
		t.Fatal("two watchers for one client")
	}
	if _, err := h2.Mapper().RESTMapping(widget); err != nil {
		t.Fatal(err)
	}
	h1.Release()
	h1.Release() // a second Release does nothing: h2 still holds the client
	if running, _ := watchRunning(); !running {
		t.Fatal("the watch stopped while a user holds the client")
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d with one user", r.Len())
	}
	h2.Release()
	if r.Len() != 0 {
		t.Fatalf("Len = %d after the last release", r.Len())
	}
	waitWatchStopped(t)
	// The released handle's objects still answer.
	if _, err := h2.Mapper().RESTMapping(widget); err != nil {
		t.Fatalf("the mapper after Release: %v", err)
	}
	h3, err := r.Acquire(a.config("tok-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { h3.Release(); waitWatchStopped(t) }()
	if h3.Discovery() == h2.Discovery() {
		t.Fatal("an Acquire after the client was forgotten got the old client")
	}
}

// A client released within its linger is taken back: same client, no
// request.
func TestLingerTakesBack(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(time.Second))
	h, err := r.Acquire(a.config("tok-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Mapper().RESTMapping(widget); err != nil {
		t.Fatal(err)
	}
	h.Release()
	h2, err := r.Acquire(a.config("tok-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		h2.Release()
		for deadline := time.Now().Add(10 * time.Second); r.Len() != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a lingering client is still held 10s after its 1s linger")
			}
		}
		waitWatchStopped(t)
	}()
	if h2.Discovery() != h.Discovery() {
		t.Fatal("a client acquired within its linger was made anew")
	}
	if _, err := h2.Mapper().RESTMapping(widget); err != nil {
		t.Fatal(err)
	}
	if n := len(a.discovery("")); n != 2 {
		t.Fatalf("%d discovery requests, want 2", n)
	}
	if running, _ := watchRunning(); !running {
		t.Fatal("the watch of a lingering client stopped")
	}
}

// A short linger ends: the watch stops and the client is forgotten.
func TestLingerEnds(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(20*time.Millisecond))
	h, err := r.Acquire(a.config("tok-1"))
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	for deadline := time.Now().Add(5 * time.Second); r.Len() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a lingering client is still held 5s after its 20ms linger")
		}
	}
	waitWatchStopped(t)
}

// A handle nobody releases is released by the garbage collector, unless
// the HTTP client it gave out is still reachable.
func TestGarbageCollectorReleases(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(0))
	acquire := func() *http.Client {
		h, err := r.Acquire(a.config("tok-1"))
		if err != nil {
			t.Fatal(err)
		}
		return h.HTTPClient()
	}
	hc := acquire()
	for range 5 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if r.Len() != 1 {
		t.Fatal("the handle was released while its HTTP client is reachable")
	}
	runtime.KeepAlive(hc)
	hc = nil
	for deadline := time.Now().Add(5 * time.Second); r.Len() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an unreachable handle was not released")
		}
		runtime.GC()
	}
	waitWatchStopped(t)
}

// HTTPClient is the identity's HTTP client as client-go builds it for its
// config: its credentials, its config's timeout, Go's redirect policy;
// its requests are not discovery's, and not counted in its Stats.
func TestHTTPClientIsTheIdentitys(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(0))
	cfg := a.config("tok-1")
	cfg.Timeout = 7 * time.Second
	h, err := r.Acquire(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer waitWatchStopped(t)
	defer h.Release()
	if _, err := h.Discovery().Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := h.Discovery().Stats().Requests
	hc := h.HTTPClient()
	if hc.Timeout != cfg.Timeout || hc.CheckRedirect != nil || hc.Jar != nil {
		t.Errorf("the HTTP client has timeout %v, a redirect policy %v, a jar %v", hc.Timeout, hc.CheckRedirect != nil, hc.Jar != nil)
	}
	for range 3 {
		req, err := http.NewRequest(http.MethodGet, a.url+"/api", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a request of the HTTP client was answered %s: not sent as tok-1", resp.Status)
		}
	}
	if n := h.Discovery().Stats().Requests - before; n != 0 {
		t.Errorf("3 requests of the HTTP client counted %d of discovery's", n)
	}
	if oa := h.OpenAPI(); oa == nil {
		t.Fatal("no OpenAPI client")
	}
	if n := h.Discovery().Stats().Requests - before; n != 0 {
		t.Errorf("the OpenAPI client's build counted %d of discovery's requests", n)
	}
}

// A handle released and then unreachable gives its reference back once:
// the garbage collector does not give it again, which would take the
// client from another handle that holds it.
func TestReleasedHandleReleasedOnce(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(0))
	held, err := r.Acquire(a.config("tok-1"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h, err := r.Acquire(a.config("tok-1"))
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
		h.Release()
	}
	for range 5 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if r.Len() != 1 {
		t.Fatal("handles released and then unreachable released the client another holds")
	}
	held.Release()
	if r.Len() != 0 {
		t.Fatal("the last handle's release left the client held")
	}
	waitWatchStopped(t)
}

// Users that come and go at random, over a few identities: two handles
// held at once of one identity always have one client, every lookup
// answers, and when all are gone nothing runs.
func TestConcurrentUsersComeAndGo(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(0))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for range 40 {
				tok := fmt.Sprintf("tok-%d", rnd.IntN(3))
				h1, err := r.Acquire(a.config(tok))
				if err != nil {
					t.Error(err)
					return
				}
				if rnd.IntN(2) == 0 {
					time.Sleep(time.Duration(rnd.IntN(300)) * time.Microsecond)
				}
				h2, err := r.Acquire(a.config(tok))
				if err != nil {
					t.Error(err)
					return
				}
				if h1.Discovery() != h2.Discovery() {
					t.Errorf("%s: two handles held at once have two clients", tok)
				}
				if _, err := h2.Mapper().RESTMapping(widget); err != nil {
					t.Errorf("%s: %v", tok, err)
				}
				first, second := h1, h2
				if rnd.IntN(2) == 0 {
					first, second = h2, h1
				}
				first.Release()
				if rnd.IntN(3) == 0 {
					runtime.Gosched()
				}
				second.Release()
				if rnd.IntN(4) == 0 {
					second.Release() // again: nothing
				}
			}
		})
	}
	wg.Wait()
	if r.Len() != 0 {
		t.Fatalf("Len = %d after every user left", r.Len())
	}
	waitWatchStopped(t)
}

// A config that cannot be keyed (a Dial function) gets a client of its
// own, which its last release stops even with a linger.
func TestUncomparableConfigIsNotShared(t *testing.T) {
	a := startAuthServer(t)
	r := newRegistry(t)
	cfg := a.config("tok-1")
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return rt }
	h1, err := r.Acquire(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := r.Acquire(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h1.Discovery() == h2.Discovery() {
		t.Fatal("a config with WrapTransport was shared")
	}
	if r.Len() != 0 {
		t.Fatalf("Len = %d: private clients are in the map", r.Len())
	}
	h1.Release()
	h2.Release()
	waitWatchStopped(t)
}

func TestOptions(t *testing.T) {
	for name, opts := range map[string][]shared.Option{
		"twice":                  {shared.WithLinger(0), shared.WithLinger(time.Second)},
		"negative linger":        {shared.WithLinger(-time.Second)},
		"registry's table":       {shared.WithDiscoveryOptions(discoveryWithSurfaces())},
		"registry's 403":         {shared.WithWatchOptions(watch.WithOnForbidden(func() {}))},
		"registry's change func": {shared.WithWatchOptions(watch.WithOnChange(func() {}))},
	} {
		if _, err := shared.New(opts...); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := shared.Default().Acquire(nil); err == nil {
		t.Error("Acquire(nil) succeeded")
	}
	if _, err := shared.Default().Acquire(&rest.Config{Host: "http://x", TLSClientConfig: rest.TLSClientConfig{CAFile: "/nonexistent"}}); err == nil {
		t.Error("Acquire with an unreadable CA file succeeded")
	}
}

func discoveryWithSurfaces() discovery.Option { return discovery.WithSurfaces(discovery.NewSurfaces()) }

// TestOneWatchPerServer: ten identities of one server run one watch
// between them, not one each (leader.go); a second server runs its own.
func TestOneWatchPerServer(t *testing.T) {
	a, b := startAuthServer(t), startAuthServer(t)
	r := newRegistry(t, shared.WithLinger(0))
	var handles []*shared.Handle
	defer func() {
		for _, h := range handles {
			h.Release()
		}
		waitWatchStopped(t)
	}()
	for i := range 10 {
		h, err := r.Acquire(a.config(fmt.Sprintf("tok-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	h, err := r.Acquire(b.config("tok-0"))
	if err != nil {
		t.Fatal(err)
	}
	handles = append(handles, h)
	runs := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "kubeatlas/discovery/watch.(*Watcher).Run(")
	}
	// Wait for both runs to start, then see no more.
	for deadline := time.Now().Add(5 * time.Second); runs() < 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	time.Sleep(50 * time.Millisecond)
	if n := runs(); n != 2 {
		t.Fatalf("%d watches run for eleven identities of two servers, want 2", n)
	}
}
