package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// syncBuffer is written by the command and read by the test meanwhile.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestPrintsChangesAndCost: a CRD created and deleted while the command
// runs is printed as added, then removed; the summary says what it cost.
func TestPrintsChangesAndCost(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithDiscoveryDelay(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--server", base, "--upgrade-poll", "1h"}, &out, &errOut) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("timed out waiting for %s; stdout:\n%s\nstderr:\n%s", what, out.String(), errOut.String())
			}
		}
	}
	waitFor("the first snapshot", func() bool { return strings.Contains(out.String(), "watching") })
	// The watch is up once the server has served a watch request.
	waitFor("the watches", func() bool {
		n := 0
		for _, r := range srv.Requests() {
			if r.Watch {
				n++
			}
		}
		return n >= 2
	})
	if err := srv.AddCRD(discoverytest.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}); err != nil {
		t.Fatal(err)
	}
	waitFor("the added CRD", func() bool { return strings.Contains(out.String(), "+   late.example.com/v1 lates") })
	if err := srv.RemoveCRD("late.example.com", "lates"); err != nil {
		t.Fatal(err)
	}
	waitFor("the removed CRD", func() bool { return strings.Contains(out.String(), "-   late.example.com/v1 lates") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	summary := regexp.MustCompile(`watching: (\d+) watch events \(\d+ could change discovery\), \d+ watch requests, (\d+) discovery requests`)
	if m := summary.FindStringSubmatch(out.String()); m == nil || m[1] == "0" {
		t.Errorf("no summary with watch events in:\n%s", out.String())
	}
}
