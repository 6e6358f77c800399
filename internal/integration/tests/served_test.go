//go:build linux

package tests

// Tests of kubeatlas-apiserver (apiserver/ at the repository's root, issue
// 28) on the real kube-apiserver: built once per test binary run, started
// in the aggregation harness's network namespace and registered through
// an APIService, read by kubectl, client-go informers, the Python client
// and kubeatlas's own watch as a user who holds only the read role from
// deploy/. Benchmarks are in served_bench_test.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

var (
	servedGV              = schema.GroupVersion{Group: "discovery.kubeatlas.io", Version: "v1alpha1"}
	apigroupsGVR          = servedGV.WithResource("apigroups")
	apiserversGVR         = servedGV.WithResource("apiservers")
	clusterconsistencyGVR = servedGV.WithResource("clusterconsistencies")
)

// atlasBuild is kubeatlas-apiserver built once per test binary run (the
// link alone takes seconds, and several tests start it); TestMain removes
// its directory.
var atlasBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if atlasBuild.dir != "" {
		_ = os.RemoveAll(atlasBuild.dir)
	}
	os.Exit(code)
}

// repoRoot is the repository's root, from this module's directory.
const repoRoot = "../../.."

// atlasBinary returns the path of kubeatlas-apiserver, built from this
// checkout's apiserver module (with its own go.work).
func atlasBinary(t testing.TB) string {
	t.Helper()
	goTool := testenv.Tool(t, "go")
	atlasBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "kubeatlas-apiserver-")
		if err != nil {
			atlasBuild.err = err
			return
		}
		atlasBuild.dir = dir
		bin := filepath.Join(dir, "kubeatlas-apiserver")
		cmd := exec.Command(goTool, "build", "-C", filepath.Join(repoRoot, "apiserver"), "-o", bin, "./cmd/kubeatlas-apiserver")
		// The tier's GOWORK names the tier's workspace; the apiserver
		// module has its own.
		cmd.Env = append(os.Environ(), "GOWORK=")
		if out, err := cmd.CombinedOutput(); err != nil {
			atlasBuild.err = fmt.Errorf("building kubeatlas-apiserver: %v: %s", err, out)
			return
		}
		atlasBuild.bin = bin
	})
	if atlasBuild.err != nil {
		t.Fatal(atlasBuild.err)
	}
	return atlasBuild.bin
}

// served is kubeatlas-apiserver running in the aggregation harness's
// namespace and registered as discovery.kubeatlas.io/v1alpha1.
type served struct {
	*aggregation
	bin, logPath string
	args         []string
	proc         *haProc
	port         int
	svc          aggregatedService
	viewer       *rest.Config // the viewer: authenticated, with the read role from deploy/ only
}

// startServed starts the aggregating kube-apiserver, applies deploy/'s
// read role (every authenticated user may get, list and watch the served
// API), starts kubeatlas-apiserver in the namespace with extra flags and
// registers it. It returns once the APIService is Available and the viewer
// can list apigroups.
func startServed(t testing.TB, extra ...string) *served {
	t.Helper()
	a := startAggregation(t) // first: it skips when the harness's needs are missing
	bin := atlasBinary(t)
	s := &served{aggregation: a, bin: bin, logPath: filepath.Join(a.dir, "kubeatlas-apiserver.log"), port: 8443, svc: serviceFor("kubeatlas-apiserver")}
	s.args = append(a.serverArgs(t, s.svc, s.port), extra...)
	applyDeployReadRole(t, a.config)
	s.proc = a.netns.start(t, s.logPath, bin, s.args...)
	a.register(t, s.svc, servedGV, s.port)
	s.viewer = rest.CopyConfig(a.config)
	s.viewer.BearerToken = viewerToken
	vdyn := dynamic.NewForConfigOrDie(s.viewer)
	// RBAC's cache takes a moment to see the binding.
	eventually(t, "the viewer lists apigroups", 30*time.Second, func() (bool, string) {
		l, err := vdyn.Resource(apigroupsGVR).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) > 0, fmt.Sprintf("%d apigroups", len(l.Items))
	})
	return s
}

