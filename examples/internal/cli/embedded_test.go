package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// childEnv makes this test binary play a starting fake-apiserver (see
// TestMain): "slow" builds for a while, printing what `go run -v` prints,
// then serves; "broken" fails to compile; "silent" exits at once.
const childEnv = "CLI_TEST_FAKE_APISERVER"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "slow":
		fmt.Fprintln(os.Stderr, "go: downloading k8s.io/apiserver v0.37.2")
		for _, p := range []string{"k8s.io/apimachinery/pkg/runtime", "k8s.io/apiserver/pkg/endpoints/discovery/aggregated", "github.com/kubeatlas/kubeatlas/examples/fake-apiserver"} {
			time.Sleep(300 * time.Millisecond)
			fmt.Fprintln(os.Stderr, p)
		}
		fmt.Println("http://127.0.0.1:1")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until stdin closes
		os.Exit(0)
	case "broken":
		fmt.Fprintln(os.Stderr, "go: downloading k8s.io/apiserver v0.37.2")
		fmt.Fprintln(os.Stderr, "k8s.io/apimachinery/pkg/runtime")
		fmt.Fprintln(os.Stderr, "# github.com/kubeatlas/kubeatlas/examples/fake-apiserver")
		fmt.Fprintln(os.Stderr, "examples/fake-apiserver/main.go:3:1: syntax error: non-declaration statement outside function body")
		os.Exit(1)
	case "silent":
		os.Exit(0)
	}
}

func child(t *testing.T, mode string) (*exec.Cmd, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	t.Cleanup(cancel)
	return cmd, cancel
}

// syncBuffer is a strings.Builder safe for the writes of startServer's
// progress while the test reads it afterwards.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStartServerWaitsForABuild: a server that builds for longer than the
// progress interval is waited for, and the user is told how far the build
// got while it runs (the first command used to give up after a fixed five
// minutes, saying only "did not start").
func TestStartServerWaitsForABuild(t *testing.T) {
	cmd, cancel := child(t, "slow")
	var stderr syncBuffer
	url, stop, err := startServer(cmd, cancel, true, &stderr, progressTimes{first: 100 * time.Millisecond, every: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if url != "http://127.0.0.1:1" {
		t.Errorf("url %q", url)
	}
	said := stderr.String()
	if !strings.Contains(said, "Starting the embedded fake cluster: building examples/fake-apiserver") ||
		!strings.Contains(said, "modules downloaded 1") {
		t.Errorf("progress on stderr:\n%s", said)
	}
	if strings.Contains(said, "k8s.io/apimachinery") {
		t.Errorf("the build's package lines were copied out, not counted:\n%s", said)
	}
}

// TestStartServerFailure: a build that fails says what failed (the
// compiler's lines, the command, its exit status), not the stale
// "go: downloading" lines before it.
func TestStartServerFailure(t *testing.T) {
	for _, c := range []struct {
		mode string
		want []string
	}{
		{"broken", []string{"examples/fake-apiserver did not start", "exit status 1", "packages compiled 1", "syntax error: non-declaration statement", "having printed nothing"}},
		{"silent", []string{"did not start", "exit status 0", "having printed nothing"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			cmd, cancel := child(t, c.mode)
			_, _, err := startServer(cmd, cancel, true, &syncBuffer{}, progressTimes{first: time.Hour, every: time.Hour})
			if err == nil {
				t.Fatal("started")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "go: downloading") || strings.Contains(err.Error(), "k8s.io/apimachinery/pkg/runtime") {
				t.Errorf("error %q repeats the build's progress lines", err)
			}
		})
	}
}

// TestConfigEmbeddedFailure: with no kubeconfig, where the embedded cluster
// cannot be started (no fake-apiserver to run for the child; a failing
// StartEmbedded in process), Config's error says there is no kubeconfig,
// why the cluster did not start, and what to give instead.
func TestConfigEmbeddedFailure(t *testing.T) {
	testenv.NoKubeconfig(t)
	t.Setenv(FakeAPIServerEnv, filepath.Join(t.TempDir(), "missing"))
	for name, c := range map[string]Connection{
		"child":      {},
		"in process": {StartEmbedded: func(io.Writer) (string, func(), error) { return "", nil, errors.New("no port for you") }},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := c.Config(io.Discard)
			if err == nil || !strings.Contains(err.Error(), "no kubeconfig found") || !strings.Contains(err.Error(), "--kubeconfig") {
				t.Errorf("error %v", err)
			}
			if name == "in process" && !strings.Contains(err.Error(), "no port for you") {
				t.Errorf("error %v does not say why", err)
			}
		})
	}
}

// TestConfigStartsEmbeddedInProcess: a Connection with StartEmbedded uses
// it, and no child (there is none to run here), and says it is embedded.
func TestConfigStartsEmbeddedInProcess(t *testing.T) {
	testenv.NoKubeconfig(t)
	t.Setenv(FakeAPIServerEnv, filepath.Join(t.TempDir(), "missing"))
	stopped := false
	c := Connection{StartEmbedded: func(io.Writer) (string, func(), error) {
		return "http://127.0.0.1:1", func() { stopped = true }, nil
	}}
	var stderr bytes.Buffer
	cfg, stop, embedded, err := c.Config(&stderr)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if cfg.Host != "http://127.0.0.1:1" || !embedded || !stopped ||
		!strings.Contains(stderr.String(), "No kubeconfig found: using an embedded fake cluster ("+DefaultEmbedded+") at http://127.0.0.1:1\n") {
		t.Errorf("host %q, embedded %v, stopped %v, stderr %q", cfg.Host, embedded, stopped, stderr.String())
	}
	// A command whose embedded cluster is more than one server says what
	// it is (consistency's banner said one v1.36.3 server where it ran a
	// v1.36.3 and v1.37.1 pair).
	c.Embedded = "two servers"
	stderr.Reset()
	if _, stop, _, err := c.Config(&stderr); err != nil {
		t.Fatal(err)
	} else {
		stop()
	}
	if !strings.Contains(stderr.String(), "embedded fake cluster (two servers) at") {
		t.Errorf("with Embedded set, stderr %q", stderr.String())
	}
}
