package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// A bad flag is an error, not a crash or a server.
func TestBadFlag(t *testing.T) {
	err := run(context.Background(), []string{"--no-such-flag"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("got %v", err)
	}
}

// TestHelp: --help fits a screen and begins with the flags a user runs it
// with (it was 110 lines, --local on line 89, and exited 1); --help-all
// lists every flag.
func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) > 30 {
		t.Errorf("--help is %d lines", len(lines))
	}
	local := slicesIndex(lines, "--local ")
	if local < 0 || local > 10 || slicesIndex(lines, "--kubeconfig ") < 0 || slicesIndex(lines, "--help-all") < 0 {
		t.Errorf("--help:\n%s", out.String())
	}
	if slicesIndex(lines, "--audit-log-path") >= 0 {
		t.Errorf("--help lists the generic flags:\n%s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"--help-all"}, &out); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("--help-all: %v", err)
	}
	for _, f := range []string{"--local ", "--audit-log-path", "--feature-gates", "--tls-cert-file"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("--help-all has no %s", f)
		}
	}
}

// slicesIndex is the index of the first line containing s, or -1.
func slicesIndex(lines []string, s string) int {
	for i, l := range lines {
		if strings.Contains(l, s) {
			return i
		}
	}
	return -1
}
