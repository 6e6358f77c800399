package main

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/examples/internal/apiresources"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// startFleet serves n clusters on the surfaces and writes a kubeconfig
// with a context per cluster, named by its id.
func startFleet(t *testing.T, n int, surfaces []discoverytest.Surface) (*discoverytest.Fleet, string) {
	t.Helper()
	ids := discoverytest.ClusterIDs(n)
	f, base := discoverytest.StartFleet(t, ids, surfaces)
	return f, writeKubeconfig(t, base, ids)
}

func writeKubeconfig(t *testing.T, base string, ids []string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, id := range ids {
		cfg.Clusters[id] = &clientcmdapi.Cluster{Server: base + discoverytest.ClusterPath(id)}
		cfg.AuthInfos[id] = &clientcmdapi.AuthInfo{}
		cfg.Contexts[id] = &clientcmdapi.Context{Cluster: id, AuthInfo: id}
	}
	cfg.CurrentContext = ids[0]
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	return file
}

func distinctSurfaces(t *testing.T, k, crds, groups int) []discoverytest.Surface {
	t.Helper()
	s, err := discoverytest.DistinctSurfaces(k, crds, groups)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fleetCmd runs the command in process with its own cache directory, and
// returns its error rather than failing.
func fleetCmd(t *testing.T, cacheDir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("KUBECACHEDIR", cacheDir)
	var out, errOut bytes.Buffer
	err = run(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustFleet is fleetCmd for a run that must succeed.
func mustFleet(t *testing.T, cacheDir string, args ...string) (stdout, stderr string) {
	t.Helper()
	out, errOut, err := fleetCmd(t, cacheDir, args...)
	if err != nil {
		t.Fatalf("fleet %v: %v\n%s", args, err, errOut)
	}
	return out, errOut
}

// apiResourcesNames is `api-resources -o name` against one context of the
// kubeconfig: its own discovery client (protobuf, no fleet, no cache)
// and the selection and printing api-resources runs.
func apiResourcesNames(t *testing.T, kubeconfig, name string) []string {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := discovery.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := apiresources.Run(context.Background(), client, &apiresources.Options{Output: "name"}, time.Now(), &out, &errOut); err != nil {
		t.Fatalf("api-resources on %s: %v\n%s", name, err, errOut.String())
	}
	return strings.Fields(out.String())
}

// byGroupThenName orders "resource.group" lines as api-resources sorts
// them: by group ("" for the core group), then by resource.
func byGroupThenName(a, b string) int {
	an, ag, _ := strings.Cut(a, ".")
	bn, bg, _ := strings.Cut(b, ".")
	return cmp.Or(cmp.Compare(ag, bg), cmp.Compare(an, bn))
}

// mixedFleet is six clusters on three surfaces whose CRDs sit in other
// groups, c0001 with a CRD of its own and c0002 with autoscaling/v2 Stale
// (so api-resources lists its autoscalers in v1).
func mixedFleet(t *testing.T) (*discoverytest.Fleet, string) {
	t.Helper()
	f, kubeconfig := startFleet(t, 6, distinctSurfaces(t, 3, 40, 4))
	if err := f.Cluster("c0001").AddCRD(discoverytest.CRD{Group: "only.example.com", Versions: []string{"v1beta1"}, Kind: "Lonely", Namespaced: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.Cluster("c0002").SetStale(schema.GroupVersion{Group: "autoscaling", Version: "v2"}, true); err != nil {
		t.Fatal(err)
	}
	return f, kubeconfig
}

// TestNameIsUnionOfAPIResources: -o name prints exactly the union of what
// api-resources -o name prints for each context, sorted as api-resources
// sorts; a second run, from the disk cache, prints the same after two
// 304s a cluster.
func TestNameIsUnionOfAPIResources(t *testing.T) {
	_, kubeconfig := mixedFleet(t)
	var want []string
	for _, id := range discoverytest.ClusterIDs(6) {
		for _, name := range apiResourcesNames(t, kubeconfig, id) {
			if !slices.Contains(want, name) {
				want = append(want, name)
			}
		}
	}
	slices.SortFunc(want, byGroupThenName)
	if !slices.Contains(want, "lonelys.only.example.com") || !slices.Contains(want, "widget0005s.g005.stress.example.com") {
		t.Fatalf("the fleet is not what the test means it to be: %v", want)
	}

	cache := t.TempDir()
	out, _ := mustFleet(t, cache, "--kubeconfig", kubeconfig, "-o", "name")
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("-o name:\n got %v\nwant %v", got, want)
	}
	again, stderr := mustFleet(t, cache, "--kubeconfig", kubeconfig, "-o", "name", "--stats")
	if again != out {
		t.Errorf("the second run, from the disk cache, printed:\n%s", again)
	}
	if !strings.Contains(stderr, "6 clusters, 0 failed") || !strings.Contains(stderr, " 12 requests, 0 bytes, 12 not modified") || !strings.Contains(stderr, " 6 disk loads") {
		t.Errorf("the second run did not revalidate the cached discovery with two 304s a cluster: %s", stderr)
	}
}

// tableRow finds the table's row of resource in group (a named group) and
// returns its columns after NAME and APIGROUP.
func tableRow(t *testing.T, table, resource, group string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 6 && fields[0] == resource && fields[1] == group {
			return fields[2:]
		}
	}
	t.Fatalf("no row for %s.%s in:\n%s", resource, group, table)
	return nil
}

func TestTable(t *testing.T) {
	_, kubeconfig := mixedFleet(t)
	table, _ := mustFleet(t, t.TempDir(), "--kubeconfig", kubeconfig)
	if !strings.HasPrefix(table, "NAME ") || !strings.Contains(strings.SplitN(table, "\n", 2)[0], "CLUSTERS   VERSIONS") {
		t.Errorf("header: %q", strings.SplitN(table, "\n", 2)[0])
	}
	for _, c := range []struct {
		resource, group string
		want            []string // NAMESPACED, KIND, CLUSTERS, VERSIONS...
	}{
		{"deployments", "apps", []string{"true", "Deployment", "6/6", "v1"}},
		{"horizontalpodautoscalers", "autoscaling", []string{"true", "HorizontalPodAutoscaler", "6/6", "v2(5)", "v1(1)"}},
		{"lonelys", "only.example.com", []string{"true", "Lonely", "1/6", "v1beta1"}},
		// Surface i spreads 40 CRDs over 4+i groups: Widget0004 is in
		// g000 on surface 1's clusters (c0001 and c0004) only.
		{"widget0004s", "g000.stress.example.com", []string{"true", "Widget0004", "2/6", "v1"}},
		{"widget0000s", "g000.stress.example.com", []string{"true", "Widget0000", "6/6", "v1"}},
	} {
		if got := tableRow(t, table, c.resource, c.group); !slices.Equal(got, c.want) {
			t.Errorf("%s.%s: got %v, want %v", c.resource, c.group, got, c.want)
		}
	}
	// The rows are in api-resources' order.
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		fields := strings.Fields(line)
		if fields[1] == "true" || fields[1] == "false" {
			names = append(names, fields[0]) // the core group
		} else {
			names = append(names, fields[0]+"."+fields[1])
		}
	}
	if !slices.IsSortedFunc(names, byGroupThenName) {
		t.Errorf("rows not sorted by group, then name: %v", names)
	}

	wide, _ := mustFleet(t, t.TempDir(), "--kubeconfig", kubeconfig, "-o", "wide")
	if got := tableRow(t, wide, "lonelys", "only.example.com"); got[len(got)-1] != "c0000,c0002,c0003,c0004,c0005" {
		t.Errorf("-o wide: lonelys not served by %v, want c0000,c0002,c0003,c0004,c0005", got)
	}
	if got := tableRow(t, wide, "deployments", "apps"); len(got) != 4 {
		t.Errorf("-o wide: deployments, served by all, has %v", got)
	}
}

// TestFailingCluster: a cluster that cannot be read is named on stderr
// with why; the others are printed; the command fails (exit status 1).
func TestFailingCluster(t *testing.T) {
	f, kubeconfig := startFleet(t, 4, []discoverytest.Surface{{discoverytest.WithCRDs(10, 2)}})
	f.Cluster("c0002").InjectFault("*", discoverytest.Fault{Status: http.StatusServiceUnavailable})
	out, stderr, err := fleetCmd(t, t.TempDir(), "--kubeconfig", kubeconfig, "--stats")
	if err == nil || !strings.Contains(err.Error(), "1 of 4 contexts failed") {
		t.Errorf("error: %v", err)
	}
	if !regexp.MustCompile(`(?m)^error: cluster c0002: .*the server is currently unable to handle the request`).MatchString(stderr) {
		t.Errorf("stderr does not name the failed cluster and why:\n%s", stderr)
	}
	if strings.Contains(stderr, "cluster c0001") {
		t.Errorf("stderr names a cluster that did not fail:\n%s", stderr)
	}
	if got := tableRow(t, out, "deployments", "apps"); got[2] != "3/3" {
		t.Errorf("deployments: %v, want served by the 3 clusters read", got)
	}
	if !strings.Contains(stderr, "4 clusters, 1 failed") {
		t.Errorf("--stats: %s", stderr)
	}
}

// TestEveryClusterFails: when no cluster could be read, nothing is printed
// on stdout (it printed the table's header alone), and stderr names each
// cluster and why.
func TestEveryClusterFails(t *testing.T) {
	f, kubeconfig := startFleet(t, 2, []discoverytest.Surface{{discoverytest.WithCRDs(10, 2)}})
	for _, id := range []string{"c0000", "c0001"} {
		f.Cluster(id).InjectFault("*", discoverytest.Fault{Status: http.StatusServiceUnavailable})
	}
	out, stderr, err := fleetCmd(t, t.TempDir(), "--kubeconfig", kubeconfig)
	if err == nil || !strings.Contains(err.Error(), "2 of 2 contexts failed") {
		t.Errorf("error: %v", err)
	}
	if out != "" {
		t.Errorf("stdout, with every cluster failed: %q, want nothing", out)
	}
	if !strings.Contains(stderr, "error: cluster c0000: ") || !strings.Contains(stderr, "error: cluster c0001: ") {
		t.Errorf("stderr does not name each failed cluster:\n%s", stderr)
	}
}

// TestContexts: --contexts picks contexts by glob; one that matches none
// or is not a glob is an error.
func TestContexts(t *testing.T) {
	_, kubeconfig := startFleet(t, 12, []discoverytest.Surface{{discoverytest.WithCRDs(10, 2)}})
	out, stderr := mustFleet(t, t.TempDir(), "--kubeconfig", kubeconfig, "--contexts", "c000[13]", "--stats")
	if got := tableRow(t, out, "deployments", "apps"); got[2] != "2/2" || !strings.Contains(stderr, "stats: 2 clusters,") {
		t.Errorf("--contexts c000[13]: deployments %v, %s", got, stderr)
	}
	if _, _, err := fleetCmd(t, t.TempDir(), "--kubeconfig", kubeconfig, "--contexts", "prod-*"); err == nil || !strings.Contains(err.Error(), `no context of `+kubeconfig+` matches --contexts "prod-*"`) {
		t.Errorf("no match: %v", err)
	}
	if _, _, err := fleetCmd(t, t.TempDir(), "--kubeconfig", kubeconfig, "--contexts", "c[0"); err == nil || !strings.Contains(err.Error(), "invalid --contexts") {
		t.Errorf("a bad glob: %v", err)
	}
}

// TestKubeconfigEnv: without --kubeconfig, the files of $KUBECONFIG are
// read, the first that names a context winning, as kubectl merges them.
func TestKubeconfigEnv(t *testing.T) {
	ids := discoverytest.ClusterIDs(3)
	_, base := discoverytest.StartFleet(t, ids, []discoverytest.Surface{{discoverytest.WithCRDs(10, 2)}})
	first, second := writeKubeconfig(t, base, ids[:2]), writeKubeconfig(t, base, ids[1:])
	t.Setenv("KUBECONFIG", first+string(filepath.ListSeparator)+filepath.Join(t.TempDir(), "missing")+string(filepath.ListSeparator)+second)
	_, stderr := mustFleet(t, t.TempDir(), "--stats")
	if !strings.Contains(stderr, "stats: 3 clusters, 0 failed") {
		t.Errorf("%s", stderr)
	}
	if _, _, err := fleetCmd(t, t.TempDir(), "--kubeconfig", filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a --kubeconfig that does not exist: %v", err)
	}
}

// TestStats: --stats counts the clusters and the distinct surfaces, and
// the cold starts the servers confirmed with two 304s because the fleet
// held their surface.
func TestStats(t *testing.T) {
	// c0000-c0006 on surface 0, c0007 on 1, c0008 on 2.
	ids := discoverytest.ClusterIDs(9)
	_, base := discoverytest.StartFleet(t, ids, distinctSurfaces(t, 3, 20, 4),
		discoverytest.WithAssignment(func(i int, _ string) int { return max(0, i-6) }))
	// The fake builds each surface's OpenAPI root on the first request,
	// which a real server keeps built: so that no size probe times out on
	// that.
	for _, id := range []string{"c0000", "c0007", "c0008"} {
		resp, err := http.Get(base + discoverytest.ClusterPath(id) + "/openapi/v3")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	kubeconfig := writeKubeconfig(t, base, ids)
	_, stderr := mustFleet(t, t.TempDir(), "--kubeconfig", kubeconfig, "-o", "name", "--stats", "--concurrency", "1")
	// Read one at a time, in order, each cold start probing the size of
	// its OpenAPI root first (a 206): c0000 first, then c0001-c0006 each
	// confirm its surface (two 304s), c0007 and c0008, whose roots are of
	// new sizes, are offered surface 0's and get their /apis (their /api,
	// the same, is confirmed).
	if !regexp.MustCompile(`stats: 9 clusters, 0 failed, 3 surfaces, 27 requests, \d+ bytes, 14 not modified, 6 surface hits, 0 disk loads, [\d.]+ MiB heap in use, \S+ wall\n`).MatchString(stderr) {
		t.Errorf("--stats: %s", stderr)
	}
}

func TestFlags(t *testing.T) {
	_, kubeconfig := startFleet(t, 1, []discoverytest.Surface{{discoverytest.WithCRDs(1, 1)}})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "json"}, "--output must be wide or name"},
		{[]string{"--request-timeout", "soon"}, "invalid --request-timeout"},
		{[]string{"--request-timeout", "-1s"}, "must not be negative"},
		{[]string{"--concurrency", "0"}, "--concurrency must be at least 1"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
	} {
		_, stderr, err := fleetCmd(t, t.TempDir(), append([]string{"--kubeconfig", kubeconfig}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
		if stderr != "" { // main prints the error, once
			t.Errorf("%v: stderr %q", c.args, stderr)
		}
	}
	if _, _, err := fleetCmd(t, t.TempDir(), "--kubeconfig", kubeconfig, "--request-timeout", "0", "--cache-dir", ""); err != nil {
		t.Errorf("--request-timeout 0 (no limit) without a disk cache: %v", err)
	}
}

// TestEmbeddedFleetWithoutKubeconfig: with no kubeconfig the command reads
// an embedded fleet, examples/fake-apiserver run by `go run` as a child
// process (this command does not link it), which is gone, with its
// kubeconfig, when the command returns.
func TestEmbeddedFleetWithoutKubeconfig(t *testing.T) {
	testenv.NoKubeconfig(t)
	t.Setenv(cli.FakeAPIServerEnv, "")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cache := t.TempDir()
	out, stderr := mustFleet(t, cache, "--stats")
	if !strings.Contains(stderr, "embedded fleet of 20 fake clusters") || !strings.Contains(stderr, "stats: 20 clusters, 0 failed, 3 surfaces") {
		t.Errorf("stderr: %q", stderr)
	}
	if got := tableRow(t, out, "deployments", "apps"); got[2] != "20/20" {
		t.Errorf("deployments: %v", got)
	}
	// 200 CRDs over 20, 21 and 22 groups: Widget0020 is in g000 on
	// surface 0's 7 clusters only.
	if got := tableRow(t, out, "widget0020s", "g000.stress.example.com"); got[2] != "7/20" {
		t.Errorf("widget0020s: %v", got)
	}
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(stderr)
	if url == "" {
		t.Fatalf("no URL on stderr: %q", stderr)
	}
	if resp, err := http.Get(url + "/k8s/clusters/c0000/version"); err == nil {
		resp.Body.Close()
		t.Errorf("the embedded fleet at %s still serves after the command returned", url)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "kubeatlas-fleet-*")); len(left) > 0 {
		t.Errorf("the embedded fleet's kubeconfig is left: %v", left)
	}
	if left, _ := os.ReadDir(cache); len(left) > 0 {
		t.Errorf("the embedded fleet, whose port changes from run to run, was cached: %v", left)
	}

	// Where it cannot be started, the error says why and what to do.
	t.Setenv(cli.FakeAPIServerEnv, filepath.Join(t.TempDir(), "missing"))
	if _, _, err := fleetCmd(t, t.TempDir()); err == nil || !strings.Contains(err.Error(), "no kubeconfig found") || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("with no fake-apiserver to run: %v", err)
	}
}
