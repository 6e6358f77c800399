package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// isolate keeps the user's kubeconfig (~/.kube/config, $KUBECONFIG) and
// cache directory out of the test.
func isolate(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBECACHEDIR", "")
}

// kubeconfig writes a kubeconfig whose current context is the server at
// base, after isolate.
func kubeconfig(t *testing.T, base string) string {
	t.Helper()
	isolate(t)
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: ` + base + `
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
users:
- name: fake
  user: {}
current-context: fake
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// atlas runs the plugin in process.
func atlas(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("kubectl atlas %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// kubectl runs the real kubectl, in the environment kubeconfig set, with a
// cache directory of its own.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin := testenv.Tool(t, "kubectl")
	out, err := exec.Command(bin, append(args, "--cache-dir", t.TempDir())...).Output()
	if err != nil {
		t.Fatalf("kubectl %v: %v", args, err)
	}
	return string(out)
}

// TestSameAsKubectl: kubectl atlas api-resources (-o name, the default
// table, -o wide, filters) and kubectl atlas explain print what kubectl
// api-resources and kubectl explain print against the same server, byte
// for byte, with kubectl's connection flags.
func TestSameAsKubectl(t *testing.T) {
	testenv.Tool(t, "kubectl")
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(40, 4))
	kc := kubeconfig(t, base)
	for _, args := range [][]string{
		{"api-resources", "-o", "name"},
		{"api-resources"},
		{"api-resources", "--api-group", "apps"},
		{"api-resources", "-o", "wide", "--categories", "all"},
		{"api-resources", "--namespaced=false", "-o", "name"},
		{"api-resources", "--verbs", "list,watch", "--sort-by", "kind"},
		{"explain", "deployments.spec.template.spec.containers"},
		{"explain", "deploy.spec.replicas"},
		{"explain", "widget0001s.spec"},
		{"explain", "--recursive", "deployments.spec"},
		{"explain", "--api-version", "apps/v1", "deploy.spec.selector"},
	} {
		args = append(args, "--kubeconfig", kc)
		got, _ := atlas(t, append(args, "--cache-dir", t.TempDir())...)
		if want := kubectl(t, args...); got != want || len(want) < 40 {
			t.Errorf("%v:\n got:\n%s\nwant:\n%s", args[:len(args)-2], got, want)
		}
	}
}

// TestAsPlugin: built as kubectl-atlas and put first on the PATH, kubectl
// runs it as "kubectl atlas", arguments and environment passed through.
func TestAsPlugin(t *testing.T) {
	kubectlBin := testenv.Tool(t, "kubectl")
	// Built before kubeconfig moves HOME, where the go command keeps its
	// caches.
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-atlas"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(10, 2))
	kc := kubeconfig(t, base)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, args := range [][]string{
		{"api-resources", "--api-group", "apps"},
		{"explain", "deploy.spec.replicas"},
	} {
		got := kubectl(t, append([]string{"atlas"}, append(args, "--kubeconfig", kc)...)...)
		want := kubectl(t, append(args, "--kubeconfig", kc)...)
		if got != want || len(want) < 40 {
			t.Errorf("kubectl atlas %v:\n got:\n%s\nwant:\n%s", args, got, want)
		}
	}
	// A failure is the plugin's: its message and exit status reach the user.
	cmd := exec.Command(kubectlBin, "atlas", "api-resources", "-o", "yaml", "--kubeconfig", kc)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--output must be wide, name or json, not "yaml"`) {
		t.Errorf("kubectl atlas api-resources -o yaml: %v\n%s", err, out)
	}
}

// TestCacheDir: --cache-dir is kubectl's: discovery and OpenAPI documents
// are kept in its kubeatlas directory, and a second run revalidates
// discovery from there (two 304s) and reads the document without asking.
func TestCacheDir(t *testing.T) {
	srv, base := discoverytest.Start(t)
	kc := kubeconfig(t, base)
	cache := t.TempDir()
	args := []string{"--kubeconfig", kc, "--cache-dir", cache}
	atlas(t, append([]string{"api-resources", "-o", "name"}, args...)...)
	atlas(t, append([]string{"explain", "deploy.spec"}, args...)...)
	files := 0
	filepath.WalkDir(filepath.Join(cache, "kubeatlas"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
		}
		return nil
	})
	if files == 0 {
		t.Fatalf("nothing cached in %s", filepath.Join(cache, "kubeatlas"))
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), ".kube", "cache")); !os.IsNotExist(err) {
		t.Errorf("~/.kube/cache used despite --cache-dir: %v", err)
	}

	srv.ResetRequests()
	_, stats := atlas(t, append([]string{"api-resources", "-o", "name", "--stats"}, args...)...)
	if !strings.Contains(stats, "2 not modified") || !strings.Contains(stats, "1 disk loads") {
		t.Errorf("second api-resources: %s", stats)
	}
	atlas(t, append([]string{"explain", "deploy.spec"}, args...)...)
	discoveryRequests := 0
	for _, r := range srv.Requests() {
		switch {
		case r.Path == "/api" || r.Path == "/apis":
			discoveryRequests++
			if r.Status != 304 {
				t.Errorf("a warm run got %s with status %d, want 304", r.Path, r.Status)
			}
		case strings.HasPrefix(r.Path, "/openapi/v3/"):
			t.Errorf("a warm explain fetched %s", r.Path)
		}
	}
	if discoveryRequests != 4 { // two per run
		t.Errorf("%d discovery requests in two warm runs, want 4: %v", discoveryRequests, srv.Requests())
	}
}

// TestWithoutKubeconfig: with no kubeconfig the plugin does what kubectl
// does, ConfigFlags' default server (localhost:8080) and its error; no
// embedded cluster is started.
func TestWithoutKubeconfig(t *testing.T) {
	isolate(t)
	var stderr bytes.Buffer
	err := run([]string{"api-resources", "--cache-dir", t.TempDir()}, &bytes.Buffer{}, &stderr)
	if err == nil {
		t.Skip("something answers as a Kubernetes API server on localhost:8080")
	}
	if !strings.Contains(err.Error(), "localhost:8080") {
		t.Errorf("the error does not name kubectl's default server: %v", err)
	}
	if strings.Contains(stderr.String(), "embedded") {
		t.Errorf("an embedded cluster: %s", stderr.String())
	}
}

// TestUsage: --help lists kubectl's connection flags and says there is no
// embedded cluster; mistakes are errors that say what is expected.
func TestUsage(t *testing.T) {
	for _, sub := range []string{"api-resources", "explain"} {
		out, _ := atlas(t, sub, "--help")
		for _, want := range []string{"kubectl atlas " + sub, "no embedded fake cluster", "--kubeconfig", "--context", "-n, --namespace", "--cache-dir", "--request-timeout", "-s, --server", "--token"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help does not say %q:\n%s", sub, want, out)
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "a subcommand is required"},
		{[]string{"get"}, `unknown subcommand "get"`},
		{[]string{"explain"}, "usage: kubectl atlas explain"},
		{[]string{"api-resources", "--sort-by", "age"}, "--sort-by must be name or kind"},
		{[]string{"api-resources", "--no-such-flag"}, "unknown flag: --no-such-flag"},
	} {
		err := run(c.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
