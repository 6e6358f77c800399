package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/examples/internal/lightcluster"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// apiResources runs the command in process with its own cache directory.
func apiResources(t *testing.T, cacheDir string, args ...string) (stdout, stderr string) {
	t.Helper()
	t.Setenv("KUBECACHEDIR", cacheDir)
	var out, errOut bytes.Buffer
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("api-resources %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin := testenv.Tool(t, "kubectl")
	cmd := exec.Command(bin, append([]string{"--cache-dir", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %v: %v", args, err)
	}
	return string(out)
}

func sortedLines(s string) []string {
	lines := strings.Fields(s)
	slices.Sort(lines)
	return lines
}

// TestSameAsKubectl: -o name, alone and with each filter, lists what
// kubectl api-resources lists against the same server, in every server
// generation.
func TestSameAsKubectl(t *testing.T) {
	testenv.Tool(t, "kubectl")
	for _, gen := range []discoverytest.Generation{discoverytest.GenerationV2, discoverytest.GenerationV2Beta1, discoverytest.GenerationLegacy} {
		_, base := discoverytest.Start(t, discoverytest.WithGeneration(gen), discoverytest.WithCRDs(40, 4))
		for _, filter := range [][]string{nil, {"--api-group", "apps"}, {"--api-group", ""}, {"--namespaced=false"}, {"--verbs", "list,watch"}, {"--categories", "all"}, {"--verbs", "create"},
			{"--namespaced"}, {"--verbs", "create", "--verbs", "list"}, {"--namespaced=true", "--api-group", "apps"}} {
			args := append([]string{"--server", base, "-o", "name"}, filter...)
			got, _ := apiResources(t, t.TempDir(), args...)
			want := kubectl(t, append([]string{"api-resources"}, args...)...)
			if !slices.Equal(sortedLines(got), sortedLines(want)) {
				t.Errorf("%s %v:\n got %v\nwant %v", gen, filter, sortedLines(got), sortedLines(want))
			}
			// kubectl sorts by group; so do we.
			var groups []string
			for _, line := range strings.Fields(got) {
				_, g, _ := strings.Cut(line, ".")
				groups = append(groups, g)
			}
			if !slices.IsSorted(groups) {
				t.Errorf("%s %v: not sorted by group", gen, filter)
			}
		}
	}
}

// TestTablesSameAsKubectl: the default table and -o wide are kubectl's,
// byte for byte (verbs and categories comma-separated, as kubectl joins
// them, in server order).
func TestTablesSameAsKubectl(t *testing.T) {
	testenv.Tool(t, "kubectl")
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(40, 4))
	for _, args := range [][]string{{"-o", "wide"}, {"-o", "wide", "--api-group", "apps"}, {"-o", "wide", "--categories", "all"}, {}, {"--namespaced=false"}} {
		args = append([]string{"--server", base}, args...)
		got, _ := apiResources(t, t.TempDir(), args...)
		if want := kubectl(t, append([]string{"api-resources"}, args...)...); got != want {
			t.Errorf("%v:\n got:\n%s\nwant:\n%s", args[2:], got, want)
		}
	}
}

// TestWarmStartAndCached: the second run revalidates with two 304s from a
// one-file warm start; --cached asks nothing.
func TestWarmStartAndCached(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 2))
	cache := t.TempDir()
	_, first := apiResources(t, cache, "--server", base, "-o", "name", "--stats")
	_, again := apiResources(t, cache, "--server", base, "-o", "name", "--stats")
	_, second := apiResources(t, cache, "--server", base, "-o", "name", "--stats", "--cached")
	if !strings.Contains(first, "stats: 2 requests") {
		t.Errorf("first run: %s", first)
	}
	// Always current, as kubectl is: every run revalidates, at the cost of
	// two 304s, from the one-file warm start.
	if !strings.Contains(again, "stats: 2 requests") || !strings.Contains(again, "2 not modified") || !strings.Contains(again, "1 disk loads") {
		t.Errorf("second run: %s", again)
	}
	if !strings.Contains(second, "stats: 0 requests") || !strings.Contains(second, "1 disk loads") {
		t.Errorf("--cached run: %s", second)
	}
}

// TestEmbeddedClusterWithoutKubeconfig: the README's first command works
// with no kubeconfig, through the light embedded cluster served in this
// process (examples/internal/lightcluster: no child process, no
// examples/fake-apiserver to build, whose absence is set up here), which
// is gone when the command returns.
func TestEmbeddedClusterWithoutKubeconfig(t *testing.T) {
	testenv.NoKubeconfig(t)
	t.Setenv(cli.FakeAPIServerEnv, filepath.Join(t.TempDir(), "missing")) // were it run, the command would fail
	out, errOut := apiResources(t, t.TempDir())
	if !strings.Contains(errOut, "embedded fake cluster") {
		t.Errorf("stderr does not say the cluster is embedded: %q", errOut)
	}
	if !strings.HasPrefix(out, "NAME ") || !strings.Contains(out, "widget0199s") || !strings.Contains(out, "deployments") {
		t.Errorf("output:\n%s", out)
	}
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(errOut)
	if url == "" {
		t.Fatalf("no URL on stderr: %q", errOut)
	}
	if resp, err := http.Get(url + "/version"); err == nil {
		resp.Body.Close()
		t.Errorf("the embedded cluster at %s still serves after the command returned", url)
	}
}

