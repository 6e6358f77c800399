package discoverytest_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// startSmallFleet serves c0000..c0003 on two distinct surfaces of 30 CRDs:
// c0000 and c0002 on the first (5 groups), c0001 and c0003 on the second
// (6 groups).
func startSmallFleet(t *testing.T) (*discoverytest.Fleet, string) {
	t.Helper()
	surfaces, err := discoverytest.DistinctSurfaces(2, 30, 5)
	if err != nil {
		t.Fatal(err)
	}
	return discoverytest.StartFleet(t, discoverytest.ClusterIDs(4), surfaces)
}

func clusterURL(base, id string) string { return base + discoverytest.ClusterPath(id) }

// clusterRoot reads a cluster's OpenAPI v3 root: path -> serverRelativeURL.
func clusterRoot(t *testing.T, base, id string) map[string]string {
	t.Helper()
	return openAPIRoot(t, clusterURL(base, id))
}

// TestFleetSurfaces: two clusters of one surface serve the same documents
// with the same ETags (and OpenAPI hashes), under their own prefixes; a
// cluster of another surface serves others.
func TestFleetSurfaces(t *testing.T) {
	f, base := startSmallFleet(t)
	for id, want := range map[string]int{"c0000": 0, "c0001": 1, "c0002": 0, "c0003": 1} {
		if got := f.Cluster(id).Surface(); got != want {
			t.Errorf("%s on surface %d, want %d", id, got, want)
		}
	}
	for _, tc := range []struct{ path, accept string }{
		{"/apis", acceptV2JSON},
		{"/apis", acceptV2PB},
		{"/api", acceptV2JSON},
	} {
		r0, b0 := get(t, clusterURL(base, "c0000")+tc.path, "Accept", tc.accept)
		r2, b2 := get(t, clusterURL(base, "c0002")+tc.path, "Accept", tc.accept)
		r1, b1 := get(t, clusterURL(base, "c0001")+tc.path, "Accept", tc.accept)
		for _, r := range []*http.Response{r0, r1, r2} {
			if r.StatusCode != http.StatusOK || r.Header.Get("ETag") == "" {
				t.Fatalf("%s %s: %d, ETag %q", tc.path, tc.accept, r.StatusCode, r.Header.Get("ETag"))
			}
		}
		if r0.Header.Get("ETag") != r2.Header.Get("ETag") || string(b0) != string(b2) {
			t.Errorf("%s %s: two clusters of one surface differ", tc.path, tc.accept)
		}
		sameAcrossSurfaces := tc.path == "/api" // the core group is in every surface
		if got := r0.Header.Get("ETag") == r1.Header.Get("ETag"); got != sameAcrossSurfaces {
			t.Errorf("%s %s: same ETag on both surfaces is %v, want %v", tc.path, tc.accept, got, sameAcrossSurfaces)
		}
		if sameAcrossSurfaces != (string(b0) == string(b1)) {
			t.Errorf("%s %s: bodies on both surfaces equal is %v, want %v", tc.path, tc.accept, !sameAcrossSurfaces, sameAcrossSurfaces)
		}
	}

	// OpenAPI: the same documents (by hash) on one surface, each listed
	// under its cluster's prefix; the other surface's CRD groups differ.
	root0, root2, root1 := clusterRoot(t, base, "c0000"), clusterRoot(t, base, "c0002"), clusterRoot(t, base, "c0001")
	if len(root0) == 0 || len(root0) != len(root2) {
		t.Fatalf("roots of c0000 and c0002 list %d and %d paths", len(root0), len(root2))
	}
	for path, u := range root0 {
		if !strings.HasPrefix(u, "/k8s/clusters/c0000/openapi/v3/"+path+"?hash=") {
			t.Errorf("c0000 lists %s at %q, not under its prefix", path, u)
		}
		if want := strings.Replace(u, "/c0000/", "/c0002/", 1); root2[path] != want {
			t.Errorf("c0002 lists %s at %q, want %q", path, root2[path], want)
		}
	}
	hash := func(u string) string { _, h, _ := strings.Cut(u, "?hash="); return h }
	if p := "apis/apps/v1"; hash(root0[p]) != hash(root1[p]) {
		t.Errorf("%s differs across surfaces: %q, %q", p, root0[p], root1[p])
	}
	if p := "apis/g000.stress.example.com/v1"; hash(root0[p]) == hash(root1[p]) {
		t.Errorf("%s is the same on both surfaces, whose CRD groups differ", p)
	}
	if _, ok := root1["apis/g005.stress.example.com/v1"]; !ok {
		t.Errorf("c0001 (6 groups) does not list g005")
	}
	if _, ok := root0["apis/g005.stress.example.com/v1"]; ok {
		t.Errorf("c0000 (5 groups) lists g005")
	}

	// A document through the prefix is the surface's, with the listed hash.
	resp, _ := get(t, base+root0["apis/g000.stress.example.com/v1"])
	if resp.StatusCode != http.StatusOK || `"`+hash(root0["apis/g000.stress.example.com/v1"])+`"` != resp.Header.Get("ETag") {
		t.Errorf("document through the prefix: %d, ETag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	if resp, _ := get(t, base+"/k8s/clusters/nope/apis"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown cluster: %d, want 404", resp.StatusCode)
	}
}

