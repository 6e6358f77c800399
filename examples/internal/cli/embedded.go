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
	"strconv"
	"strings"
	"sync"
	"time"
)

// There are two embedded fake clusters, chosen per command by what it
// reads.
//
// api-resources, which reads discovery only, serves
// examples/internal/lightcluster in its own process (Connection's
// StartEmbedded): internal/docserver, the core module's light fake, with
// the same /api, /apis and /version as examples/fake-apiserver --crds 200
// --groups 20, byte for byte under the same ETags. Linking it costs 83
// packages more than the command (412 instead of 329, mostly docserver's
// OpenAPI v3: kube-openapi's handler3, gnostic, google.golang.org/protobuf)
// and 6 MB of binary (22.7 MB instead of 16.3 MB); it spares the README's
// first command a second go command compiling 571 packages more (900 in
// all). Cold (empty GOCACHE and GOMODCACHE, 2 busy cores), that first run
// measured 743 s with the child and 243 s without it (load 9-18): 105
// CPU-seconds, so about a minute on 2 idle cores (an estimate), of which
// the light fake's 83 packages take about a fifth.
//
// explain (schemas with fields to walk: discoverytest's synthetic ones,
// shaped like the built-in types' (a spec with replicas, selector, a pod
// template down to containers' image, and setting00 to setting23), not
// their real definitions or descriptions; docserver's kinds have an empty
// spec), watch-apis (a demo CRD created and deleted),
// consistency (several backends) and fleet (a fleet) need what only the
// real-handler fake serves: for them it is examples/fake-apiserver run as a
// child process rather than linked in. It is built on the real
// k8s.io/apiserver handlers (500 to 550 packages more than those commands
// link; its binary is 67 MB), which would otherwise grow every such command
// fourfold and add their package initialisation to every start, for users
// who never need it. Linking it in would not make a first run quicker
// either: the same packages are compiled, only in one go command instead
// of two. What the child gives that a linked-in server could not is
// progress: `go run -v` names each package it compiles, which startServer
// counts and shows while it waits.

// FakeAPIServerEnv names a fake-apiserver binary to run for the embedded
// cluster, instead of looking for one.
const FakeAPIServerEnv = "KUBEATLAS_FAKE_APISERVER"

const fakeAPIServerPkg = "github.com/kubeatlas/kubeatlas/examples/fake-apiserver"

// fakeAPIServerCommand is how to start the fake server, first found of:
// $KUBEATLAS_FAKE_APISERVER; fake-apiserver beside this command's
// executable (where `go install ./examples/...` puts both); `go run` of
// its package, which works where this command was started with `go run`
// from the module (the README's first command) and which the go command
// caches after the first build. builds reports the last: the command
// compiles before it serves, and says what it compiles (-v) so that its
// progress can be shown.
func fakeAPIServerCommand(ctx context.Context, args []string) (cmd *exec.Cmd, builds bool, err error) {
	if bin := os.Getenv(FakeAPIServerEnv); bin != "" {
		return exec.CommandContext(ctx, bin, args...), false, nil
	}
	if self, err := os.Executable(); err == nil {
		name := "fake-apiserver"
		if runtime.GOOS == "windows" {
			name += ".exe"
		}
		sibling := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(sibling); err == nil && fi.Mode().IsRegular() {
			return exec.CommandContext(ctx, sibling, args...), false, nil
		}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, false, fmt.Errorf("no fake-apiserver beside this command, no $%s and no go command to build one: install it with `go install %s@latest`", FakeAPIServerEnv, fakeAPIServerPkg)
	}
	return exec.CommandContext(ctx, gobin, append([]string{"run", "-v", fakeAPIServerPkg}, args...)...), true, nil
}

// startEmbedded starts the fake server with args and returns its base URL
// and a function that stops it. The server exits when its stdin closes, so
// it also goes when this process dies without calling stop.
func startEmbedded(args []string, stderr io.Writer) (url string, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd, builds, err := fakeAPIServerCommand(ctx, append([]string{"--exit-when-stdin-closes"}, args...))
	if err != nil {
		cancel()
		return "", nil, err
	}
	return startServer(cmd, cancel, builds, stderr, progressTimes{first: 2 * time.Second, every: 15 * time.Second})
}

// progressTimes: when startServer first says that the server is starting,
// and how often it then says how far it got.
type progressTimes struct{ first, every time.Duration }