// restart stops kubeatlas-apiserver, runs meanwhile (the server is down),
// and starts it again; it returns once the viewer can list apigroups.
func (s *served) restart(t testing.TB, meanwhile func()) {
	t.Helper()
	s.proc.stop()
	meanwhile()
	s.proc = s.netns.start(t, s.logPath, s.bin, s.args...)
	vdyn := dynamic.NewForConfigOrDie(s.viewer)
	eventually(t, "apigroups served again after the restart", 90*time.Second, func() (bool, string) {
		_, err := vdyn.Resource(apigroupsGVR).List(context.Background(), metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

func (s *served) logs() string {
	b, _ := os.ReadFile(s.logPath)
	return string(tail(b, 3000))
}

// applyDeployReadRole creates the ClusterRole and ClusterRoleBinding
// kubeatlas-discovery-reader exactly as deploy/kubeatlas-apiserver.yaml
// declares them, so that the tests prove the manifests' RBAC.
func applyDeployReadRole(t testing.TB, cfg *rest.Config) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "deploy", "kubeatlas-apiserver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dyn := dynamic.NewForConfigOrDie(cfg)
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	applied := 0
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("deploy/kubeatlas-apiserver.yaml: %v", err)
		}
		if u.GetName() != "kubeatlas-discovery-reader" {
			continue
		}
		var gvr schema.GroupVersionResource
		switch u.GetKind() {
		case "ClusterRole":
			gvr = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
		case "ClusterRoleBinding":
			gvr = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
		default:
			continue
		}
		if _, err := dyn.Resource(gvr).Create(context.Background(), &u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s %s from deploy/: %v", u.GetKind(), u.GetName(), err)
		}
		applied++
	}
	if applied != 2 {
		t.Fatalf("deploy/kubeatlas-apiserver.yaml: %d of ClusterRole and ClusterRoleBinding kubeatlas-discovery-reader found", applied)
	}
}

// writeViewerKubeconfig writes a kubeconfig for the viewer (loopback).
func (a *aggregation) writeViewerKubeconfig(t testing.TB) string {
	t.Helper()
	path := a.writeKubeconfig(t, t.TempDir())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(strconv.Quote(token)), []byte(strconv.Quote(viewerToken)), 1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// servedCRD is a CRD of group with kind Kind (plural kinds), cluster
// scoped, with the given versions (the first stored).
func servedCRD(group, kind string, versions ...string) *unstructured.Unstructured {
	plural := strings.ToLower(kind) + "s"
	var vs []any
	for i, v := range versions {
		vs = append(vs, map[string]any{
			"name": v, "served": true, "storage": i == 0,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group, "scope": "Cluster",
			"names":    map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind},
			"versions": vs,
		},
	}}
}

// groupVersions is an apigroups object's versions, in its order.
func groupVersions(u *unstructured.Unstructured) []string {
	vs, _, _ := unstructured.NestedSlice(u.Object, "status", "versions")
	var out []string
	for _, v := range vs {
		if m, ok := v.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["version"]))
		}
	}
	return out
}

// waitServedGroup waits until the served API's object for group has the
// given versions (nil: until it is gone).
func waitServedGroup(t testing.TB, cfg *rest.Config, group string, versions []string, within time.Duration) {
	t.Helper()
	r := dynamic.NewForConfigOrDie(cfg).Resource(apigroupsGVR)
	eventually(t, fmt.Sprintf("apigroups/%s with versions %v", group, versions), within, func() (bool, string) {
		u, err := r.Get(context.Background(), group, metav1.GetOptions{})
		if versions == nil {
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		}
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(groupVersions(u), versions), fmt.Sprint(groupVersions(u))
	})
}