// TestFleetRealClients: kubeatlas's discovery and openapi3 clients work
// against one cluster of a fleet through its prefix, and the requests are
// counted for that cluster alone.
func TestFleetRealClients(t *testing.T) {
	f, base := startSmallFleet(t)
	ctx := context.Background()
	dc, err := discovery.NewForHTTPClient(http.DefaultClient, clusterURL(base, "c0001"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := dc.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Group("g005.stress.example.com"); !ok {
		t.Errorf("c0001's snapshot has no g005 (its surface has 6 groups)")
	}
	if _, ok := snap.Group("apps"); !ok {
		t.Errorf("c0001's snapshot has no apps group")
	}
	api, apis := snap.ETags()
	resp, _ := get(t, clusterURL(base, "c0003")+"/apis", "Accept", acceptV2PB)
	if _, want := snap.ETags(); resp.Header.Get("ETag") != want || api == "" {
		t.Errorf("c0003 (same surface) /apis ETag %q, c0001's snapshot has %q", resp.Header.Get("ETag"), apis)
	}

	oc, err := openapi3.NewForHTTPClient(http.DefaultClient, clusterURL(base, "c0001"))
	if err != nil {
		t.Fatal(err)
	}
	paths, err := oc.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const gv = "apis/g005.stress.example.com/v1"
	if !strings.HasPrefix(paths[gv], "/k8s/clusters/c0001/openapi/v3/"+gv+"?hash=") {
		t.Errorf("root lists %s at %q", gv, paths[gv])
	}
	doc, err := oc.Document(ctx, gv)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.JSON) == 0 || !strings.Contains(string(doc.JSON), "Widget0005") {
		t.Errorf("document %s has no Widget0005", gv)
	}

	st := f.Cluster("c0001").Stats()
	// /api, /apis, the root, one document.
	if st.Requests != 4 || st.Errors != 0 || st.NotModified != 0 || st.Bytes == 0 {
		t.Errorf("c0001 stats %+v, want 4 requests, no errors", st)
	}
	if st := f.Cluster("c0000").Stats(); st.Requests != 0 {
		t.Errorf("c0000 stats %+v, want nothing", st)
	}
	// The shared surface logs the stripped paths of c0001's and c0003's requests.
	var sawDoc bool
	for _, r := range f.Surfaces()[1].Requests() {
		if strings.HasPrefix(r.Path, "/k8s/") {
			t.Errorf("surface logged %s with the prefix", r.Path)
		}
		sawDoc = sawDoc || r.Path == "/openapi/v3/"+gv
	}
	if !sawDoc {
		t.Errorf("surface 1 did not log the document request")
	}
}

// TestFleetStaleHashRedirect: the 301 for a stale ?hash= sends the client
// to the current document under the cluster's prefix, which the openapi3
// client follows to the document.
func TestFleetStaleHashRedirect(t *testing.T) {
	_, base := startSmallFleet(t)
	const gv = "apis/g001.stress.example.com/v1"
	stale := "/openapi/v3/" + gv + "?hash=" + strings.Repeat("0", 128)

	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, _ := do(t, c, http.MethodGet, clusterURL(base, "c0002")+stale)
	current := clusterRoot(t, base, "c0002")[gv]
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != current {
		t.Fatalf("stale hash: %d, Location %q, want 301 to %q", resp.StatusCode, resp.Header.Get("Location"), current)
	}

	oc, err := openapi3.NewForHTTPClient(http.DefaultClient, clusterURL(base, "c0002"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{stale, "/k8s/clusters/c0002" + stale} {
		doc, err := oc.DocumentAt(context.Background(), gv, u)
		if err != nil {
			t.Fatalf("DocumentAt %s: %v", u, err)
		}
		_, want := get(t, base+current)
		if string(doc.JSON) != string(want) {
			t.Errorf("DocumentAt %s: not the current document", u)
		}
	}
}

// TestFleetRootRanges: the rewritten OpenAPI root answers ranges as
// kube-openapi answers them on the original, http.ServeContent's way: a
// range in the head (a cold start's probe of the root's size, answered
// without rewriting) and one past it state the rewritten root's size, and
// give its bytes.
func TestFleetRootRanges(t *testing.T) {
	f, base := startSmallFleet(t)
	checkRootRanges(t, base)
	// A change to the cluster (and to its surface's other clusters'
	// server): the size probe of its root, asked before the root itself,
	// says the new size at once.
	for _, change := range []func() error{
		func() error {
			return f.Cluster("c0002").AddCRD(discoverytest.CRD{Group: "ranges.example.com", Versions: []string{"v1"}, Kind: "Range"})
		},
		func() error {
			return f.Cluster("c0002").AddCRD(discoverytest.CRD{Group: "ranges2.example.com", Versions: []string{"v1"}, Kind: "Range"})
		},
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, clusterURL(base, "c0002")+"/openapi/v3", nil)
		req.Header.Set("Range", "bytes=0-0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		_, whole := get(t, clusterURL(base, "c0002")+"/openapi/v3")
		if got, want := resp.Header.Get("Content-Range"), fmt.Sprintf("bytes 0-0/%d", len(whole)); got != want {
			t.Errorf("after a change: the probe says %q, the root is %d bytes", got, len(whole))
		}
	}
	checkRootRanges(t, base)
}

func checkRootRanges(t *testing.T, base string) {
	t.Helper()
	for _, rng := range []string{"bytes=0-0", "bytes=100-163", "bytes=0-9,100-109"} {
		_, whole := get(t, clusterURL(base, "c0002")+"/openapi/v3")
		req, err := http.NewRequest(http.MethodGet, clusterURL(base, "c0002")+"/openapi/v3", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Range", rng)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusPartialContent {
			t.Errorf("%s: status %d", rng, resp.StatusCode)
			continue
		}
		if strings.Contains(rng, ",") {
			if !strings.Contains(string(body), fmt.Sprintf("/%d", len(whole))) {
				t.Errorf("%s: the parts do not state the size %d", rng, len(whole))
			}
			continue
		}
		var start, end int
		fmt.Sscanf(rng, "bytes=%d-%d", &start, &end)
		if got, want := resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", start, end, len(whole)); got != want || string(body) != string(whole[start:end+1]) {
			t.Errorf("%s: Content-Range %q (want %q), body %q (want %q)", rng, got, want, body, whole[start:end+1])
		}
	}
}

// TestFleetClusterChange: a change to one cluster gives it a Server of its
// own; the other clusters of its surface keep their ETags and documents,
// and its own unchanged documents keep their hashes.
func TestFleetClusterChange(t *testing.T) {
	f, base := startSmallFleet(t)
	etag := func(id string) string {
		resp, _ := get(t, clusterURL(base, id)+"/apis", "Accept", acceptV2JSON)
		return resp.Header.Get("ETag")
	}
	before0, before2 := etag("c0000"), etag("c0002")
	root2 := clusterRoot(t, base, "c0002")
	surface := f.Surfaces()[0]

	c0 := f.Cluster("c0000")
	if err := c0.RemoveCRD("g000.stress.example.com", "nothings"); err == nil {
		t.Fatal("removing a CRD that does not exist succeeded")
	}
	if c0.Surface() != 0 || c0.Server() != surface {
		t.Fatalf("a failed change moved c0000 off its surface")
	}
	if err := c0.AddCRD(discoverytest.CRD{Group: "extra.example.com", Versions: []string{"v1"}, Kind: "Extra"}); err != nil {
		t.Fatal(err)
	}
	if c0.Surface() != -1 || c0.Server() == surface {
		t.Errorf("c0000 is still on its surface after a change")
	}
	if got := etag("c0000"); got == before0 {
		t.Errorf("c0000's /apis ETag did not change")
	}
	if got := etag("c0002"); got != before2 {
		t.Errorf("c0002's /apis ETag changed from %s to %s", before2, got)
	}
	if got := surface.Backends()[0].Resources(schema.GroupVersion{Group: "extra.example.com", Version: "v1"}); got != nil {
		t.Errorf("the surface serves the cluster's CRD: %v", got)
	}
	root0 := clusterRoot(t, base, "c0000")
	if _, ok := root0["apis/extra.example.com/v1"]; !ok {
		t.Errorf("c0000's root does not list its new group-version")
	}
	for path, u := range root2 {
		if want := strings.Replace(u, "/c0002/", "/c0000/", 1); root0[path] != want {
			t.Errorf("c0000 lists %s at %q, c0002 at %q", path, root0[path], u)
		}
	}
	// A second change goes to the same own Server.
	own := c0.Server()
	if err := c0.SetStale(schema.GroupVersion{Group: "extra.example.com", Version: "v1"}, true); err != nil {
		t.Fatal(err)
	}
	if c0.Server() != own || etag("c0002") != before2 {
		t.Errorf("a second change made another copy, or reached c0002")
	}
	// A change to the surface reaches its clusters, not the one that left.
	afterOwn := etag("c0000")
	if err := surface.RemoveGroup("g001.stress.example.com"); err != nil {
		t.Fatal(err)
	}
	if etag("c0002") == before2 || etag("c0000") != afterOwn {
		t.Errorf("a surface change: c0002 changed %v, c0000 changed %v", etag("c0002") != before2, etag("c0000") != afterOwn)
	}
}

// TestFleetClusterFaults: a fault on one cluster answers that cluster's
// requests only, and counts as its errors.
func TestFleetClusterFaults(t *testing.T) {
	f, base := startSmallFleet(t)
	c0 := f.Cluster("c0000")
	c0.InjectFault("*", discoverytest.Fault{Status: http.StatusServiceUnavailable})
	f.Cluster("c0002").InjectFault("/api", discoverytest.Fault{Status: http.StatusInternalServerError, Times: 1})

	if resp, _ := get(t, clusterURL(base, "c0000")+"/apis"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("unreachable c0000: %d", resp.StatusCode)
	}
	if resp, _ := get(t, clusterURL(base, "c0002")+"/apis"); resp.StatusCode != http.StatusOK {
		t.Errorf("c0002 (same surface) /apis: %d", resp.StatusCode)
	}
	if resp, _ := get(t, clusterURL(base, "c0002")+"/api"); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("c0002 /api with a one-time fault: %d", resp.StatusCode)
	}
	if resp, _ := get(t, clusterURL(base, "c0002")+"/api"); resp.StatusCode != http.StatusOK {
		t.Errorf("c0002 /api after its one-time fault: %d", resp.StatusCode)
	}
	if resp, _ := get(t, clusterURL(base, "c0001")+"/api"); resp.StatusCode != http.StatusOK {
		t.Errorf("c0001 /api: %d", resp.StatusCode)
	}
	// A client of the unreachable cluster fails; one of its neighbour works.
	dc, err := discovery.NewForHTTPClient(http.DefaultClient, clusterURL(base, "c0000"), discovery.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Snapshot(context.Background()); err == nil {
		t.Errorf("discovery of the unreachable cluster succeeded")
	}
	dc2, err := discovery.NewForHTTPClient(http.DefaultClient, clusterURL(base, "c0002"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc2.Snapshot(context.Background()); err != nil {
		t.Errorf("discovery of its neighbour: %v", err)
	}
	if st := c0.Stats(); st.Errors != st.Requests || st.Requests < 3 {
		t.Errorf("c0000 stats %+v: every request an error", st)
	}
	if st := f.Cluster("c0002").Stats(); st.Errors != 1 {
		t.Errorf("c0002 stats %+v, want 1 error", st)
	}
	c0.ClearFaults()
	if resp, _ := get(t, clusterURL(base, "c0000")+"/apis"); resp.StatusCode != http.StatusOK {
		t.Errorf("c0000 after ClearFaults: %d", resp.StatusCode)
	}
}

// TestFleetStats: the counters of one cluster count its requests, 304s and
// body bytes, and nothing of the others.
func TestFleetStats(t *testing.T) {
	f, base := startSmallFleet(t)
	resp, body := get(t, clusterURL(base, "c0001")+"/apis", "Accept", acceptV2JSON)
	resp304, _ := get(t, clusterURL(base, "c0001")+"/apis", "Accept", acceptV2JSON, "If-None-Match", resp.Header.Get("ETag"))
	if resp304.StatusCode != http.StatusNotModified {
		t.Fatalf("conditional GET: %d", resp304.StatusCode)
	}
	_, rootBody := get(t, clusterURL(base, "c0001")+"/openapi/v3")
	get(t, clusterURL(base, "c0002")+"/version")
	get(t, base+"/k8s/clusters/missing/version")

	want := discoverytest.Stats{Requests: 3, NotModified: 1, Bytes: int64(len(body) + len(rootBody))}
	if got := f.Cluster("c0001").Stats(); got != want {
		t.Errorf("c0001 stats %+v, want %+v", got, want)
	}
	if got := f.Cluster("c0003").Stats(); got != (discoverytest.Stats{}) {
		t.Errorf("c0003 (same surface) stats %+v, want none", got)
	}
	if got := f.Stats(); got.Requests != 4 || got.NotModified != 1 {
		t.Errorf("fleet stats %+v, want 4 requests (the unknown cluster's is not counted)", got)
	}
	f.ResetStats()
	if got := f.Stats(); got != (discoverytest.Stats{}) {
		t.Errorf("after ResetStats: %+v", got)
	}
	if n := len(f.Surfaces()[1].Requests()); n != 0 {
		t.Errorf("after ResetStats, surface 1 still logs %d requests", n)
	}
}

// TestFleetWatchEndsWhenClusterLeaves: a watch of one cluster's CRDs, open
// on its surface, ends when a change gives the cluster a Server of its own
// (so the client resumes there and sees the change); a neighbour's watch
// stays open.
func TestFleetWatchEndsWhenClusterLeaves(t *testing.T) {
	f, base := startSmallFleet(t)
	const crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=1"
	open := func(id string) (*bufio.Reader, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, clusterURL(base, id)+crds, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s watch: %d", id, resp.StatusCode)
		}
		return bufio.NewReader(resp.Body), func() { cancel(); resp.Body.Close() }
	}
	w0, stop0 := open("c0000")
	defer stop0()
	w2, stop2 := open("c0002")
	defer stop2()
	if st := f.Cluster("c0000").Stats(); st.Watches != 1 {
		t.Errorf("c0000 stats %+v, want 1 watch", st)
	}

	if err := f.Cluster("c0000").AddCRD(discoverytest.CRD{Group: "extra.example.com", Versions: []string{"v1"}, Kind: "Extra"}); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := w0.ReadString('\n'); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("c0000's watch on its old surface is still open after it left")
	}

	// The neighbour's watch is open: it sees an event of its surface.
	if err := f.Surfaces()[0].TouchCRDStatus("g000.stress.example.com", "widget0000s"); err != nil {
		t.Fatal(err)
	}
	for {
		// The initial ADDED events first, then the change.
		line, err := w2.ReadString('\n')
		if err != nil {
			t.Fatalf("c0002's watch ended: %v", err)
		}
		if strings.Contains(line, `"MODIFIED"`) {
			break
		}
	}
}

// TestFleetKubectl: kubectl, through client-go, discovers one cluster of a
// fleet and explains a kind from its OpenAPI v3 (whose root lists
// prefixed URLs).
func TestFleetKubectl(t *testing.T) {
	bin := testenv.Tool(t, "kubectl")
	f, base := startSmallFleet(t)
	kubectl := func(args ...string) string {
		t.Helper()
		args = append([]string{"--server", clusterURL(base, "c0001"), "--cache-dir", t.TempDir()}, args...)
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	names := strings.Fields(kubectl("api-resources", "-o", "name"))
	if !slices.Contains(names, "widget0005s.g005.stress.example.com") || !slices.Contains(names, "deployments.apps") {
		t.Errorf("kubectl api-resources of c0001 lacks its CRDs or built-ins: %v", names)
	}
	out := kubectl("explain", "widget0005.spec.template.spec.containers")
	if !strings.Contains(out, "KIND:       Widget0005") || !strings.Contains(out, "FIELD: containers <[]Container>") {
		t.Errorf("kubectl explain through the prefix:\n%s", out)
	}
	if st := f.Cluster("c0001").Stats(); st.Requests == 0 || st.Errors != 0 {
		t.Errorf("c0001 stats %+v", st)
	}
	if st := f.Cluster("c0003").Stats(); st.Requests != 0 {
		t.Errorf("c0003 stats %+v", st)
	}
}

func TestFleetOptionErrors(t *testing.T) {
	one := []discoverytest.Surface{nil}
	for name, build := range map[string]func() error{
		"no surfaces":   func() error { _, err := discoverytest.NewFleet([]string{"a"}, nil); return err },
		"duplicate id":  func() error { _, err := discoverytest.NewFleet([]string{"a", "a"}, one); return err },
		"id with slash": func() error { _, err := discoverytest.NewFleet([]string{"a/b"}, one); return err },
		"empty id":      func() error { _, err := discoverytest.NewFleet([]string{""}, one); return err },
		"bad surface": func() error {
			_, err := discoverytest.NewFleet([]string{"a"}, []discoverytest.Surface{{discoverytest.WithCRDs(-1, 1)}})
			return err
		},
		"bad assignment": func() error {
			_, err := discoverytest.NewFleet([]string{"a"}, one, discoverytest.WithAssignment(func(int, string) int { return 1 }))
			return err
		},
		"nil assignment": func() error {
			_, err := discoverytest.NewFleet([]string{"a"}, one, discoverytest.WithAssignment(nil))
			return err
		},
		"too few CRDs": func() error { _, err := discoverytest.DistinctSurfaces(3, 6, 5); return err },
	} {
		if build() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if ids := discoverytest.ClusterIDs(10001); ids[0] != "c00000" || ids[10000] != "c10000" {
		t.Errorf("ClusterIDs(10001): %s ... %s", ids[0], ids[10000])
	}
}

// heapMiB is the live heap after a full collection.
func heapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// TestFleetMemoryPerSurface: 1,000 clusters over 5 surfaces of 300 CRDs
// cost about what the 5 surfaces cost, before and after every cluster's
// discovery and OpenAPI root were served, not 1,000 Servers' worth; a
// changed cluster's own Server shares its surface's OpenAPI documents.
func TestFleetMemoryPerSurface(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds 10 servers with 300 CRDs and serves 3,000 requests; heap numbers mean little under -race")
	}
	surfaces, err := discoverytest.DistinctSurfaces(5, 300, 30)
	if err != nil {
		t.Fatal(err)
	}
	warm := func(h http.Handler, prefix string) {
		for _, p := range []string{"/api", "/apis", "/openapi/v3"} {
			req, _ := http.NewRequest(http.MethodGet, prefix+p, nil)
			req.Header.Set("Accept", acceptAll)
			rec := &discardWriter{header: http.Header{}}
			h.ServeHTTP(rec, req)
			if rec.code != http.StatusOK {
				t.Fatalf("%s%s: %d", prefix, p, rec.code)
			}
		}
	}

	start := heapMiB()
	servers := make([]*discoverytest.Server, len(surfaces))
	for i, s := range surfaces {
		if servers[i], err = discoverytest.NewServer(s...); err != nil {
			t.Fatal(err)
		}
	}
	serversBuilt := heapMiB() - start
	for _, s := range servers {
		warm(s, "")
	}
	serversWarm := heapMiB() - start
	runtime.KeepAlive(servers)
	servers = nil

	start = heapMiB()
	f, err := discoverytest.NewFleet(discoverytest.ClusterIDs(1000), surfaces)
	if err != nil {
		t.Fatal(err)
	}
	fleetBuilt := heapMiB() - start
	for _, c := range f.Clusters() {
		warm(f, c.Path())
	}
	f.ResetStats() // the surfaces' request logs are per request, not per surface
	fleetWarm := heapMiB() - start

	// A changed cluster costs a Server, whose OpenAPI documents are its
	// surface's but for the one the change touched.
	start = heapMiB()
	c := f.Cluster("c0000")
	if err := c.AddCRD(discoverytest.CRD{Group: "extra.example.com", Versions: []string{"v1"}, Kind: "Extra"}); err != nil {
		t.Fatal(err)
	}
	warm(f, c.Path())
	f.ResetStats()
	changed := heapMiB() - start
	runtime.KeepAlive(f)

	t.Logf("5 Servers of 300 CRDs: %.1f MiB built, %.1f MiB after /api, /apis and /openapi/v3", serversBuilt, serversWarm)
	t.Logf("1,000 clusters on them: %.1f MiB built, %.1f MiB after each cluster's /api, /apis and /openapi/v3", fleetBuilt, fleetWarm)
	t.Logf("one cluster changed, then served: %.1f MiB more", changed)
	// A Server per cluster would be 200 times the surfaces; allow the
	// clusters a few KiB each besides.
	if limit := serversWarm*1.5 + 5; fleetWarm > limit {
		t.Errorf("the fleet holds %.1f MiB, more than %.1f: memory grows with clusters, not surfaces", fleetWarm, limit)
	}
	// Without shared documents a copy would cost a whole surface.
	if limit := serversWarm / 5 / 2; changed > limit {
		t.Errorf("a changed cluster holds %.1f MiB, more than half a surface (%.1f)", changed, limit)
	}
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}
