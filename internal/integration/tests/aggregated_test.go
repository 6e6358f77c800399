//go:build linux

package tests

// Tests of the aggregation harness with a tiny aggregated server of our
// own (plain net/http over TLS), and of a non-Go watcher (the Python
// kubernetes client) through the same kube-apiserver.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

var tinyGV = schema.GroupVersion{Group: "test.kubeatlas.io", Version: "v1"}

// tinyRequest is what the tiny server saw of one request: the verified
// client certificate's common name and the identity the front proxy
// asserted for it.
type tinyRequest struct {
	path, clientCN, user string
	groups               []string
}

// tinyServer is an aggregated API server for test.kubeatlas.io/v1 with
// one cluster-scoped resource, things. It serves only requests whose
// client certificate the front-proxy CA verifies and whose common name is
// the aggregator's, as a real aggregated server's requestheader
// authenticator does, and records who the aggregator said the user was.
type tinyServer struct {
	tls *tls.Config
	n   *netnsLink
	mu  sync.Mutex
	srv *http.Server
	got []tinyRequest
	// quiet records no request: a long run (the soak's) would hold every
	// one it served.
	quiet bool
}

func newTinyServer(t *testing.T, a *aggregation, svc aggregatedService) *tinyServer {
	t.Helper()
	crt, key := a.servingCert(t, svc)
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	// The file an aggregated server gets as --requestheader-client-ca-file.
	caPEM, err := os.ReadFile(a.frontProxyCAFile)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s", a.frontProxyCAFile)
	}
	s := &tinyServer{n: a.netns, tls: &tls.Config{
		Certificates: []tls.Certificate{pair},
		// The availability check and the proxy both present the
		// front-proxy client certificate; anything else is refused.
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs,
	}}
	t.Cleanup(s.stop)
	return s
}

// start listens at the namespace's address on port (0: any) and returns
// the port.
func (s *tinyServer) start(t *testing.T, port int) int {
	t.Helper()
	l, err := s.n.listen(port)
	if err != nil {
		t.Fatalf("listening in the network namespace: %v", err)
	}
	srv := &http.Server{Handler: s, TLSConfig: s.tls, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.ServeTLS(l, "", "") }()
	return l.Addr().(*net.TCPAddr).Port
}

// stop closes the listener and every connection. Stopping twice is
// harmless.
func (s *tinyServer) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (s *tinyServer) requests() []tinyRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func (s *tinyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cn := r.TLS.PeerCertificates[0].Subject.CommonName // verified: RequireAndVerifyClientCert
	s.mu.Lock()
	if !s.quiet {
		s.got = append(s.got, tinyRequest{path: r.URL.Path, clientCN: cn, user: r.Header.Get("X-Remote-User"), groups: r.Header.Values("X-Remote-Group")})
	}
	s.mu.Unlock()
	if cn != frontProxyClientName {
		http.Error(w, "not the front proxy", http.StatusForbidden)
		return
	}
	var body any
	switch r.URL.Path {
	case "/apis":
		// Plain JSON: the aggregator falls back to the legacy
		// per-version document.
		body = metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{tinyGroup()}}
	case "/apis/" + tinyGV.Group:
		g := tinyGroup()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		body = g
	case "/apis/" + tinyGV.String():
		body = metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: tinyGV.String(),
			APIResources: []metav1.APIResource{{Name: "things", SingularName: "thing", Kind: "Thing", Verbs: metav1.Verbs{"get", "list"}}}}
	case "/apis/" + tinyGV.String() + "/things":
		if r.Header.Get("X-Remote-User") == "" {
			http.Error(w, "no user asserted", http.StatusUnauthorized)
			return
		}
		body = map[string]any{
			"apiVersion": tinyGV.String(), "kind": "ThingList", "metadata": map[string]any{"resourceVersion": "1"},
			"items": []any{map[string]any{"apiVersion": tinyGV.String(), "kind": "Thing", "metadata": map[string]any{"name": "thing-one", "resourceVersion": "1"}}},
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func tinyGroup() metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: tinyGV.String(), Version: tinyGV.Version}
	return metav1.APIGroup{Name: tinyGV.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

// TestAggregationProxiesToNetns: through the kube-apiserver, kubectl
// reaches an aggregated server listening in a network namespace, and the
// server saw the test's user asserted by a verified front-proxy client
// certificate.
func TestAggregationProxiesToNetns(t *testing.T) {
	kubectl := testenv.Tool(t, "kubectl")
	a := startAggregation(t)
	svc := serviceFor("tiny")
	s := newTinyServer(t, a, svc)
	a.register(t, svc, tinyGV, s.start(t, 0))

	kubeconfig := a.writeKubeconfig(t, t.TempDir())
	out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "--raw", "/apis/test.kubeatlas.io/v1/things").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get --raw: %v: %s", err, out)
	}
	var list struct {
		Kind  string
		Items []struct{ Metadata struct{ Name string } }
	}
	if err := json.Unmarshal(out, &list); err != nil || list.Kind != "ThingList" || len(list.Items) != 1 || list.Items[0].Metadata.Name != "thing-one" {
		t.Fatalf("kubectl get --raw: %v: %s", err, out)
	}
	var things []tinyRequest
	for _, r := range s.requests() {
		if strings.HasSuffix(r.path, "/things") {
			things = append(things, r)
		}
	}
	if len(things) != 1 {
		t.Fatalf("the server saw %d requests for things, want 1: %+v", len(things), s.requests())
	}
	if r := things[0]; r.clientCN != frontProxyClientName || r.user != "admin" || !slices.Contains(r.groups, "system:masters") {
		t.Errorf("the server saw %+v, want the user admin in system:masters asserted by %s", r, frontProxyClientName)
	}
	// The availability check is the aggregator's own identity.
	if !slices.ContainsFunc(s.requests(), func(r tinyRequest) bool {
		return r.path == "/apis/"+tinyGV.String() && r.user == "system:kube-aggregator"
	}) {
		t.Errorf("no availability check as system:kube-aggregator among %+v", s.requests())
	}

	// kubeconfigInNetns reaches the kube-apiserver from inside the
	// namespace, as an aggregated server's delegated authentication will.
	inNetns := a.kubeconfigInNetns(t, t.TempDir())
	out, err = a.netns.command(t, kubectl, "--kubeconfig", inNetns, "get", "--raw", "/readyz").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("kubectl in the namespace with kubeconfigInNetns: %v: %s", err, out)
	}
}