// TestEmbeddedClusterSameAsFake: on the light embedded cluster the command
// prints what it prints on examples/fake-apiserver's (discoverytest, the
// real handlers, with the same 200 CRDs in 20 groups), byte for byte; and
// both serve the same documents under the same ETags, so that a cache
// filled on one is revalidated by the other with two 304s.
func TestEmbeddedClusterSameAsFake(t *testing.T) {
	testenv.NoKubeconfig(t)
	_, fake := discoverytest.Start(t, discoverytest.WithCRDs(lightcluster.CRDs, lightcluster.Groups))
	light, stop, err := lightcluster.Start(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, args := range [][]string{{}, {"-o", "wide"}, {"-o", "name"}, {"-o", "json"}, {"--namespaced=false"}, {"--api-group", "g003.stress.example.com", "-o", "wide"}} {
		got, _ := apiResources(t, t.TempDir(), append([]string{"--server", light}, args...)...)
		want, _ := apiResources(t, t.TempDir(), append([]string{"--server", fake}, args...)...)
		if got != want {
			t.Errorf("%v: the light cluster's output differs from the fake's:\n got:\n%s\nwant:\n%s", args, got, want)
		}
	}
	for _, path := range []string{"/api", "/apis"} {
		for _, accept := range []string{"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"} {
			lb, letag := get(t, light+path, accept)
			fb, fetag := get(t, fake+path, accept)
			if !bytes.Equal(lb, fb) || letag != fetag || letag == "" {
				t.Errorf("%s (%s): the light cluster serves %d bytes with ETag %.20s..., the fake %d with %.20s...", path, accept, len(lb), letag, len(fb), fetag)
			}
		}
	}
}

func get(t *testing.T, url, accept string) (body []byte, etag string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", url, err, resp.Status)
	}
	return body, resp.Header.Get("ETag")
}

// TestEmbeddedClusterSameAsKubectl: on the light embedded cluster, the
// default table, -o wide and -o name are kubectl's, byte for byte.
func TestEmbeddedClusterSameAsKubectl(t *testing.T) {
	testenv.Tool(t, "kubectl")
	light, stop, err := lightcluster.Start(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, args := range [][]string{{}, {"-o", "wide"}, {"-o", "name"}} {
		args = append([]string{"--server", light}, args...)
		got, _ := apiResources(t, t.TempDir(), args...)
		if want := kubectl(t, append([]string{"api-resources"}, args...)...); got != want {
			t.Errorf("%v on the light cluster:\n got:\n%s\nwant:\n%s", args[2:], got, want)
		}
	}
}

func TestOutputs(t *testing.T) {
	_, base := discoverytest.Start(t)
	wide, _ := apiResources(t, t.TempDir(), "--server", base, "-o", "wide", "--api-group", "apps")
	if !strings.Contains(wide, "VERBS") || !strings.Contains(wide, " create,delete,deletecollection,get,list,patch,update,watch   all\n") {
		t.Errorf("wide:\n%s", wide)
	}
	js, _ := apiResources(t, t.TempDir(), "--server", base, "-o", "json", "--sort-by", "kind")
	var items []struct{ Name, Kind, APIVersion string }
	if err := json.Unmarshal([]byte(js), &items); err != nil || len(items) < 50 {
		t.Fatalf("json: %v (%d items)", err, len(items))
	}
	if !slices.IsSortedFunc(items, func(a, b struct{ Name, Kind, APIVersion string }) int { return strings.Compare(a.Kind, b.Kind) }) {
		t.Errorf("--sort-by kind not sorted")
	}
	var errOut bytes.Buffer
	if err := run([]string{"-o", "yaml"}, &bytes.Buffer{}, &errOut); err == nil {
		t.Errorf("-o yaml accepted")
	}
	// A flag error is the command's to print, once (main prints it).
	errOut.Reset()
	if err := run([]string{"--no-such-flag"}, &bytes.Buffer{}, &errOut); err == nil || !strings.Contains(err.Error(), "unknown flag: --no-such-flag") || errOut.Len() != 0 {
		t.Errorf("unknown flag: %v, and on stderr %q", err, errOut.String())
	}
}

// TestCacheDirectoryProblems: as kubectl does, the command works without
// its cache when the cache directory cannot be used, and says so once.
func TestCacheDirectoryProblems(t *testing.T) {
	_, base := discoverytest.Start(t)
	want, _ := apiResources(t, t.TempDir(), "--server", base, "-o", "name")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) string
	}{
		{"a file where the cache directory should be", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "cache")
			os.WriteFile(p, []byte("not a directory"), 0o600)
			return p
		}},
		{"a file where the cluster's directory should be", func(t *testing.T) string {
			root := t.TempDir()
			apiResources(t, root, "--server", base, "-o", "name")
			entries, _ := os.ReadDir(root)
			for _, e := range entries {
				os.RemoveAll(filepath.Join(root, e.Name()))
				os.WriteFile(filepath.Join(root, e.Name()), []byte("x"), 0o600)
			}
			return root
		}},
		{"the cache directory below a file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "file")
			os.WriteFile(p, nil, 0o600)
			return filepath.Join(p, "cache")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, stderr := apiResources(t, tc.setup(t), "--server", base, "-o", "name")
			if got != want {
				t.Errorf("output differs without a cache:\n%s", got)
			}
			if n := strings.Count(stderr, "warning"); n != 1 || !strings.Contains(stderr, "without a disk cache") {
				t.Errorf("want one warning, got:\n%s", stderr)
			}
		})
	}
}

