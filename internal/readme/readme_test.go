package readme

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// needsCluster names the programs the README shows but this test cannot run:
// they start no embedded fake cluster.
var needsCluster = map[string]string{
	"examples/controller":               "it reconciles objects, which the fake cluster does not serve: it needs a real cluster",
	"examples/kubectl-atlas":            "it starts no embedded cluster, as kubectl does not: it needs a real cluster",
	"apiserver/cmd/kubeatlas-apiserver": "it serves until stopped, the cluster its --kubeconfig names (the integration tier runs it on a real one)",
	"examples/fake-apiserver":           "it serves until stopped (TestGoPrograms runs it, for $KUBECONFIG, with --write-kubeconfig)",
}

// block is a fenced code block of the README.
type block struct {
	lang    string
	line    int // of the opening fence
	text    string
	section string // the heading above it, without its #s
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func readmeBlocks(t *testing.T) []block {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	var cur *block
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```"), line: n, section: section}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: a code block is never closed", cur.line)
	}
	return blocks
}

func TestReadmeIsShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The README is a newcomer's first page; the rest belongs in docs/. Its
	// quick starts are whole programs, which run as they are: their lines
	// are not counted.
	n := bytes.Count(data, []byte("\n"))
	for _, b := range readmeBlocks(t) {
		if b.lang == "go" {
			n -= strings.Count(b.text, "\n") + 2 // and its fences
		}
	}
	if n > 150 {
		t.Errorf("README.md has %d lines besides its Go programs; move detail into docs/ (at most 150)", n)
	}
	first := readmeBlocks(t)[0]
	cmds := parseShell(t, first)
	if first.lang != "sh" || len(cmds) != 2 || strings.Join(cmds[0].args, " ") != "go run ./examples/api-resources" ||
		strings.Join(cmds[1].args, " ") != "go test work" {
		t.Errorf("README.md:%d: the README must start with `go run ./examples/api-resources` and `go test work`, got %q", first.line, first.text)
	}
}

// quickStarts is what each Go block of the README promises to print, by
// the heading of its section: the test checks every block against it, run
// with no kubeconfig (on the fake it starts itself) and with $KUBECONFIG
// naming another fake cluster, which must see its requests.
var quickStarts = map[string]struct {
	want []string // in its output, stdout and stderr
	// signal: it serves until stopped; the test stops it with SIGTERM once
	// it printed want, and it must then exit 0.
	signal bool
	// test: a _test.go file, run with go test; it reads no kubeconfig.
	test bool
}{
	"Quick start: CLI and plugin authors": {want: []string{"Deployment spec.replicas: Number of desired replicas of the Deployment."}},
	"Quick start: tests, on the fake API server": {
		want: []string{"example.com/v1, Kind=Widget after", "--- PASS: TestWidgetAppears"}, test: true,
	},
	"Quick start: server-side apply, typed (extract and validate)": {
		want: []string{"deployer applied spec: map[replicas:3]\n", "a typo: .spec.replica: field not declared in schema\n"},
	},
	"Quick start: controller authors (controller-runtime)": {want: []string{"manager running"}, signal: true},
}

// TestGoPrograms runs every Go block as a newcomer would: each is a whole
// file, gofmt'ed, put in a directory of its own in one new module outside
// the repository, which the README's install commands (the ```sh block of
// its Install section) make and point at this checkout; built with
// GOWORK=off, so that nothing in the repository's workspaces helps. Each then runs with no kubeconfig (HOME an
// empty directory, KUBECONFIG unset) and prints what the README promises;
// the programs that read a kubeconfig run again with $KUBECONFIG naming a
// fake cluster that logs each request, so that a program which ignores
// $KUBECONFIG (and so starts its own fake) fails here, as does one that
// panics.
func TestGoPrograms(t *testing.T) {
	root := repoRoot(t)
	blocks := readmeBlocks(t)
	var programs []block
	for _, b := range blocks {
		if b.lang != "go" {
			continue
		}
		if _, ok := quickStarts[b.section]; !ok {
			t.Errorf("README.md:%d: a Go block in section %q, which quickStarts (internal/readme) does not know: say what it prints", b.line, b.section)
			continue
		}
		src := []byte(b.text)
		if !bytes.HasPrefix(src, []byte("package ")) {
			t.Errorf("README.md:%d: a Go block must be a whole file (package clause and imports), so that it can be copied and compiled", b.line)
			continue
		}
		formatted, err := format.Source(src)
		if err != nil {
			t.Errorf("README.md:%d: %v", b.line, err)
			continue
		}
		if !bytes.Equal(formatted, src) {
			t.Errorf("README.md:%d: not gofmt'ed; gofmt gives:\n%s", b.line, formatted)
		}
		programs = append(programs, b)
	}
	if len(programs) == 0 {
		t.Fatal("no Go program found in README.md")
	}
	exes := newcomerBuild(t, root, installCommands(t, blocks), programs)
	// For the rest of the test, not of a subtest: the file and the server
	// must outlive the first program that reads them.
	kubeconfig, served := fakeCluster(t, root)
	for _, b := range programs {
		qs := quickStarts[b.section]
		exe := exes[b.line]
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			if qs.test {
				run(t, b, exe, []string{"-test.v"}, nil, qs.want, nil)
				return
			}
			run(t, b, exe, nil, []string{"KUBECONFIG="}, qs.want, nil)
			before := served()
			asked := func() bool { return served() > before }
			run(t, b, exe, nil, []string{"KUBECONFIG=" + kubeconfig}, qs.want, asked)
			// The server's log reaches this process through a pipe: wait
			// for it, a little.
			for deadline := time.Now().Add(10 * time.Second); !asked() && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			if !asked() {
				t.Errorf("README.md:%d: with $KUBECONFIG set, the program sent no request to the cluster it names", b.line)
			}
		})
	}
}