// lines streams a command's stdout, line by line, and stops it at the
// test's end.
func lines(t testing.TB, cmd *exec.Cmd) (<-chan string, *strings.Builder) {
	t.Helper()
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
	ch := make(chan string, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch, &stderr
}

// TestServedKubectlWatch: as the viewer (authenticated, with deploy/'s
// read role alone), through the kube-apiserver, kubectl get apigroups
// prints the table and kubectl get -w shows a new CRD's group within a
// few seconds of the CRD's creation.
func TestServedKubectlWatch(t *testing.T) {
	kubectl := testenv.Tool(t, "kubectl")
	s := startServed(t)
	kubeconfig := s.writeViewerKubeconfig(t)

	// The served group's own object starts Stale: the aggregator lists a
	// new APIService's discovery a moment after registering it.
	var out []byte
	found := map[string][]string{}
	registered := time.Now()
	eventually(t, "kubectl get apigroups shows the served group Current", 60*time.Second, func() (bool, string) {
		var err error
		out, err = exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "apigroups").CombinedOutput()
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		found = map[string][]string{}
		for _, r := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
			f := strings.Fields(r)
			found[f[0]] = f
		}
		f := found[servedGV.Group]
		return len(f) == 6 && f[4] == "Current", string(out)
	})
	t.Logf("the served group's own object Current %v after the APIService was Available", time.Since(registered).Round(10*time.Millisecond))
	if header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0]); !slices.Equal(header, []string{"NAME", "PREFERRED", "VERSIONS", "RESOURCES", "FRESHNESS", "AGE"}) {
		t.Errorf("kubectl get apigroups: header %q", header)
	}
	for _, g := range []string{"core", "apps", "apiextensions.k8s.io", servedGV.Group} {
		if f, ok := found[g]; !ok || len(f) != 6 || f[4] != "Current" {
			t.Errorf("kubectl get apigroups: row for %s is %q\n%s", g, f, out)
		}
	}
	if f := found["apps"]; len(f) == 6 && (f[1] != "v1" || f[2] != "v1") {
		t.Errorf("apps: preferred %s, versions %s; want v1, v1", f[1], f[2])
	}

	events, stderr := lines(t, exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "apigroups.discovery.kubeatlas.io", "-w", "--output-watch-events"))
	// Wait for the initial list's rows (the served group's among them), so
	// that the new group's row is a change, not part of the list.
	eventually(t, "kubectl get -w's initial rows", 30*time.Second, func() (bool, string) {
		for {
			select {
			case l, ok := <-events:
				if !ok {
					return false, "kubectl ended: " + stderr.String()
				}
				if strings.Contains(l, " "+servedGV.Group+" ") {
					return true, ""
				}
			default:
				return false, stderr.String()
			}
		}
	})
	const g = "kubectl.served.kubeatlas.test"
	created := time.Now()
	if _, err := dynamic.NewForConfigOrDie(s.config).Resource(crdGVR).Create(context.Background(), servedCRD(g, "Widget", "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-events:
			if !ok {
				t.Fatalf("kubectl get -w ended: %s", stderr.String())
			}
			if f := strings.Fields(l); len(f) >= 2 && f[1] == g {
				if f[0] != "ADDED" {
					t.Errorf("first line for %s: %q, want an ADDED event", g, l)
				}
				t.Logf("kubectl get -w printed %q %v after the CRD's creation", l, time.Since(created).Round(time.Millisecond))
				return
			}
		case <-timeout:
			t.Fatalf("kubectl get -w did not show %s within 10s of the CRD's creation: %s\n%s", g, stderr.String(), s.logs())
		}
	}
}

// informerEvent is what a dynamic informer's handler saw.
type informerEvent struct {
	kind, name, rv string
	versions       []string
}