// startServer runs cmd (made with a context that cancel ends) until it
// prints its URL on stdout, or exits. It waits as long as the command runs:
// a first `go run` compiles the server (with k8s.io/apiserver: several
// hundred packages, minutes on an empty build cache and busy cores), and a
// build that is still working is never given up on; while it waits it says,
// on stderr, how far the build got. A command that exits first is a
// failure that says what it printed, without the build's progress lines.
func startServer(cmd *exec.Cmd, cancel func(), builds bool, stderr io.Writer, times progressTimes) (url string, stop func(), err error) {
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
	out := &childStderr{}
	cmd.Stderr = out
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
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
	what := "examples/fake-apiserver"
	patience := time.NewTimer(times.first)
	defer patience.Stop()
	for said := false; url == ""; {
		select {
		case line := <-first:
			url = line
			if line == "" {
				url = "-" // stdout closed: it exited, or is about to
			}
		case <-patience.C:
			downloaded, compiled := out.progress()
			switch {
			case !said && builds:
				fmt.Fprintf(stderr, "Starting the embedded fake cluster: building %s (several hundred packages; minutes on an empty build cache, a second once built) ...\n", what)
			case !said:
				fmt.Fprintf(stderr, "Starting the embedded fake cluster (%s) ...\n", cmd.Path)
			case builds:
				fmt.Fprintf(stderr, "... still building %s: packages compiled %d, modules downloaded %d (%s)\n", what, compiled, downloaded, time.Since(began).Round(time.Second))
			default:
				fmt.Fprintf(stderr, "... still starting %s (%s)\n", what, time.Since(began).Round(time.Second))
			}
			said = true
			patience.Reset(times.every)
		}
	}
	if !strings.HasPrefix(url, "http://") {
		printed := "nothing"
		if url != "-" {
			printed = strconv.Quote(url)
			cancel() // not the fake server this command knows: end it
		}
		err := <-waited
		if err == nil {
			err = errors.New("exit status 0")
		}
		cancel()
		progress := ""
		if _, compiled := out.progress(); builds {
			progress = fmt.Sprintf(", packages compiled %d", compiled)
		}
		return "", nil, fmt.Errorf("%s did not start: `%s` ended (%v) after %s%s, having printed %s on stdout instead of its URL; its stderr: %s",
			what, strings.Join(cmd.Args, " "), err, time.Since(began).Round(time.Second), progress, printed, bytes.TrimSpace(out.Bytes()))
	}
	// Only now, serving: a child that exits closes its stdout before its
	// last stderr lines are read, and those are still the build's, to
	// count rather than keep.
	out.started()
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

// childStderr is what a starting fake-apiserver writes to stderr: the go
// command's progress lines while it builds ("go: downloading ...", and the
// path of each package it compiles, for -v) are counted; every other line
// is kept, the last 4 KiB, to say what went wrong should it fail.
type childStderr struct {
	mu                  sync.Mutex
	partial             []byte // an unfinished line
	tail                []byte
	downloads, compiles int
	serving             bool // past the build: every line is kept
}

func (c *childStderr) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		c.line(c.partial[:i+1])
		c.partial = c.partial[i+1:]
	}
	return len(p), nil
}

func (c *childStderr) line(l []byte) {
	switch t := bytes.TrimSpace(l); {
	case c.serving:
	case bytes.HasPrefix(t, []byte("go: downloading ")):
		c.downloads++
		return
	case isPackagePath(t):
		c.compiles++
		return
	}
	c.tail = append(c.tail, l...)
	if over := len(c.tail) - 4096; over > 0 {
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
}

// isPackagePath reports whether l is a line of `go build -v`: an import
// path alone, such as "k8s.io/apiserver/pkg/endpoints/discovery/aggregated".
func isPackagePath(l []byte) bool {
	if len(l) == 0 || l[0] == '#' {
		return false
	}
	for _, b := range l {
		if b <= ' ' || b == ':' || b == '(' || b == '"' || b == '\'' {
			return false
		}
	}
	return true
}

func (c *childStderr) started() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serving = true
}

func (c *childStderr) progress() (downloads, compiles int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.downloads, c.compiles
}

// Bytes returns the kept lines, and an unfinished last one.
func (c *childStderr) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(bytes.Clone(c.tail), c.partial...)
}

var errNoEmbedded = errors.New("no kubeconfig found and the embedded fake cluster could not be started")