// installCommands are the `go mod` commands of the README's Install section.
func installCommands(t *testing.T, blocks []block) []command {
	t.Helper()
	var cmds []command
	for _, b := range blocks {
		if b.lang != "sh" || b.section != "Install" {
			continue
		}
		for _, c := range parseShell(t, b) {
			if len(c.args) >= 2 && c.args[0] == "go" && c.args[1] == "mod" {
				cmds = append(cmds, c)
			}
		}
	}
	if len(cmds) == 0 {
		t.Fatal("README.md: the Install section gives no `go mod` command to depend on this checkout")
	}
	return cmds
}

// newcomerBuild writes each program into a directory of its own in one new
// module beside a "kubeatlas" that is this checkout (the README's layout),
// runs the install commands there, and builds each (a test's test binary),
// outside any workspace. It returns the executables by README line.
func newcomerBuild(t *testing.T, root string, install []command, programs []block) map[int]string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "kubeatlas")); err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(dir, "quickstart")
	outside := []string{"GOWORK=off", "GOFLAGS="} // as a newcomer's: no workspace, no flags
	for _, b := range programs {
		file := "main.go"
		if quickStarts[b.section].test {
			file = "quickstart_test.go"
		}
		pkg := filepath.Join(mod, fmt.Sprintf("line%d", b.line))
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, file), []byte(b.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if c := install[0]; len(c.args) < 3 || c.args[2] != "init" {
		t.Fatalf("README.md:%d: the Install section's first command is %q; a newcomer needs a module first: go mod init", c.line, c.text)
	}
	for _, c := range install {
		if out, err := goCommand(t, mod, append(outside, c.env...), c.args[1:]...); err != nil {
			t.Fatalf("README.md:%d: %s, in a new module beside the checkout: %v\n%s", c.line, c.text, err, out)
		}
	}
	bin := filepath.Join(dir, "bin")
	if out, err := goCommand(t, mod, outside, "build", "-o", bin+string(filepath.Separator), "./..."); err != nil {
		t.Fatalf("README.md: the programs do not build in a new module outside the repository: %v\n%s", err, out)
	}
	exes := map[int]string{}
	for _, b := range programs {
		name := fmt.Sprintf("line%d", b.line)
		exes[b.line] = filepath.Join(bin, name)
		if quickStarts[b.section].test {
			exes[b.line] = filepath.Join(bin, name+".test")
			if out, err := goCommand(t, mod, outside, "test", "-c", "-o", exes[b.line], "./"+name); err != nil {
				t.Fatalf("README.md:%d: the test does not build in a new module outside the repository: %v\n%s", b.line, err, out)
			}
		}
	}
	return exes
}

