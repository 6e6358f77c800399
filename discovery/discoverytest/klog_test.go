package discoverytest_test

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// TestQuietByDefault: a process that builds and changes a Server prints
// none of the real handlers' "Adding GroupVersion" lines (about 28 a start
// used to go to its stderr), while its own klog lines still reach stderr
// as klog prints them. In a child process, as klog's state is the
// process's.
func TestQuietByDefault(t *testing.T) {
	if os.Getenv("DISCOVERYTEST_QUIET_CHILD") != "" {
		srv, err := discoverytest.NewServer(discoverytest.WithCRDs(10, 2))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.AddCRD(discoverytest.SyntheticCRDs(11, 3)[10]); err != nil {
			t.Fatal(err)
		}
		klog.Info("the program's own line")
		klog.Flush()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestQuietByDefault$")
	cmd.Env = append(os.Environ(), "DISCOVERYTEST_QUIET_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Adding GroupVersion") {
		t.Errorf("the handlers' lines reached stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "] the program's own line") {
		t.Errorf("the program's own klog line is gone; stderr:\n%s", stderr.String())
	}
}

// TestWithLogger: the real handlers' lines go to the logger of the Server
// whose start or change logged them, and only to it.
func TestWithLogger(t *testing.T) {
	var logged bytes.Buffer
	l := slog.New(slog.NewTextHandler(&logged, nil))
	srv, err := discoverytest.NewServer(discoverytest.WithLogger(l))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(logged.String(), "Adding GroupVersion")
	if lines < 20 || !strings.Contains(logged.String(), `msg="Adding GroupVersion apps v1 to ResourceManager" source=handler.go:`) {
		t.Fatalf("%d lines logged:\n%s", lines, logged.String())
	}
	if _, err := discoverytest.NewServer(discoverytest.WithCRDs(10, 2)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logged.String(), "Adding GroupVersion"); n != lines {
		t.Errorf("another server's start logged %d lines here", n-lines)
	}
	if err := srv.AddCRD(discoverytest.SyntheticCRDs(1, 1)[0]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "Adding GroupVersion g000.stress.example.com v1") {
		t.Errorf("a change's lines are not logged:\n%s", logged.String())
	}
}
