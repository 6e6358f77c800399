package main

import (
	"bytes"
	"context"
	"net"
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

// TestStopsPromptlyWhenTheServerIsDown: with --for and a server that
// refuses connections, the command stops when its time is up, not seconds
// later (client-go's reflector slept 0.8 s and more between refused
// watches, and Run waited for it: --for 8s ran 10-17 s).
func TestStopsPromptlyWhenTheServerIsDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	const runFor, bound = 200 * time.Millisecond, 500 * time.Millisecond
	var out, errOut syncBuffer
	start := time.Now()
	err = run(context.Background(), []string{"--server", dead, "--for", runFor.String()}, &out, &errOut)
	took := time.Since(start)
	t.Logf("--for %v ran %v", runFor, took)
	if err != nil {
		t.Fatal(err)
	}
	if took > runFor+bound {
		t.Errorf("--for %v ran %v, want within %v of it; stdout:\n%s", runFor, took, bound, out.String())
	}
	if m := regexp.MustCompile(`(\d+) watch requests`).FindStringSubmatch(out.String()); m == nil || m[1] == "0" {
		t.Errorf("no watch request was tried before the time was up:\n%s", out.String())
	}
}
