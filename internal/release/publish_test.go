package release

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// testVersion is what the modules are published at: a prerelease of the
// first release, canonical semver as module zips require, new for each run
// (the published modules are extracted into the machine's module cache,
// which never looks at a version it holds again) and removed from the
// module cache after it (removeVersion).
var testVersion = fmt.Sprintf("v0.1.0-ci.%d", time.Now().UnixNano())

// consumers names, for each published module, the programs under
// testdata/consumers that import it; the examples' modules are installed
// with go install path@version instead, as their users do.
var consumers = map[string][]string{
	"github.com/kubeatlas/kubeatlas":                         {"discovery-only", "discovery-restmapper", "openapi3", "fleet"},
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest": {"discoverytest"},
	"github.com/kubeatlas/kubeatlas/apiserver":               {"servedtest"},
	"github.com/kubeatlas/kubeatlas/integrations":            {"integrations"},
	"github.com/kubeatlas/kubeatlas/redisstore":              {"redisstore"},
}

// lean names the consumers whose module graphs must not hold the
// server-side modules (serverSide): the core's and redisstore's go.mod do
// not require k8s.io/apiserver, which only the fake server's module
// (discovery/discoverytest) needs (their tests that need a server use the
// core's internal/docserver). integrations gets them from
// controller-runtime and cli-runtime.
var lean = []string{"discovery-only", "discovery-restmapper", "openapi3", "fleet", "redisstore"}

// without names, for a consumer, kubeatlas modules that must stay out of
// its module graph: the fake's users do not get the served API's module
// (and its kube-aggregator) unless they import apiserver/servedtest.
var without = map[string][]string{
	"discoverytest": {"github.com/kubeatlas/kubeatlas/apiserver"},
}

// serverSide is what k8s.io/apiserver brings into a module graph.
var serverSide = []string{"k8s.io/apiserver", "google.golang.org/grpc", "go.opentelemetry.io/otel", "github.com/prometheus/client_golang", "github.com/google/cel-go"}

// commands lists, for each module of programs, the commands go install
// puts on the PATH: the module's root package, or every package under it
// when it names several, or what install names.
var commands = map[string][]string{
	"github.com/kubeatlas/kubeatlas/apiserver":              {"kubeatlas-apiserver"},
	"github.com/kubeatlas/kubeatlas/examples":               {"api-resources", "consistency", "explain", "fake-apiserver", "fleet", "watch-apis"},
	"github.com/kubeatlas/kubeatlas/examples/controller":    {"controller"},
	"github.com/kubeatlas/kubeatlas/examples/kubectl-atlas": {"kubectl-atlas"},
}

// install names the package go install installs of a module whose command
// is not at its root: the apiserver module is a library (the served API,
// and servedtest, which serves it on the fake) with its command beneath.
var install = map[string]string{
	"github.com/kubeatlas/kubeatlas/apiserver": "github.com/kubeatlas/kubeatlas/apiserver/cmd/kubeatlas-apiserver",
}

// TestConsumersBuildFromFileProxy publishes every module of this checkout
// to a file-based module proxy and builds, in directories outside the
// repository, a program against each one as a user would: a go.mod that
// requires the module at the published version and nothing else, with the
// network off (GOPROXY names the file proxy and, for third-party modules,
// the local module cache's download directory; no sum database), so that
// nothing of this checkout leaks in through a replace directive or a
// go.work. The machine's module cache is used, so that the third-party
// packages other builds compiled are not compiled again (in a module cache
// of its own, at other paths, every one was: over ten minutes on two
// cores); the version published is new for each run, so nothing of an
// earlier run is used, and it is removed afterwards.
func TestConsumersBuildFromFileProxy(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("KUBEATLAS_REQUIRE_EXTERNAL") == "1" {
			t.Fatal("git is not on the PATH; it lists the files a release publishes")
		}
		t.Skip("git is not on the PATH; it lists the files a release publishes")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range mods {
		paths = append(paths, m.Path)
	}
	want := []string{
		"github.com/kubeatlas/kubeatlas",
		"github.com/kubeatlas/kubeatlas/apiserver",
		"github.com/kubeatlas/kubeatlas/discovery/discoverytest",
		"github.com/kubeatlas/kubeatlas/examples",
		"github.com/kubeatlas/kubeatlas/examples/controller",
		"github.com/kubeatlas/kubeatlas/examples/kubectl-atlas",
		"github.com/kubeatlas/kubeatlas/integrations",
		"github.com/kubeatlas/kubeatlas/redisstore",
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("publishable modules: %q, want %q (a new module needs a consumer here)", paths, want)
	}

	proxy := t.TempDir()
	if err := Publish(proxy, mods, testVersion); err != nil {
		t.Fatal(err)
	}
	gomodcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	modcache := strings.TrimSpace(string(gomodcache))
	t.Cleanup(func() { removeVersion(t, modcache, mods, testVersion) })
	env := offline(proxy, filepath.Join(modcache, "cache", "download"), modcache)

	for _, m := range mods {
		names, ok := consumers[m.Path]
		if cmds, isPrograms := commands[m.Path]; isPrograms {
			t.Run(filepath.Base(m.Path), func(t *testing.T) {
				bin := t.TempDir()
				pattern := m.Path
				if p, ok := install[m.Path]; ok {
					pattern = p
				} else if len(cmds) > 1 {
					pattern += "/..."
				}
				run(t, t.TempDir(), append(env, "GOBIN="+bin), "go", "install", pattern+"@"+testVersion)
				for _, cmd := range cmds {
					if _, err := os.Stat(filepath.Join(bin, cmd)); err != nil {
						t.Errorf("go install %s@%s: %v", pattern, testVersion, err)
					}
				}
			})
			if !ok {
				continue // a module of programs only
			}
		} else if !ok {
			t.Errorf("%s has no consumer", m.Path)
		}
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				dir := consumer(t, name, m.Path)
				run(t, dir, env, "go", "mod", "tidy")
				run(t, dir, env, "go", "build", "-o", filepath.Join(t.TempDir(), name), ".")
				// Every kubeatlas module comes from the proxy at the
				// published version, none from a directory. (-e: go list -m
				// reads the .info file of every module in the graph, which
				// the module cache lacks for modules whose go.mod only was
				// ever needed; the list is the same.)
				graph := strings.Split(run(t, dir, env, "go", "list", "-m", "-e", "all"), "\n")
				for _, line := range graph[1:] { // the first is the consumer
					if f := strings.Fields(line); strings.HasPrefix(f[0], "github.com/kubeatlas/") && (len(f) != 2 || f[1] != testVersion) {
						t.Errorf("go list -m all: %s, want %s", line, testVersion)
					}
				}
				for _, line := range graph {
					if f := strings.Fields(line); len(f) > 0 && slices.Contains(without[name], f[0]) {
						t.Errorf("%s has %s in its module graph", name, f[0])
					}
				}
				heavy := serverSideIn(graph)
				t.Logf("%s: %d modules in its graph (go list -m all, itself included), server-side among them: %q", name, len(graph), heavy)
				if slices.Contains(lean, name) && len(heavy) > 0 {
					t.Errorf("a program importing only the core's packages (%s) has %q in its module graph", name, heavy)
				}
			})
		}
	}
}