// TestWarmCacheFailingServer: with a warm cache and a server that stopped
// answering, one run waits at most one refresh timeout, prints the cached
// list and says on stderr that it is the cached one and why.
func TestWarmCacheFailingServer(t *testing.T) {
	srv, base := discoverytest.Start(t)
	cache := t.TempDir()
	want, _ := apiResources(t, cache, "--server", base, "-o", "name")
	srv.InjectFault("/apis", discoverytest.Fault{Status: 503})
	got, stderr := apiResources(t, cache, "--server", base, "-o", "name")
	if got != want {
		t.Errorf("the cached list was not printed:\n%s", got)
	}
	if !strings.Contains(stderr, "could not revalidate the cached discovery") || !strings.Contains(stderr, "unable to handle the request") {
		t.Errorf("stderr does not say the list is cached and why:\n%s", stderr)
	}
}

// TestErrorsSayWhatFailed: a server that cannot be reached, one whose
// certificate is not trusted, one that is not Kubernetes and one that does
// not answer in time each get an error that says so and names the URL,
// never kubectl's "the server doesn't have a resource type".
func TestErrorsSayWhatFailed(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	untrusted.StartTLS()
	defer untrusted.Close()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<html><body>Not a Kubernetes API</body></html>")
	}))
	defer web.Close()
	hung := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hung)

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"connection refused", []string{"--server", closed.URL}, []string{closed.URL + "/api", "connection refused"}},
		{"untrusted certificate", []string{"--server", untrusted.URL}, []string{untrusted.URL + "/api", "certificate signed by unknown authority"}},
		{"not Kubernetes", []string{"--server", web.URL}, []string{web.URL + "/api", "404", "text/html"}},
		{"timeout", []string{"--server", slow.URL, "--request-timeout", "200ms"}, []string{slow.URL + "/api", "deadline exceeded|Timeout exceeded"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KUBECACHEDIR", t.TempDir())
			err := run(append(c.args, "-o", "name"), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want { // "a|b": either (net/http words a timeout as where it hit)
				if !slices.ContainsFunc(strings.Split(w, "|"), func(w string) bool { return strings.Contains(err.Error(), w) }) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "doesn't have a resource type") {
				t.Errorf("error blames the resource type: %v", err)
			}
		})
	}
}

// TestPreferredVersionsSameAsKubectl: kubectl lists each resource in its
// group's preferred version, the first that is not Stale, and a resource
// that version does not serve in the first version that does; so do we,
// without client-go's conversion.
func TestPreferredVersionsSameAsKubectl(t *testing.T) {
	testenv.Tool(t, "kubectl")
	srv, base := discoverytest.Start(t)
	if err := srv.SetStale(schema.GroupVersion{Group: "autoscaling", Version: "v2"}, true); err != nil {
		t.Fatal(err)
	}
	old := apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Resources: []apidiscoveryv2.APIResourceDiscovery{
		{Resource: "jobs", ResponseKind: &metav1.GroupVersionKind{Kind: "Job"}, Scope: apidiscoveryv2.ScopeNamespace, Verbs: []string{"get", "list"}},
		{Resource: "oldjobs", ResponseKind: &metav1.GroupVersionKind{Kind: "OldJob"}, Scope: apidiscoveryv2.ScopeNamespace, Verbs: []string{"get", "list"}},
	}}
	if err := srv.SetGroupVersion("batch", old); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"--api-group", "batch"}, {"--api-group", "autoscaling", "-o", "wide"}} {
		args = append([]string{"--server", base}, args...)
		got, _ := apiResources(t, t.TempDir(), args...)
		want := kubectl(t, append([]string{"api-resources"}, args...)...)
		if got != want {
			t.Errorf("%v:\n got:\n%s\nwant:\n%s", args[2:], got, want)
		}
		if len(args) == 4 && args[3] == "batch" && !strings.Contains(got, "oldjobs ") {
			t.Errorf("the resource only batch/v1beta1 serves is not listed:\n%s", got)
		}
	}
}