// run runs exe as on a machine with no kubeconfig but what env gives: it
// must print want, and exit 0, with no panic. A program that serves until
// stopped (quickStarts' signal) is sent SIGTERM once it printed want and
// ready (if not nil) holds.
func run(t *testing.T, b block, exe string, args, env, want []string, ready func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if quickStarts[b.section].signal {
		for (!containsAll(out.String(), want) || (ready != nil && !ready())) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	err := cmd.Wait()
	if err != nil || !containsAll(out.String(), want) || strings.Contains(out.String(), "goroutine ") {
		t.Errorf("README.md:%d: with %q, the program ended with %v, printing:\n%s\nwant %q, exit status 0 and no panic", b.line, env, err, out.String(), want)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// syncBuffer is a bytes.Buffer that a test may read while a process writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fakeCluster starts examples/fake-apiserver for the rest of the test,
// logging each request, and returns the kubeconfig it wrote and a count of
// the requests it served so far.
func fakeCluster(t *testing.T, root string) (kubeconfig string, served func() int) {
	t.Helper()
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	// No --token: client-go reads no credentials from a kubeconfig for a
	// plain-http server (clientcmd: "only try to read the auth information
	// if we are secure").
	cmd := exec.Command("go", "run", "./examples/fake-apiserver", "--exit-when-stdin-closes", "--log-requests",
		"--write-kubeconfig", kubeconfig)
	cmd.Dir = root
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // it exits when its stdin closes
		_ = cmd.Wait()
	})
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, "http://") {
			t.Fatalf("fake-apiserver printed %q, not its URL; stderr:\n%s", line, log.String())
		}
	case <-time.After(5 * time.Minute): // its first build, on a cold cache
		t.Fatalf("fake-apiserver did not start; stderr:\n%s", log.String())
	}
	request := regexp.MustCompile(`(?m)^[A-Z]+ /`) // --log-requests: "GET /apis Accept=..."
	return kubeconfig, func() int { return len(request.FindAllString(log.String(), -1)) }
}

func goCommand(t *testing.T, dir string, env []string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// command is one command line of a ```sh block.
type command struct {
	line int
	text string
	dir  string   // relative to the repository root, after any `cd DIR &&`
	env  []string // NAME=value before the command
	args []string
}

// parseShell splits a block into commands: backslash continuations joined,
// comments dropped, quotes removed, `cd DIR && ...` and leading NAME=value
// understood. Anything else a shell would do (pipes, subshells, ...) is an
// error here, so that the README keeps to commands this test can check.
func parseShell(t *testing.T, b block) []command {
	t.Helper()
	var cmds []command
	lines := strings.Split(strings.ReplaceAll(b.text, "\\\n", " "), "\n")
	for i, text := range lines {
		words, err := shellWords(text)
		if err != nil {
			t.Fatalf("README.md:%d: %v", b.line+1+i, err)
		}
		if len(words) == 0 {
			continue
		}
		c := command{line: b.line + 1 + i, text: strings.TrimSpace(text)}
		for len(words) >= 3 && words[0] == "cd" && words[2] == "&&" {
			c.dir = filepath.Join(c.dir, words[1])
			words = words[3:]
		}
		for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
			c.env = append(c.env, words[0])
			words = words[1:]
		}
		for _, w := range words {
			if w == "&&" || w == "|" || w == "||" || w == ";" || strings.HasPrefix(w, "(") || strings.HasSuffix(w, ")") {
				t.Fatalf("README.md:%d: %q: only `cd DIR && command` is understood here", c.line, c.text)
			}
		}
		c.args = words
		cmds = append(cmds, c)
	}
	return cmds
}

// shellWords splits a line as sh would for the simple commands the README
// holds: single and double quotes, and a comment from a # that starts a word.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unclosed quote in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestCommands checks every command of the README's ```sh blocks, and runs
// those that need neither a cluster nor the network.
func TestCommands(t *testing.T) {
	root := repoRoot(t)
	testenv.NoKubeconfig(t) // as on a fresh machine: the examples start their embedded cluster
	helps := map[string]string{}
	ran := map[string]bool{} // programs run so far, on this test's one HOME and cache
	n := 0
	for _, b := range readmeBlocks(t) {
		if b.lang != "sh" {
			continue
		}
		for _, c := range parseShell(t, b) {
			n++
			t.Run(fmt.Sprintf("line%d", c.line), func(t *testing.T) {
				t.Logf("README.md:%d: %s", c.line, c.text)
				dir := filepath.Join(root, c.dir)
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					t.Fatalf("README.md:%d: cd %s: no such directory", c.line, c.dir)
				}
				switch {
				case len(c.args) >= 3 && c.args[0] == "go" && c.args[1] == "run":
					checkGoRun(t, root, c, helps, ran)
				case len(c.args) >= 2 && c.args[0] == "go" && c.args[1] == "test":
					checkGoTest(t, root, c)
				case len(c.args) >= 3 && c.args[0] == "go" && c.args[1] == "mod" && b.section == "Install":
					t.Skip("run by TestGoPrograms, in a new module outside the repository, for the quick starts")
				case len(c.args) == 3 && c.args[0] == "go" && c.args[1] == "get":
					checkGoGet(t, root, c)
				case len(c.args) >= 1 && strings.HasSuffix(c.args[0], ".sh"):
					script := filepath.Join(dir, c.args[0])
					fi, err := os.Stat(script)
					if err != nil || fi.Mode()&0o111 == 0 {
						t.Fatalf("README.md:%d: %s is not an executable script", c.line, c.args[0])
					}
					t.Skipf("not run: %s needs a real kube-apiserver, etcd, kubectl and GNU time (docs/testing.md)", c.args[0])
				default:
					t.Fatalf("README.md:%d: %q: this test does not know how to check that command; teach it (internal/readme)", c.line, c.text)
				}
			})
		}
	}
	if n == 0 {
		t.Fatal("no shell command found in README.md")
	}
}

