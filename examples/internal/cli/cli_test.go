package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestStatus: --help ends a command with status 0 and no error line, as
// kubectl's; an error with status 1 and one "error:" line.
func TestStatus(t *testing.T) {
	fs := NewFlagSet("cmd")
	fs.Bool("x", false, "a flag")
	var usage bytes.Buffer
	helpErr := Parse(fs, []string{"--help"}, &usage)
	for _, c := range []struct {
		err    error
		status int
		stderr string
	}{
		{nil, 0, ""},
		{helpErr, 0, ""},
		{errors.New("boom"), 1, "error: boom\n"},
		{fmt.Errorf("discovery: GET /apis: %w", context.DeadlineExceeded), 1,
			"error: the server did not answer in time (" + timeLimits + "): discovery: GET /apis: context deadline exceeded\n"},
	} {
		var stderr bytes.Buffer
		if got := Status(c.err, &stderr); got != c.status || stderr.String() != c.stderr {
			t.Errorf("Status(%v) = %d, %q; want %d, %q", c.err, got, stderr.String(), c.status, c.stderr)
		}
	}
	if !bytes.Contains(usage.Bytes(), []byte("--x")) {
		t.Errorf("--help printed %q, want the flags", usage.String())
	}
}
