package shared_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// door is a kube-apiserver's front door over discoverytest: it accepts
// the bearer tokens "tok-*" (who may do anything) and "deny-*" (who may
// not list or watch CRDs and APIServices: 403, as RBAC answers), answers
// 401 to any other, and counts what each token sent: discovery requests
// (/api and /apis) by status, and lists and watches of CRDs and
// APIServices. Counting here, at the server side, is what the issue's
// figures are: what each identity costs the API server.
type door struct {
	srv *discoverytest.Server
	url string

	mu    sync.Mutex
	sent  map[string]*tally
	watch map[string]int // open watches of CRDs and APIServices, by token
}

// tally is what one token sent.
type tally struct {
	discovery, notModified, documents int // /api and /apis: all, 304s, 200s
	watches                           int // lists and watches of CRDs and APIServices
}

func startDoor(t testing.TB, opts ...discoverytest.Option) *door {
	t.Helper()
	srv, err := discoverytest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	d := &door{srv: srv, sent: map[string]*tally{}, watch: map[string]int{}}
	ts := httptest.NewServer(d)
	t.Cleanup(func() {
		srv.Close() // ends open watches, which ts.Close would wait for
		ts.Close()
	})
	d.url = ts.URL
	return d
}

func (d *door) config(token string) *rest.Config {
	return &rest.Config{Host: d.url, BearerToken: token}
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	watched := strings.HasPrefix(r.URL.Path, "/apis/apiextensions.k8s.io/") || strings.HasPrefix(r.URL.Path, "/apis/apiregistration.k8s.io/")
	disc := r.URL.Path == "/api" || r.URL.Path == "/apis"
	switch {
	case !strings.HasPrefix(tok, "tok-") && !strings.HasPrefix(tok, "deny-"):
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	case watched:
		d.mu.Lock()
		d.tally(tok).watches++
		d.mu.Unlock()
		if strings.HasPrefix(tok, "deny-") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"User %q cannot list resource"}`, tok)
			return
		}
		if q := r.URL.Query().Get("watch"); q == "true" || q == "1" {
			d.mu.Lock()
			d.watch[tok]++
			d.mu.Unlock()
			defer func() {
				d.mu.Lock()
				d.watch[tok]--
				d.mu.Unlock()
			}()
		}
		d.srv.ServeHTTP(w, r)
		return
	case !disc:
		d.srv.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	d.srv.ServeHTTP(sw, r)
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tally(tok)
	t.discovery++
	switch sw.code {
	case http.StatusNotModified:
		t.notModified++
	case http.StatusOK:
		t.documents++
	}
}

// tally is token's; d.mu is held.
func (d *door) tally(token string) *tally {
	t := d.sent[token]
	if t == nil {
		t = &tally{}
		d.sent[token] = t
	}
	return t
}

// of is what token sent so far.
func (d *door) of(token string) tally {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.sent[token]; t != nil {
		return *t
	}
	return tally{}
}

// all is what every token sent so far.
func (d *door) all() map[string]tally {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]tally, len(d.sent))
	for k, v := range d.sent {
		out[k] = *v
	}
	return out
}

// watching is the tokens with a watch of CRDs or APIServices open.
func (d *door) watching() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for tok, n := range d.watch {
		if n > 0 {
			out = append(out, tok)
		}
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// watchRunning reports whether a goroutine of discovery/watch runs.
func watchRunning() (bool, string) {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	return strings.Contains(stacks, "kubeatlas/discovery/watch."), stacks
}

func waitWatchStopped(t testing.TB) {
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
