//go:build filetrace

package withfake_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/internal/filetrace/rec"
)

// calibrated is the rule by which c7f0643's cold start gives issue 34's
// figures (10 files, 11 returns to a file left, fetch.go entered 7 times):
// Refresh's caller and the run it starts, not the run's helper goroutine
// (fetch's /api request); files counted without discovery/surface; a
// return is a function's return to a caller in another file, an entry a
// function's (literals or not makes no difference). See
// docs/performance.md.
var calibrated = rec.Rule{Lits: true, Caller: true}

// TestFileTrace prints the files one Refresh runs through, in three cases.
// It means something only in the instrumented build that
// internal/filetrace makes (go run ./internal/filetrace), which records
// every function entry of discovery, discovery/surface and internal/httpx:
// the build tag keeps it out of every other run.
func TestFileTrace(t *testing.T) {
	crd := discoverytest.CRD{Group: "filetrace.example.com", Versions: []string{"v1"}, Kind: "Widget"}
	cases := []struct {
		name   string
		before func(t *testing.T, srv *discoverytest.Server, c *discovery.Client)
		check  func(t *testing.T, s *discovery.Snapshot, st discovery.Stats)
	}{{
		name:   "cold start (aggregated, protobuf)",
		before: func(*testing.T, *discoverytest.Server, *discovery.Client) {},
		check: func(t *testing.T, s *discovery.Snapshot, st discovery.Stats) {
			if core, named := s.Sources(); !core.Protobuf || !named.Protobuf || st.Requests != 2 {
				t.Errorf("cold start read %v and %v in %d requests, want aggregated protobuf in 2", core, named, st.Requests)
			}
		},
	}, {
		name:   "nothing changed (two 304s)",
		before: refreshed,
		check: func(t *testing.T, _ *discovery.Snapshot, st discovery.Stats) {
			if st.NotModified != 2 || st.Requests != 2 {
				t.Errorf("got %d 304s of %d requests, want 2 of 2", st.NotModified, st.Requests)
			}
		},
	}, {
		name: "one CRD added",
		before: func(t *testing.T, srv *discoverytest.Server, c *discovery.Client) {
			refreshed(t, srv, c)
			if err := srv.AddCRD(crd); err != nil {
				t.Fatal(err)
			}
		},
		check: func(t *testing.T, s *discovery.Snapshot, _ discovery.Stats) {
			if _, ok := s.Version(schema.GroupVersion{Group: crd.Group, Version: "v1"}); !ok {
				t.Errorf("the refresh did not see %s/v1", crd.Group)
			}
		},
	}}
	for _, tc := range cases {
		srv, hc, base := discoverytest.StartInProcess(t)
		c, err := discovery.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		tc.before(t, srv, c)
		before := c.Stats()
		rec.Start()
		s, err := c.Refresh(context.Background())
		r := rec.Stop()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(r.Events) == 0 {
			t.Fatal("nothing recorded: run this test with go run ./internal/filetrace, which instruments discovery and internal/httpx")
		}
		after := c.Stats()
		tc.check(t, s, discovery.Stats{Requests: after.Requests - before.Requests, NotModified: after.NotModified - before.NotModified})
		report(tc.name, r)
	}
}

func refreshed(t *testing.T, _ *discoverytest.Server, c *discovery.Client) {
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func report(name string, r rec.Recording) {
	counted := func(f string) bool { return !strings.HasPrefix(f, "discovery/surface/") }
	fmt.Printf("\n=== %s (%d goroutines; %d entries on others, not counted)\n", name, len(r.Parent)+1, r.Others)
	whole := rec.Rule{Lits: true, Caller: true, Helpers: true}
	for _, rule := range []rec.Rule{calibrated, whole} {
		rule.Files = counted
		fmt.Printf("rule %v: %v", rule, r.Walk(rule))
	}
	whole.Files = func(string) bool { return true }
	w := r.Walk(whole)
	surface := 0
	for f, n := range w.Calls {
		if !counted(f) {
			surface += n
		}
	}
	fmt.Printf("discovery/surface too, by rule %v: files %d, returns %d; %d function entries in discovery/surface\n", whole, w.Files, w.Returns, surface)
	if os.Getenv("FILETRACE_EVENTS") != "" {
		for _, e := range r.Events {
			fmt.Printf("event %d %s %s %v %v\n", e.G, e.File, e.Func, e.Lit, e.Enter)
		}
	}
	if os.Getenv("FILETRACE_ALL") == "" {
		return
	}
	fmt.Println("every rule (discovery and internal/httpx): files, returns, revisits, fetch.go function entries")
	for i := range 8 {
		rule := rec.Rule{Lits: i&1 != 0, Caller: i&2 != 0, Helpers: i&4 != 0, Files: counted}
		w := r.Walk(rule)
		fmt.Printf("  %-28v %3d %3d %3d %3d\n", rule, w.Files, w.Returns, w.Revisits, w.Calls["discovery/fetch.go"])
	}
}
