package watch_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
)

// TestOptionGivenTwice: an option given twice (which would be silently
// last-wins) is New's error, naming it.
func TestOptionGivenTwice(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "https://c.invalid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.New(c, watch.WithServedAPI(false), watch.WithServedAPI(true)); err == nil || !strings.Contains(err.Error(), "WithServedAPI given twice") {
		t.Errorf("twice: %v, want an error naming it", err)
	}
	if _, err := watch.New(c, watch.WithServedAPI(false), watch.WithDebounce(time.Second)); err != nil {
		t.Errorf("two options once each: %v", err)
	}
}

// TestOnForbidden: WithOnForbidden's func is told when the credentials
// may not list or watch CRDs and APIServices, and Run polls then as
// without it; a server that lets it watch tells it nothing. A nil func is
// New's error.
func TestOnForbidden(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "https://c.invalid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.New(c, watch.WithOnForbidden(nil)); err == nil {
		t.Error("a nil forbidden func was accepted")
	}
	for _, tc := range []struct {
		name      string
		server    behaviour
		forbidden bool
	}{
		{"forbidden", behaviour{list: forbid, watch: forbid}, true},
		{"allowed", behaviour{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{behaviour: tc.server}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c, err := discovery.NewForHTTPClient(nil, srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			told := make(chan struct{}, 8)
			w, err := watch.New(c, watch.WithFallbackPoll(50*time.Millisecond),
				watch.WithOnForbidden(func() { told <- struct{}{} }))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = w.Run(ctx) }()
			defer func() { cancel(); <-done }()
			select {
			case <-told:
				if !tc.forbidden {
					t.Fatal("told of a 403 by a server that lets it watch")
				}
				// Polling, as without the option: discovery is read again.
				before := f.discoveries.Load()
				for deadline := time.Now().Add(5 * time.Second); f.discoveries.Load() < before+4; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("no poll after the 403")
					}
				}
			case <-time.After(time.Second):
				if tc.forbidden {
					t.Fatal("not told of the 403 within a second")
				}
				if !w.Stats().Watching {
					t.Fatal("not watching a server that lets it")
				}
			}
		})
	}
}