// TestAggregatedFreshness: the kube-apiserver's aggregated discovery, read
// by kubeatlas, lists the aggregated group; once the aggregated server is
// stopped its version turns Stale, and after a restart Current again.
func TestAggregatedFreshness(t *testing.T) {
	a := startAggregation(t)
	svc := serviceFor("tiny")
	s := newTinyServer(t, a, svc)
	port := s.start(t, 0)
	a.register(t, svc, tinyGV, port)

	dc, err := discovery.New(a.config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	freshness := func(want surface.Freshness) func() (bool, string) {
		return func() (bool, string) {
			snap, err := dc.Refresh(ctx)
			if snap == nil {
				return false, fmt.Sprint(err)
			}
			v, ok := snap.Version(tinyGV)
			if !ok {
				return false, fmt.Sprintf("%s not listed (%v)", tinyGV, err)
			}
			names := make([]string, 0, len(v.Resources))
			for _, r := range v.Resources {
				names = append(names, r.Name)
			}
			return v.Freshness == want && (want != surface.FreshnessCurrent || slices.Equal(names, []string{"things"})),
				fmt.Sprintf("%s is %v with resources %v (%v)", tinyGV, v.Freshness, names, err)
		}
	}
	eventually(t, "the aggregated group Current with its resource", 60*time.Second, freshness(surface.FreshnessCurrent))

	s.stop()
	stopped := time.Now()
	// The aggregator notices on its availability check or its discovery
	// resync, each at most a minute apart.
	eventually(t, "the aggregated version Stale", 150*time.Second, freshness(surface.FreshnessStale))
	t.Logf("Stale %v after the aggregated server stopped", time.Since(stopped).Round(100*time.Millisecond))

	s.start(t, port)
	restarted := time.Now()
	eventually(t, "the aggregated version Current again", 150*time.Second, freshness(surface.FreshnessCurrent))
	t.Logf("Current %v after the aggregated server restarted", time.Since(restarted).Round(100*time.Millisecond))
}

// pythonKubernetes returns a python3 that imports the kubernetes package
// (pythonWithKubernetes), or skips.
func pythonKubernetes(t *testing.T) string {
	t.Helper()
	python, tried := pythonWithKubernetes()
	if python == "" {
		aggregationMissing(t, "no python3 with the kubernetes package (apt-get install python3-kubernetes) among %v", tried)
	}
	return python
}

// pythonWithKubernetes is a python3 that imports the kubernetes package
// (Debian's python3-kubernetes is in /usr/bin/python3; a python3 earlier
// on the PATH may lack it), or "", and the python3s it tried.
func pythonWithKubernetes() (python string, tried []string) {
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		if exec.Command(p, "-c", "import kubernetes.watch").Run() == nil {
			return p, candidates
		}
	}
	return "", candidates
}

