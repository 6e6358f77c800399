package discoverytest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// TestStartInProcess: inside a synctest bubble the in-process server
// answers through its client; a Fault.Latency, a request's deadline and a
// watch's bookmarks run on the bubble's fake clock; a handler ends with its
// request; and everything StartInProcess started ends with the test
// (synctest.Test fails on a goroutine left behind).
func TestStartInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := discoverytest.StartInProcess(t, discoverytest.WithCRDs(1, 1),
			discoverytest.WithBookmarkInterval(time.Second))
		if base != discoverytest.InProcessURL {
			t.Errorf("base URL %q", base)
		}
		if resp, body := do(t, hc, http.MethodGet, base+"/apis", "Accept", acceptV2JSON); resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("/apis: %d, %d bytes", resp.StatusCode, len(body))
		}

		// A deadline shorter than the latency: the client gives up at its
		// deadline, and the handler ends then, not a minute later.
		srv.ResetRequests()
		srv.InjectFault("/apis", discoverytest.Fault{Latency: time.Minute, Times: 1})
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/apis", nil)
		if _, err := hc.Do(req); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a minute of latency against a 10s deadline: %v", err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("the client gave up after %v of bubble time, want 10s", d)
		}
		synctest.Wait() // the handler has seen its request end, and returned
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests logged once the client gave up, want the ended /apis", n)
		}

		// The latency is waited out on the fake clock.
		srv.InjectFault("/apis", discoverytest.Fault{Latency: time.Minute, Times: 1})
		start = time.Now()
		if resp, _ := do(t, hc, http.MethodGet, base+"/apis", "Accept", acceptV2JSON); resp.StatusCode != http.StatusOK {
			t.Errorf("/apis after its latency: %d", resp.StatusCode)
		}
		if d := time.Since(start); d != time.Minute {
			t.Errorf("a minute of latency took %v of bubble time", d)
		}

		// A watch streams through the pipe; its bookmark comes after the
		// bookmark interval of bubble time.
		req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, base+crdPath+"?watch=true&allowWatchBookmarks=true", nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		next := func() string {
			t.Helper()
			if !sc.Scan() {
				t.Fatalf("the watch ended: %v", sc.Err())
			}
			var l watchLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("watch line %q: %v", sc.Text(), err)
			}
			return l.Type
		}
		if typ := next(); typ != "ADDED" {
			t.Fatalf("first event %s, want the CRD's ADDED", typ)
		}
		start = time.Now()
		if typ := next(); typ != "BOOKMARK" {
			t.Fatalf("event %s, want a bookmark", typ)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("bookmark after %v of bubble time, want the 1s interval", d)
		}
	})
}

// TestStartInProcessSticky: each in-process connection has an address of
// its own, so Sticky routing pins a connection, not every connection, to
// a backend.
func TestStartInProcessSticky(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := discoverytest.StartInProcess(t, discoverytest.WithBackends(2, discoverytest.Sticky))
		served := map[string]bool{}
		for range 8 {
			srv.ResetRequests()
			for range 3 {
				do(t, hc, http.MethodGet, base+"/apis", "Accept", acceptV2JSON)
			}
			reqs := srv.Requests()
			for _, r := range reqs {
				if r.Backend != reqs[0].Backend {
					t.Fatalf("one connection was served by %s and %s", reqs[0].Backend, r.Backend)
				}
			}
			served[reqs[0].Backend] = true
			hc.CloseIdleConnections() // the next round dials anew
		}
		if len(served) != 2 {
			t.Errorf("8 connections served by %v, want both backends", served)
		}
	})
}