// checkGoRun checks that the program exists and takes every flag given,
// then runs it when it needs no cluster.
func checkGoRun(t *testing.T, root string, c command, helps map[string]string, ran map[string]bool) {
	dir := filepath.Join(root, c.dir)
	pkg := c.args[2]
	rel, err := filepath.Rel(root, filepath.Join(dir, pkg))
	if err != nil {
		t.Fatal(err)
	}
	out, err := goCommand(t, dir, nil, "list", "-f", "{{.Name}}", pkg)
	if err != nil || strings.TrimSpace(string(out)) != "main" {
		t.Fatalf("README.md:%d: %s is not a program: %v %s", c.line, rel, err, out)
	}
	help, ok := helps[rel]
	if !ok {
		// pflag's and flag's usage both go to stderr; the exit status is
		// not asked for here (another test holds every --help to 0).
		out, _ := goCommand(t, dir, nil, "run", pkg, "--help")
		help = string(out)
		helps[rel] = help
	}
	for _, a := range c.args[3:] {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !regexp.MustCompile(`(?m)(^|[\s,])--?` + regexp.QuoteMeta(name) + `([\s,=]|$)`).MatchString(help) {
			t.Errorf("README.md:%d: %s has no flag %s; its --help says:\n%s", c.line, rel, a, help)
		}
	}
	if why, ok := needsCluster[rel]; ok {
		t.Skipf("flags checked, not run: %s", why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", c.args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), c.env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("README.md:%d: %s: %v\nstderr:\n%s", c.line, c.text, err, stderr.String())
	}
	t.Logf("ran in %v", time.Since(start).Round(time.Millisecond))
	if stdout.Len() == 0 {
		t.Errorf("README.md:%d: %s printed nothing on stdout", c.line, c.text)
	}
	// The README promises an embedded fake cluster where no kubeconfig is found.
	if !strings.Contains(stderr.String(), "No kubeconfig found") {
		t.Errorf("README.md:%d: %s did not say it used an embedded cluster; stderr:\n%s", c.line, c.text, stderr.String())
	}
	warm := ran[rel]
	ran[rel] = true
	for _, claim := range claims {
		if claim.warm && !warm {
			t.Logf("%q not checked: %s has not run before in this test (a -run filter?), so its cache is cold", claim.readme, rel)
			continue
		}
		if strings.Contains(c.text, claim.readme) && !strings.Contains(stderr.String(), claim.stderr) {
			t.Errorf("README.md:%d: the README says %q, but stderr lacks %q:\n%s", c.line, claim.readme, claim.stderr, stderr.String())
		}
	}
}

// claims pins what the README's comments say a command does to what it
// prints. The commands run in README order, on one cache directory, so the
// second api-resources run is the warm start the README speaks of.
var claims = []struct {
	readme, stderr string
	warm           bool // true: only once the program ran before, in this test
}{
	{"revalidated with two 304s", "2 not modified", true},
	{"20 fake clusters on 3 surfaces", "20 fake clusters on 3 API surfaces", false},
}

// checkGoTest checks that the packages exist and that the -run and -bench
// patterns and the variables given name tests, benchmarks and variables
// their tests have. It runs none: `go test work` (every package of the
// root go.work's modules; ./... stops at the nested ones) is the run this
// test is part of, and the benchmarks take minutes.
func checkGoTest(t *testing.T, root string, c command) {
	dir := filepath.Join(root, c.dir)
	var pkgs []string
	patterns := map[string]string{}
	for i := 2; i < len(c.args); i++ {
		a := c.args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-"):
			pkgs = append(pkgs, a)
		case name == "run" || name == "bench" || name == "benchtime" || name == "timeout" || name == "count":
			if !hasValue {
				i++
				if i == len(c.args) {
					t.Fatalf("README.md:%d: %s without a value", c.line, a)
				}
				value = c.args[i]
			}
			patterns[name] = value
		case name == "benchmem" || name == "short" || name == "v" || name == "race":
		default:
			t.Fatalf("README.md:%d: go test flag %s: not one this test knows", c.line, a)
		}
	}
	if len(pkgs) == 1 && (pkgs[0] == "./..." || pkgs[0] == "work") && len(patterns) == 0 {
		if c.dir != "" {
			t.Fatalf("README.md:%d: `go test %s` of the root workspace is what the README promises", c.line, pkgs[0])
		}
		t.Skip("not run: this is the run this test is part of")
	}
	if len(pkgs) == 0 {
		pkgs = []string{"."}
	}
	var names []string
	var sources strings.Builder
	for _, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(dir, p, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("README.md:%d: %s: no tests there", c.line, p)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sources.Write(src)
			file, err := parser.ParseFile(token.NewFileSet(), f, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
					names = append(names, fd.Name.Name)
				}
			}
		}
	}
	for flagName, prefix := range map[string]string{"run": "Test", "bench": "Benchmark"} {
		pattern, ok := patterns[flagName]
		if !ok || pattern == "^$" { // "^$": run nothing, on purpose
			continue
		}
		// go test matches the top level against the part before the first slash.
		top, _, _ := strings.Cut(pattern, "/")
		re, err := regexp.Compile(top)
		if err != nil {
			t.Fatalf("README.md:%d: -%s %q: %v", c.line, flagName, pattern, err)
		}
		found := false
		for _, n := range names {
			found = found || (strings.HasPrefix(n, prefix) && re.MatchString(n))
		}
		if !found {
			t.Errorf("README.md:%d: -%s %q matches no %s function in %v", c.line, flagName, pattern, prefix, pkgs)
		}
	}
	for _, e := range c.env {
		name, _, _ := strings.Cut(e, "=")
		if !strings.Contains(sources.String(), strconv.Quote(name)) {
			t.Errorf("README.md:%d: %s is read by no test in %v", c.line, name, pkgs)
		}
	}
	t.Skip("checked, not run: benchmarks take minutes (docs/performance.md says how each figure was measured)")
}