// TestPythonWatch: the Python kubernetes client's watch, run from the
// list's resourceVersion through the aggregating kube-apiserver, sees a
// custom resource added, modified and deleted, with the resourceVersions
// the server gave each change.
func TestPythonWatch(t *testing.T) {
	python := pythonKubernetes(t)
	a := startAggregation(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(a.config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd("Cluster", "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	things := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "things"})
	var listRV string
	eventually(t, "the CRD served", 30*time.Second, func() (bool, string) {
		l, err := things.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		listRV = l.GetResourceVersion()
		return true, ""
	})

	cmd := exec.Command(python, filepath.Join("testdata", "aggregation", "watch.py"),
		a.writeKubeconfig(t, t.TempDir()), group, "v1", "things", listRV, "3")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Thing", "metadata": map[string]any{"name": "py-watched"},
		"spec": map[string]any{"size": int64(1)},
	}}
	created, err := things.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Object["spec"] = map[string]any{"size": int64(2)}
	updated, err := things.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := things.Delete(ctx, "py-watched", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ADDED py-watched " + created.GetResourceVersion(),
		"MODIFIED py-watched " + updated.GetResourceVersion(),
	}
	var got []string
	timeout := time.After(60 * time.Second)
	for len(got) < 3 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("watch.py ended after %v: %s", got, stderr.String())
			}
			got = append(got, l)
		case <-timeout:
			t.Fatalf("watch.py: %v after 60s: %s", got, stderr.String())
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch.py: %v: %s", err, stderr.String())
	}
	// A delete's resourceVersion is only in the event. resourceVersions
	// are opaque to clients, but this server's are etcd revisions, so the
	// delete's must be a larger number than the update's.
	f := strings.Fields(got[2])
	deleted, errDeleted := strconv.ParseUint(f[len(f)-1], 10, 64)
	before, errBefore := strconv.ParseUint(updated.GetResourceVersion(), 10, 64)
	if !slices.Equal(got[:2], want) || len(f) != 3 || f[0] != "DELETED" || f[1] != "py-watched" || errDeleted != nil || errBefore != nil || deleted <= before {
		t.Errorf("watch.py printed %q, want %q then DELETED py-watched with a resourceVersion above %s", got, want, updated.GetResourceVersion())
	}
	t.Logf("watch.py (%s): %q", python, got)
}

// TestAggregationDelegatedServer: a k8s.io/apiserver-based server (built
// like kubeatlas-apiserver, from testdata/aggregation/delegated) started
// in the namespace with aggregation.serverArgs is registered and
// Available, authenticates the user the aggregator asserts and authorizes
// them with a SubjectAccessReview, authenticates a bearer token with a
// TokenReview, and is Available again after a restart.
func TestAggregationDelegatedServer(t *testing.T) {
	kubectl := testenv.Tool(t, "kubectl")
	goTool := testenv.Tool(t, "go")
	a := startAggregation(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "delegated")
	if out, err := exec.Command(goTool, "build", "-o", bin, "./testdata/aggregation/delegated").CombinedOutput(); err != nil {
		t.Fatalf("building the delegated server: %v: %s", err, out)
	}

	// The namespace is the server's alone: any port is free there.
	const port = 8443
	svc := serviceFor("delegated")
	args := a.serverArgs(t, svc, port)
	logPath := filepath.Join(dir, "delegated.log")
	proc := a.netns.start(t, logPath, bin, args...)
	a.register(t, svc, tinyGV, port)

	// The viewer may list whoami, in the kube-apiserver's RBAC, which both
	// the kube-apiserver and the delegated server's SubjectAccessReview
	// consult; system:masters would skip the review.
	rbac := filepath.Join(dir, "rbac.yaml")
	if err := os.WriteFile(rbac, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: whoami}
rules:
- apiGroups: [test.kubeatlas.io]
  resources: [whoami]
  verbs: [list] # GET /apis/GROUP/VERSION/whoami reads as a list of whoami
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: whoami-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: whoami}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := a.writeKubeconfig(t, t.TempDir())
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-f", rbac).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v: %s", err, out)
	}
	whoami := func() (bool, string) {
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "--token", viewerToken, "get", "--raw", "/apis/test.kubeatlas.io/v1/whoami").CombinedOutput()
		var who struct{ User string }
		if err != nil || json.Unmarshal(out, &who) != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		return who.User == "viewer", string(out)
	}
	// RBAC's cache takes a moment to see the new binding.
	eventually(t, "whoami through the aggregator says viewer", 30*time.Second, whoami)

	// A bearer token straight to the server, from the host: TokenReview.
	pool := x509.NewCertPool()
	pool.AddCert(a.servingCA.cert)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: svc.host()}}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s:%d/apis/test.kubeatlas.io/v1/whoami", a.netns.nsIP, port), nil)
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var who struct{ User string }
	err = json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || who.User != "viewer" {
		t.Errorf("whoami with the viewer's token, directly: %s, %+v, %v", resp.Status, who, err)
	}

	proc.stop()
	a.waitAPIService(t, "v1.test.kubeatlas.io", "False", 90*time.Second)
	a.netns.start(t, logPath, bin, args...)
	a.waitAPIService(t, "v1.test.kubeatlas.io", "True", 90*time.Second)
	eventually(t, "whoami after the restart", 30*time.Second, whoami)
}
