package main

import (
	"context"
	"strings"
	"testing"
)

// A bad flag is an error, not a crash or a server.
func TestBadFlag(t *testing.T) {
	err := run(context.Background(), []string{"--no-such-flag"})
	if err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("got %v", err)
	}
}