// checkGoGet checks that the module asked for is one of this repository's.
func checkGoGet(t *testing.T, root string, c command) {
	mod, version, ok := strings.Cut(c.args[2], "@")
	if !ok || version == "" {
		t.Errorf("README.md:%d: %s: name a version (@latest)", c.line, c.args[2])
	}
	found := false
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(data)
		found = found || (m != nil && string(m[1]) == mod)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("README.md:%d: no go.mod in the repository declares module %s", c.line, mod)
	}
	t.Skipf("module path checked, not run: go get needs the network (the module proxy)")
}

// TestLinks checks that every relative link of the README and docs/ names a
// file of the repository, and a heading of it where it names one.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
			}
			destRel, _ := filepath.Rel(root, dest)
			content, err := os.ReadFile(dest)
			if err != nil {
				if destRel == filepath.Join("docs", "versioning.md") {
					// Modules, versions and tags are written up beside this
					// change; a link to it waits for that page.
					t.Logf("%s links %s, which is not in this tree yet", rel, target)
					continue
				}
				t.Errorf("%s links %s: %v", rel, target, err)
				continue
			}
			if anchor != "" && !slices.Contains(headingAnchors(content), anchor) {
				t.Errorf("%s links %s: %s has no heading %q (it has %v)", rel, target, destRel, anchor, headingAnchors(content))
			}
		}
	}
}

// TestSectionReferences: where the README or docs/ send readers to a
// section in words ("the README's API-changes section"), not by a link
// TestLinks checks, the file has such a heading (docs/versioning.md sent
// readers to a README section that had moved to docs/api-changes.md).
func TestSectionReferences(t *testing.T) {
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`(?i)\b([\w./-]+?)(?:\.md)?'s\s+([\w -]+?)\s+section\b`)
	for _, file := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, m := range ref.FindAllStringSubmatch(strings.Join(strings.Fields(string(data)), " "), -1) {
			dest := filepath.Join(root, m[1]+".md")
			if strings.EqualFold(m[1], "README") {
				dest = filepath.Join(root, "README.md")
			}
			content, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s sends readers to %q: %v", rel, m[0], err)
				continue
			}
			want := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(m[2]), " ", "-"))
			found := false
			for _, a := range headingAnchors(content) {
				found = found || strings.Contains(a, want)
			}
			if !found {
				t.Errorf("%s sends readers to %q, but %s has no such heading", rel, m[0], filepath.Base(dest))
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives a Markdown file's headings.
func headingAnchors(md []byte) []string {
	var anchors []string
	inCode := false
	for _, line := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors = append(anchors, b.String())
	}
	return anchors
}