// TestServedInformer: a client-go dynamic informer on apigroups, as the
// viewer through the kube-apiserver, sees a CRD's group added, updated
// (a second version) and deleted, with growing resourceVersions; across a
// restart of kubeatlas-apiserver, during which a CRD is created, it misses
// nothing: the CRD made meanwhile arrives as an add, and its store ends
// equal to a fresh list.
func TestServedInformer(t *testing.T) {
	s := startServed(t)
	ctx := context.Background()
	crds := dynamic.NewForConfigOrDie(s.config).Resource(crdGVR)

	var mu sync.Mutex
	var got []informerEvent
	record := func(kind string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u := obj.(*unstructured.Unstructured)
		mu.Lock()
		got = append(got, informerEvent{kind, u.GetName(), u.GetResourceVersion(), groupVersions(u)})
		mu.Unlock()
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(s.viewer), 0)
	inf := factory.ForResource(apigroupsGVR).Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("add", obj) },
		UpdateFunc: func(_, obj any) { record("update", obj) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	})
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	// events returns the events for name seen so far.
	events := func(name string) []informerEvent {
		mu.Lock()
		defer mu.Unlock()
		var out []informerEvent
		for _, e := range got {
			if e.name == name {
				out = append(out, e)
			}
		}
		return out
	}
	waitEvent := func(name, kind string, versions []string) {
		t.Helper()
		eventually(t, fmt.Sprintf("the informer's %s of %s %v", kind, name, versions), 30*time.Second, func() (bool, string) {
			es := events(name)
			return slices.ContainsFunc(es, func(e informerEvent) bool {
				return e.kind == kind && (versions == nil || slices.Equal(e.versions, versions))
			}), fmt.Sprintf("%+v", es)
		})
	}

	const g = "informed.served.kubeatlas.test"
	obj, err := crds.Create(ctx, servedCRD(g, "Gadget", "v1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(g, "add", []string{"v1"})
	// A second version, preferred (the higher priority): the group's
	// object changes.
	eventually(t, "the CRD updated", 10*time.Second, func() (bool, string) {
		obj, err = crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		vs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		v2 := servedCRD(g, "Gadget", "v2")
		v2vs, _, _ := unstructured.NestedSlice(v2.Object, "spec", "versions")
		v2vs[0].(map[string]any)["storage"] = false
		_ = unstructured.SetNestedSlice(obj.Object, append(vs, v2vs[0]), "spec", "versions")
		_, err = crds.Update(ctx, obj, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	waitEvent(g, "update", []string{"v2", "v1"})
	if err := crds.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(g, "delete", nil)
	es := events(g)
	var last uint64
	for _, e := range es {
		rv, err := strconv.ParseUint(e.rv, 10, 64)
		if err != nil || rv <= last && e.kind != "delete" {
			t.Errorf("resourceVersions do not grow: %+v", es)
			break
		}
		last = rv
	}
	t.Logf("events of %s: %+v", g, es)

	// A restart, during which a CRD is created: the informer's watch
	// breaks, its relists fail while the server is down, and once it is
	// back (resourceVersions from a new base) it relists.
	const g2 = "meanwhile.served.kubeatlas.test"
	s.restart(t, func() {
		if _, err := crds.Create(ctx, servedCRD(g2, "Gizmo", "v1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	waitEvent(g2, "add", []string{"v1"})
	// resourceVersions keep growing across the restart (their base is
	// the clock at start), so a client's last one is never mistaken for
	// a later state.
	if rv, err := strconv.ParseUint(events(g2)[0].rv, 10, 64); err != nil || rv <= last {
		t.Errorf("after the restart, %s was added at resourceVersion %s, not above %d", g2, events(g2)[0].rv, last)
	}
	// And after the restart, the informer still follows: a delete.
	if err := crds.Delete(ctx, "gizmos."+g2, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(g2, "delete", nil)

	fresh := dynamic.NewForConfigOrDie(s.viewer).Resource(apigroupsGVR)
	eventually(t, "the informer's store equal to a fresh list", 30*time.Second, func() (bool, string) {
		l, err := fresh.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		want := map[string]string{}
		for _, u := range l.Items {
			want[u.GetName()] = u.GetResourceVersion()
		}
		have := map[string]string{}
		for _, o := range inf.GetStore().List() {
			u := o.(*unstructured.Unstructured)
			have[u.GetName()] = u.GetResourceVersion()
		}
		return fmt.Sprint(want) == fmt.Sprint(have), fmt.Sprintf("store %v, list %v", have, want)
	})
}

// TestServedPythonWatch: the Python kubernetes client's watch on apigroups,
// as the viewer through the kube-apiserver, sees a CRD's group ADDED,
// MODIFIED (a second version) and DELETED.
func TestServedPythonWatch(t *testing.T) {
	python := pythonKubernetes(t)
	s := startServed(t)
	ctx := context.Background()
	l, err := dynamic.NewForConfigOrDie(s.viewer).Resource(apigroupsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Other groups' objects may change too (a consistency check's
	// verdict): ask for many events, and stop the watcher once ours came.
	events, stderr := lines(t, exec.Command(python, filepath.Join("testdata", "aggregation", "watch.py"),
		s.writeViewerKubeconfig(t), servedGV.Group, servedGV.Version, "apigroups", l.GetResourceVersion(), "1000"))

	const g = "python.served.kubeatlas.test"
	crds := dynamic.NewForConfigOrDie(s.config).Resource(crdGVR)
	if _, err := crds.Create(ctx, servedCRD(g, "Doohickey", "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServedGroup(t, s.viewer, g, []string{"v1"}, 30*time.Second)
	eventually(t, "the CRD gains v2", 10*time.Second, func() (bool, string) {
		obj, err := crds.Get(ctx, "doohickeys."+g, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		vs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		v2 := map[string]any{"name": "v2", "served": true, "storage": false, "schema": vs[0].(map[string]any)["schema"]}
		_ = unstructured.SetNestedSlice(obj.Object, append(vs, v2), "spec", "versions")
		_, err = crds.Update(ctx, obj, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	waitServedGroup(t, s.viewer, g, []string{"v2", "v1"}, 30*time.Second)
	if err := crds.Delete(ctx, "doohickeys."+g, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var ours []string
	timeout := time.After(60 * time.Second)
	for len(ours) == 0 || !strings.HasPrefix(ours[len(ours)-1], "DELETED") {
		select {
		case l, ok := <-events:
			if !ok {
				t.Fatalf("watch.py ended after %q: %s", ours, stderr.String())
			}
			if f := strings.Fields(l); len(f) == 3 && f[1] == g {
				ours = append(ours, f[0])
			}
		case <-timeout:
			t.Fatalf("watch.py printed %q for %s after 60s: %s", ours, g, stderr.String())
		}
	}
	if len(ours) < 3 || ours[0] != "ADDED" || slices.ContainsFunc(ours[1:len(ours)-1], func(s string) bool { return s != "MODIFIED" }) {
		t.Errorf("watch.py printed %q for %s, want ADDED, MODIFIED..., DELETED", ours, g)
	}
	t.Logf("watch.py: %q", ours)
}

// TestServedAPIResources: with the served API registered, kubectl
// api-resources still lists everything without error, the served
// resources included, and lists exactly what kubeatlas's discovery sees.
func TestServedAPIResources(t *testing.T) {
	kubectl := testenv.Tool(t, "kubectl")
	s := startServed(t)
	cmd := exec.Command(kubectl, "--kubeconfig", s.writeKubeconfig(t, t.TempDir()), "api-resources", "-o", "name")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("kubectl api-resources: %v: %s", err, stderr.String())
	}
	listed := strings.Fields(string(out))
	for _, r := range []string{"apigroups.discovery.kubeatlas.io", "apiservers.discovery.kubeatlas.io", "clusterconsistencies.discovery.kubeatlas.io", "pods", "deployments.apps", "customresourcedefinitions.apiextensions.k8s.io"} {
		if !slices.Contains(listed, r) {
			t.Errorf("kubectl api-resources does not list %s", r)
		}
	}
	dc, err := discovery.New(s.config)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := dc.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var ours []string
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				name := r.Name
				if g.Name != "" {
					name += "." + g.Name
				}
				if !strings.Contains(r.Name, "/") && !seen[name] {
					seen[name] = true
					ours = append(ours, name)
				}
			}
		}
	}
	sort.Strings(ours)
	sort.Strings(listed)
	if !slices.Equal(ours, listed) {
		t.Errorf("kubectl api-resources and kubeatlas differ:\nkubectl: %v\nkubeatlas: %v", listed, ours)
	}
}

// countingPaths counts a client's requests whose path contains any of
// some words.
type countingPaths struct {
	next  http.RoundTripper
	mu    sync.Mutex
	paths []string
}

func (c *countingPaths) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths = append(c.paths, r.URL.Path)
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingPaths) containing(word string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.paths {
		if strings.Contains(p, word) {
			out = append(out, p)
		}
	}
	return out
}

// auditEvent is the part of a kube-apiserver audit event the tests read.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	SourceIPs []string `json:"sourceIPs"`
	UserAgent string   `json:"userAgent"`
	ObjectRef *struct {
		Resource string `json:"resource"`
		APIGroup string `json:"apiGroup"`
	} `json:"objectRef"`
}

// auditEvents reads the kube-apiserver's audit log: one entry per request
// (by auditID; a watch's ResponseStarted and ResponseComplete are one).
func (a *aggregation) auditEvents(t testing.TB) []auditEvent {
	t.Helper()
	f, err := os.Open(a.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		out = append(out, e)
	}
	return out
}

// TestServedChangeSource: kubeatlas's own Watch, for the viewer (who may
// read discovery and the served API but not list or watch CRDs), takes
// the served API as its change source: Watching, never forbidden, no
// request for CRDs from the client or at the kube-apiserver, and a new
// CRD arrives as a Change within a second or two.
func TestServedChangeSource(t *testing.T) {
	s := startServed(t)
	ctx := context.Background()
	viewer := rest.CopyConfig(s.viewer)
	counted := &countingPaths{}
	viewer.Wrap(func(rt http.RoundTripper) http.RoundTripper { counted.next = rt; return counted })
	// The check that the viewer may not list CRDs has a user agent of its
	// own, so that the audit log tells it from the client's requests.
	const checkAgent = "kubeatlas-test-forbidden-check"
	check := rest.CopyConfig(s.viewer)
	check.UserAgent = checkAgent
	if _, err := dynamic.NewForConfigOrDie(check).Resource(crdGVR).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the viewer may list CRDs (%v): the test needs it not to", err)
	}
	// watch.Run chooses its change source once, at its start: the served
	// API if the client's discovery lists it Current then. Just after
	// registration the aggregator may still list it Stale (its first
	// discovery of the new APIService), and Run would poll for good; so
	// wait for Current, as a client starting against a settled cluster
	// would find it.
	probe, err := discovery.New(s.viewer)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the viewer's discovery lists apigroups Current", 30*time.Second, func() (bool, string) {
		snap, err := probe.Refresh(ctx)
		if snap == nil {
			return false, fmt.Sprint(err)
		}
		v, ok := snap.Version(servedGV)
		return ok && v.Freshness == surface.FreshnessCurrent, fmt.Sprintf("%+v (%v)", v, err)
	})
	w := startWatched(t, viewer)
	waitUntil(t, "watching", 30*time.Second, func() bool { return w.w.Stats().Watching })

	obj := servedCRD("changes.served.kubeatlas.test", "Thingamajig", "v1")
	start := time.Now()
	if _, err := dynamic.NewForConfigOrDie(s.config).Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "changes.served.kubeatlas.test", Version: "v1", Resource: "thingamajigs"}
	waitUntil(t, "the Change", 30*time.Second, func() bool { _, ok := w.seen("+" + gvr.String()); return ok })
	at, _ := w.seen("+" + gvr.String())
	latency := at.Sub(start)
	t.Logf("CRD created -> Change through the served API in %v; stats %+v, watch %+v", latency.Round(time.Millisecond), w.dc.Stats(), w.w.Stats())
	// "A second or two"; the bound leaves room for a loaded machine.
	if latency > 5*time.Second {
		t.Errorf("the Change came %v after the CRD's creation", latency)
	}
	if st := w.w.Stats(); st.Forbidden || !st.Watching || st.Requests == 0 {
		t.Errorf("watch stats %+v: want watching the served API, never forbidden", st)
	}
	if p := counted.containing("customresourcedefinitions"); len(p) > 0 {
		t.Errorf("the client asked for CRDs: %q", p)
	}
	if p := counted.containing("/apis/discovery.kubeatlas.io/v1alpha1/apigroups"); len(p) == 0 {
		t.Errorf("the client never asked for apigroups: %q", counted.containing(""))
	}
	for _, e := range s.auditEvents(t) {
		if e.User.Username == "viewer" && e.UserAgent != checkAgent && e.ObjectRef != nil && e.ObjectRef.Resource == "customresourcedefinitions" {
			t.Errorf("the kube-apiserver saw the viewer ask for CRDs: %s %s", e.Verb, e.RequestURI)
		}
	}
}

// TestServedConsistency: apiservers and clusterconsistencies/cluster on an
// HA pair. Aggregating into an HA pair would need the harness's network
// namespace for both servers; the verdict does not depend on how clients
// reach kubeatlas-apiserver, so it runs in local mode (loopback, no
// authentication) with --kubeconfig naming the pair's balancer, and the
// test reads it with the dynamic client against local mode. v1.36.3 with
// v1.37.1 is inconsistent (two apiservers with different built-in
// discovery hashes, Consistent=False); two v1.36.3 are consistent.
func TestServedConsistency(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sameVersion bool
	}{{"v1.36.3+v1.37.1", false}, {"v1.36.3+v1.36.3", true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startHA(t, haOptions{sameVersion: tc.sameVersion})
			bin := atlasBinary(t)
			dir := t.TempDir()
			upstream := filepath.Join(dir, "upstream.kubeconfig")
			if err := os.WriteFile(upstream, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: admin
  user: {token: %q}
contexts:
- name: c
  context: {cluster: c, user: admin}
current-context: c
`, p.lb.url(), base64.StdEncoding.EncodeToString(p.caPEM), token), 0o600); err != nil {
				t.Fatal(err)
			}
			local := filepath.Join(dir, "local.kubeconfig")
			cmd := exec.Command(bin, "--local", "--kubeconfig", upstream, "--secure-port", strconv.Itoa(freePort(t)),
				"--cert-dir", filepath.Join(dir, "certs"), "--local-kubeconfig", local, "--consistency-check-interval", "2s",
				// The pair is on loopback, which the kubernetes EndpointSlices
				// may not list: the servers' addresses are vouched for here.
				"--consistency-api-server", strings.TrimPrefix(p.servers[0].url, "https://"), "--consistency-api-server", strings.TrimPrefix(p.servers[1].url, "https://"))
			logf := logFile(t, dir, "kubeatlas-apiserver.log")
			cmd.Stdout, cmd.Stderr = logf, logf
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			var cfg *rest.Config
			eventually(t, "the local kubeconfig", 60*time.Second, func() (bool, string) {
				c, err := clientcmd.BuildConfigFromFlags("", local)
				cfg = c
				return err == nil, fmt.Sprint(err)
			})
			dyn := dynamic.NewForConfigOrDie(cfg)
			wantConsistent := map[bool]string{true: "True", false: "False"}[tc.sameVersion]
			var servers []*unstructured.Unstructured
			eventually(t, "two apiservers and the verdict Consistent="+wantConsistent, 90*time.Second, func() (bool, string) {
				l, err := dyn.Resource(apiserversGVR).List(context.Background(), metav1.ListOptions{})
				if err != nil {
					return false, err.Error()
				}
				cc, err := dyn.Resource(clusterconsistencyGVR).Get(context.Background(), "cluster", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				conditions, _, _ := unstructured.NestedSlice(cc.Object, "status", "conditions")
				status := ""
				for _, c := range conditions {
					if m, _ := c.(map[string]any); m["type"] == "Consistent" {
						status = fmt.Sprint(m["status"])
					}
				}
				servers = nil
				for i := range l.Items {
					servers = append(servers, &l.Items[i])
				}
				hashes := map[string]bool{}
				for _, s := range servers {
					h, _, _ := unstructured.NestedString(s.Object, "status", "builtinDiscoveryHash")
					alive, _, _ := unstructured.NestedBool(s.Object, "status", "alive")
					if h == "" || !alive {
						return false, fmt.Sprintf("apiserver %s: hash %q alive %v", s.GetName(), h, alive)
					}
					hashes[h] = true
				}
				wantHashes := map[bool]int{true: 1, false: 2}[tc.sameVersion]
				return len(servers) == 2 && status == wantConsistent && len(hashes) == wantHashes,
					fmt.Sprintf("%d apiservers, %d distinct hashes, Consistent=%q: %v", len(servers), len(hashes), status, cc.Object["status"])
			})
			for _, s := range servers {
				v, _, _ := unstructured.NestedString(s.Object, "status", "version")
				h, _, _ := unstructured.NestedString(s.Object, "status", "builtinDiscoveryHash")
				t.Logf("apiserver %s: version %s, builtinDiscoveryHash %s", s.GetName(), v, h)
			}
		})
	}
}
