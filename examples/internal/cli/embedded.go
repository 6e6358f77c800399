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
	"runtime"
	"strings"
	"sync"
	"time"
)

// The embedded fake cluster is examples/fake-apiserver run as a child
// process rather than linked in: the fake server is built on the real
// k8s.io/apiserver handlers, which would otherwise double the size of every
// command and the work its start-up does, for users who never need it.
// The commands stay what they are measured as: client-go's
// apimachinery plus kubeatlas.

// FakeAPIServerEnv names a fake-apiserver binary to run for the embedded
// cluster, instead of looking for one.
const FakeAPIServerEnv = "KUBEATLAS_FAKE_APISERVER"

const fakeAPIServerPkg = "github.com/kubeatlas/kubeatlas/examples/fake-apiserver"

// fakeAPIServerCommand is how to start the fake server, first found of:
// $KUBEATLAS_FAKE_APISERVER; fake-apiserver beside this command's
// executable (where `go install ./examples/...` puts both); `go run` of
// its package, which works where this command was started with `go run`
// from the module (the README's first command) and which the go command
// caches after the first build.
func fakeAPIServerCommand(ctx context.Context, args []string) (*exec.Cmd, error) {
	if bin := os.Getenv(FakeAPIServerEnv); bin != "" {
		return exec.CommandContext(ctx, bin, args...), nil
	}
	if self, err := os.Executable(); err == nil {
		name := "fake-apiserver"
		if runtime.GOOS == "windows" {
			name += ".exe"
		}
		sibling := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(sibling); err == nil && fi.Mode().IsRegular() {
			return exec.CommandContext(ctx, sibling, args...), nil
		}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("no fake-apiserver beside this command, no $%s and no go command to build one: install it with `go install %s@latest`", FakeAPIServerEnv, fakeAPIServerPkg)
	}
	return exec.CommandContext(ctx, gobin, append([]string{"run", fakeAPIServerPkg}, args...)...), nil
}

// startEmbedded starts the fake server with args and returns its base URL
// and a function that stops it. The server exits when its stdin closes, so
// it also goes when this process dies without calling stop.
func startEmbedded(args []string, stderr io.Writer) (url string, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := fakeAPIServerCommand(ctx, append([]string{"--exit-when-stdin-closes"}, args...))
	if err != nil {
		cancel()
		return "", nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return "", nil, err
	}
	var errOut tailBuffer // what it said, should it fail to start
	cmd.Stderr = &errOut
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		return "", nil, fmt.Errorf("starting %s: %w", cmd, err)
	}
	waited := make(chan error, 1)
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		first <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
		waited <- cmd.Wait()
	}()
	stop = func() {
		stdin.Close() // it shuts down on its own
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			cancel() // kills it
			<-waited
		}
		cancel()
	}
	// A first `go run` compiles the server (with k8s.io/apiserver: a
	// couple of minutes on an empty build cache): say so, and that it is
	// still going, rather than sit silent.
	began := time.Now()
	patience := time.NewTimer(2 * time.Second)
	defer patience.Stop()
	giveUp := time.After(5 * time.Minute)
wait:
	for said := false; ; {
		select {
		case url = <-first:
			break wait
		case <-patience.C:
			if !said {
				fmt.Fprintln(stderr, "Starting the embedded fake cluster (the first run builds examples/fake-apiserver, which can take a few minutes; later runs start in a second) ...")
				said = true
			} else {
				fmt.Fprintf(stderr, "... still building examples/fake-apiserver (%s)\n", time.Since(began).Round(time.Second))
			}
			patience.Reset(15 * time.Second)
		case <-giveUp:
			break wait
		}
	}
	if !strings.HasPrefix(url, "http://") {
		stop()
		return "", nil, fmt.Errorf("%s did not start: %s", cmd, bytes.TrimSpace(errOut.Bytes()))
	}
	return url, stop, nil
}

// The embedded fleet: EmbeddedFleetClusters clusters on EmbeddedFleetSurfaces
// API surfaces, each the discovery of a real v1.36.3 server plus 200 CRDs,
// spread over 20, 21 or 22 groups (so a CRD's group depends on its surface).
const (
	EmbeddedFleetClusters = 20
	EmbeddedFleetSurfaces = 3
)

// StartEmbeddedFleet starts examples/fake-apiserver serving the embedded
// fleet, each cluster under its own path as a fleet proxy serves them, and
// returns a kubeconfig file with a context per cluster, the server's base
// URL, and a function that stops the server and removes the file.
func StartEmbeddedFleet(stderr io.Writer) (kubeconfig, url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "kubeatlas-fleet-")
	if err != nil {
		return "", "", nil, fmt.Errorf("%w: %w", errNoEmbeddedFleet, err)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	url, stopServer, err := startEmbedded([]string{
		"--fleet", fmt.Sprint(EmbeddedFleetClusters), "--surfaces", fmt.Sprint(EmbeddedFleetSurfaces),
		"--crds", "200", "--groups", "20", "--write-kubeconfig", kubeconfig,
	}, stderr)
	if err != nil {
		os.RemoveAll(dir)
		return "", "", nil, fmt.Errorf("%w: %w (or give --kubeconfig)", errNoEmbeddedFleet, err)
	}
	return kubeconfig, url, func() {
		stopServer()
		os.RemoveAll(dir)
	}, nil
}

var errNoEmbeddedFleet = errors.New("no kubeconfig found and the embedded fake fleet could not be started")

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - 4096; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.b)
}

var errNoEmbedded = errors.New("no kubeconfig found and the embedded fake cluster could not be started")
