package watch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
)

// A server's answer to one kind of request, in the states shutdown must
// not wait for.
type answer int

const (
	serve     answer = iota // a real answer: empty lists; a watch that stays open
	fail                    // 503 at once
	throttle                // 429 at once
	forbid                  // 403 at once
	hang                    // accept, never send the headers
	stallBody               // send the headers and part of the body, then nothing
)

// behaviour is how a fakeServer answers.
type behaviour struct {
	discovery, list, watch answer
	served                 string // "", "Current" or "Stale"
	discoveryOnce          bool   // discovery is served once, then answered as discovery says
}

// fakeServer is an API server whose discovery, lists and watches answer
// as its behaviour says. Discovery shows an empty cluster, or one that
// serves kubeatlas's discovery API (served), Current or Stale.
type fakeServer struct {
	behaviour
	discoveries atomic.Int64 // /api and /apis requests
	direct      atomic.Int64 // lists and watches of CRDs and APIServices
	servedAPI   atomic.Int64 // lists and watches of the served API
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api" || r.URL.Path == "/apis" {
		a := f.discovery
		if n := f.discoveries.Add(1); f.discoveryOnce && n <= 2 {
			a = serve
		}
		if !f.respond(w, r, a) {
			return
		}
		var items []any
		if r.URL.Path == "/apis" && f.served != "" {
			items = append(items, map[string]any{
				"metadata": map[string]any{"name": "discovery.kubeatlas.io"},
				"versions": []any{map[string]any{"version": "v1alpha1", "freshness": f.served, "resources": []any{map[string]any{
					"resource": "apigroups", "responseKind": map[string]any{"group": "discovery.kubeatlas.io", "version": "v1alpha1", "kind": "APIGroup"},
					"scope": "Cluster", "singularResource": "apigroup", "verbs": []string{"get", "list", "watch"},
				}}}},
			})
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		writeJSON(w, map[string]any{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": items})
		return
	}
	kind, apiVersion := "APIGroup", "discovery.kubeatlas.io/v1alpha1"
	switch {
	case strings.HasPrefix(r.URL.Path, "/apis/apiextensions.k8s.io/"):
		kind, apiVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
		f.direct.Add(1)
	case strings.HasPrefix(r.URL.Path, "/apis/apiregistration.k8s.io/"):
		kind, apiVersion = "APIService", "apiregistration.k8s.io/v1"
		f.direct.Add(1)
	default:
		f.servedAPI.Add(1)
	}
	if q := r.URL.Query().Get("watch"); q != "true" && q != "1" {
		if !f.respond(w, r, f.list) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		writeJSON(w, map[string]any{"kind": kind + "List", "apiVersion": apiVersion, "metadata": map[string]any{"resourceVersion": "1"}, "items": []any{}})
		return
	}
	if !f.respond(w, r, f.watch) {
		return
	}
	// A watch that stays open: the end of the initial events of a
	// watch-list, then nothing until the client goes.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		writeJSON(w, map[string]any{"type": "BOOKMARK", "object": map[string]any{"kind": kind, "apiVersion": apiVersion,
			"metadata": map[string]any{"resourceVersion": "1", "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}}})
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// respond answers r as a says unless a says to serve it (true).
func (f *fakeServer) respond(w http.ResponseWriter, r *http.Request, a answer) bool {
	switch a {
	case serve:
		return true
	case fail, throttle, forbid:
		code := map[answer]int{fail: http.StatusServiceUnavailable, throttle: http.StatusTooManyRequests, forbid: http.StatusForbidden}[a]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		writeJSON(w, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": http.StatusText(code)})
	case hang:
		<-r.Context().Done()
	case stallBody:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	return false
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}

// deadBase is the URL of a server that refuses connections.
func deadBase(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// goroutines returns the IDs of the running goroutines, with their stacks.
func goroutines() map[int]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[int]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, " [")
		if id, err := strconv.Atoi(strings.TrimPrefix(head, "goroutine ")); err == nil {
			out[id] = g
		}
	}
	return out
}

// leftBehind waits up to a second for the goroutines started since before
// (but the test server's) to end, and returns the stacks of those that
// did not.
func leftBehind(before map[int]string) []string {
	var left []string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		left = left[:0]
		for id, g := range goroutines() {
			if _, ok := before[id]; ok || strings.Contains(g, "net/http.(*conn).serve") || strings.Contains(g, "net/http/httptest") {
				continue
			}
			left = append(left, g)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

// shutdownBound is how long after its context ends Run may take to return
// in these tests: far above the 100 ms it is meant to take (a loaded CI
// machine), far below the seconds a wait for the network or a backoff
// takes.
const shutdownBound = 500 * time.Millisecond

// TestRunReturnsPromptlyWhenItsContextEnds: whatever state the server
// leaves Run in (refusing connections, accepting and never answering,
// stalling in the middle of a list or of a watch, failing so that Run
// backs off, watching the served discovery API or waiting for it, a
// refresh of discovery in flight, polling), Run returns within a moment
// of its context ending, and every goroutine it started has ended.
func TestRunReturnsPromptlyWhenItsContextEnds(t *testing.T) {
	const ms = time.Millisecond
	// Where the server is down or throttles, client-go's reflector slept
	// 0.8-1.6 s after the first refused watch-list, and 1.6-3.2 s after the
	// second: at 50ms and at 2s, Run is in those sleeps.
	directly := func(f *fakeServer) bool { return f.direct.Load() > 0 && f.servedAPI.Load() == 0 }
	servedAPI := func(f *fakeServer) bool { return f.servedAPI.Load() > 0 }
	refreshing := func(f *fakeServer) bool { return f.discoveries.Load() > 2 }
	for _, tc := range []struct {
		name   string
		server *behaviour // nil: a server that refuses connections
		opts   []watch.Option
		// after is how long Run runs before its context ends: enough to
		// be in the state named, or in the moments around it.
		after []time.Duration
		// reached says whether the server saw the requests of that state.
		reached func(*fakeServer) bool
	}{
		{name: "dead server", after: []time.Duration{50 * ms, 300 * ms, 1200 * ms, 2000 * ms}},
		{name: "hanging server", server: &behaviour{discovery: hang, list: hang, watch: hang}, after: []time.Duration{300 * ms},
			reached: func(f *fakeServer) bool { return f.discoveries.Load() > 0 }},
		{name: "lists hang", server: &behaviour{list: hang, watch: hang}, after: []time.Duration{300 * ms}, reached: directly},
		{name: "lists fail (backoff)", server: &behaviour{list: fail, watch: fail}, after: []time.Duration{300 * ms, 1200 * ms, 2000 * ms}, reached: directly},
		{name: "lists throttled (backoff)", server: &behaviour{list: throttle, watch: throttle}, after: []time.Duration{50 * ms, 300 * ms, 1200 * ms, 2000 * ms}, reached: directly},
		{name: "mid-list", server: &behaviour{list: stallBody, watch: stallBody}, after: []time.Duration{300 * ms}, reached: directly},
		{name: "mid-watch", server: &behaviour{}, after: []time.Duration{300 * ms}, reached: directly},
		{name: "watch headers hang", server: &behaviour{watch: hang}, after: []time.Duration{300 * ms}, reached: directly},
		{name: "served API mid-watch", server: &behaviour{served: "Current"}, after: []time.Duration{300 * ms}, reached: servedAPI},
		{name: "served API hangs", server: &behaviour{served: "Current", list: hang, watch: hang}, after: []time.Duration{300 * ms}, reached: servedAPI},
		{name: "served API down (backoff)", server: &behaviour{served: "Current", list: fail, watch: fail}, after: []time.Duration{300 * ms, 1200 * ms, 2000 * ms}, reached: servedAPI},
		{name: "served API throttled (backoff)", server: &behaviour{served: "Current", list: throttle, watch: throttle}, after: []time.Duration{50 * ms, 2000 * ms}, reached: servedAPI},
		{name: "waiting for the served API (Stale)", server: &behaviour{served: "Stale"}, after: []time.Duration{1500 * ms}, reached: directly},
		{name: "refresh in flight", server: &behaviour{discovery: hang, discoveryOnce: true}, opts: []watch.Option{watch.WithUpgradePoll(100 * ms)},
			after: []time.Duration{300 * ms}, reached: refreshing},
		{name: "polling, refresh in flight", server: &behaviour{discovery: hang, discoveryOnce: true, list: forbid, watch: forbid},
			opts: []watch.Option{watch.WithFallbackPoll(100 * ms)}, after: []time.Duration{300 * ms}, reached: refreshing},
	} {
		for _, after := range tc.after {
			t.Run(fmt.Sprintf("%s/after %v", tc.name, after), func(t *testing.T) {
				base := deadBase(t)
				var f *fakeServer
				if tc.server != nil {
					f = &fakeServer{behaviour: *tc.server}
					srv := httptest.NewServer(f)
					defer srv.Close()
					base = srv.URL
				}
				tr := http.DefaultTransport.(*http.Transport).Clone()
				defer tr.CloseIdleConnections()
				before := goroutines()
				c, err := discovery.NewForHTTPClient(&http.Client{Transport: tr}, base)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- watch.Run(ctx, c, tc.opts...) }()
				time.Sleep(after)
				if f != nil && !tc.reached(f) {
					t.Errorf("the state under test was not reached: %d discovery requests, %d lists and watches of CRDs and APIServices, %d of the served API",
						f.discoveries.Load(), f.direct.Load(), f.servedAPI.Load())
				}
				cancel()
				ended := time.Now()
				var took time.Duration
				select {
				case err := <-done:
					took = time.Since(ended)
					if err != nil {
						t.Errorf("Run returned %v, want nil", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("Run did not return within 30s of its context ending")
				}
				t.Logf("Run returned %v after its context ended", took)
				if took > shutdownBound {
					t.Errorf("Run returned %v after its context ended, want within %v (the aim: 100ms)", took, shutdownBound)
				}
				tr.CloseIdleConnections()
				if left := leftBehind(before); len(left) > 0 {
					slices.Sort(left)
					t.Errorf("%d goroutines left running after Run returned:\n%s", len(left), strings.Join(left, "\n\n"))
				}
			})
		}
	}
}