// consumer writes the program testdata/consumers/name, in a module that
// requires mod at the published version, to a directory outside the
// repository.
func consumer(t *testing.T, name, mod string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "consumers", name, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := new(modfile.File)
	if err := f.AddModuleStmt("example.com/" + name); err != nil {
		t.Fatal(err)
	}
	if err := f.AddGoStmt("1.26.0"); err != nil {
		t.Fatal(err)
	}
	if err := f.AddRequire(mod, testVersion); err != nil {
		t.Fatal(err)
	}
	gomod, err := f.Format()
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{"go.mod": gomod, "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// offline is the environment of a user's go command with no network: the
// file proxy, then the local module cache's downloads as a read-only
// proxy for third-party modules, the module cache modcache (what it
// extracts writable, so that the test can remove it), and no workspace,
// sum database, VCS or toolchain download.
func offline(proxy, downloads, modcache string) []string {
	set := map[string]string{
		"GOPROXY":      "file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(downloads),
		"GOMODCACHE":   modcache,
		"GOFLAGS":      "-mod=mod -modcacherw -buildvcs=false",
		"GOSUMDB":      "off",
		"GONOSUMDB":    "",
		"GONOSUMCHECK": "",
		"GOPRIVATE":    "",
		"GONOPROXY":    "",
		"GOINSECURE":   "",
		"GOVCS":        "*:off",
		"GOWORK":       "off",
		"GOTOOLCHAIN":  "local",
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !hasKey(set, k) {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// run runs a command in dir with env and returns its standard output; it
// fails the test with the command's output when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s in %s: %v\n%s%s", name, strings.Join(args, " "), dir, err, stdout.Bytes(), stderr.Bytes())
	}
	return strings.TrimSpace(stdout.String())
}

// serverSideIn lists the serverSide modules in graph (go list -m all
// lines).
func serverSideIn(graph []string) []string {
	var out []string
	for _, line := range graph {
		if f := strings.Fields(line); len(f) > 0 && slices.Contains(serverSide, f[0]) {
			out = append(out, f[0])
		}
	}
	return out
}

// removeVersion removes what the go command put in the module cache for
// the published modules at version: their extracted trees and their
// downloads.
func removeVersion(t *testing.T, modcache string, mods []Module, version string) {
	for _, m := range mods {
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			t.Error(err)
			continue
		}
		_ = os.RemoveAll(filepath.Join(modcache, filepath.FromSlash(esc)+"@"+version))
		at := filepath.Join(modcache, "cache", "download", filepath.FromSlash(esc), "@v")
		dl, _ := filepath.Glob(filepath.Join(at, version+".*"))
		for _, f := range dl {
			if err := os.Remove(f); err != nil {
				t.Errorf("removing %s: %v", f, err)
			}
		}
		// The versions the cache lists for GOPROXY=off: the version goes.
		list := filepath.Join(at, "list")
		if b, err := os.ReadFile(list); err == nil {
			var kept []string
			for _, v := range strings.Fields(string(b)) {
				if v != version {
					kept = append(kept, v)
				}
			}
			if len(kept) == 0 {
				_ = os.Remove(list)
			} else {
				_ = os.WriteFile(list, []byte(strings.Join(kept, "\n")+"\n"), 0o644)
			}
		}
		for _, dir := range []string{at, filepath.Dir(at), filepath.Join(modcache, filepath.FromSlash(esc))} {
			_ = os.Remove(dir) // only if empty
		}
	}
}
