package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
	"k8s.io/apimachinery/pkg/types"
)

// TestControllerExample: examples/controller, built and run as users run
// it (one process, a kubeconfig), starts its controller before the widget
// CRD exists; once the CRD is installed it reconciles a widget (the
// annotation records its generation, and follows a change of spec)
// without a restart, logs no error and nothing but its log lines, and
// exits 0 on SIGTERM. Without a cluster it fails at once and says so.
// The time from the CRD established to the widget reconciled is logged.
func TestControllerExample(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "controller")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "..", "examples", "controller") // its own module, its own requirements
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// No kubeconfig anywhere, not in a cluster.
	env := []string{"HOME=" + t.TempDir(), "KUBECONFIG="}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBERNETES_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}

	noCluster := exec.Command(bin)
	noCluster.Env = env
	out, err := noCluster.CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "error: no cluster to run against (pass --kubeconfig") {
		t.Errorf("without a cluster: exit %d, want 1 and the reason:\n%s", code, out)
	}

	c := startCluster(t)
	var logs lockedBuffer
	cmd := exec.Command(bin, "--kubeconfig", c.writeKubeconfig(t, t.TempDir()), "--kind", "Widget.v1.example.com")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs last: the whole log
		if t.Failed() {
			t.Logf("the controller's log:\n%s", logs.String())
		}
	})
	var exitErr error
	exited := make(chan struct{}) // closed once exitErr is set
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited }) // a no-op once it exited
	running := func(what string) {
		t.Helper()
		select {
		case <-exited:
			t.Fatalf("%s: the controller exited (%v):\n%s", what, exitErr, logs.String())
		default:
		}
	}

	eventually(t, "the controller's workers started", 60*time.Second, func() (bool, string) {
		running("starting")
		return strings.Contains(logs.String(), `msg="Starting workers" controller=kubeatlas-example`), logs.String()
	})
	ctx := context.Background()
	crdCreated := time.Now()
	dyn := installWidgets(t, c)
	crds := dyn.Resource(crdGVR)
	established := when(t, "the widget CRD established", 30*time.Second, func() bool {
		u, err := crds.Get(ctx, "widgets.example.com", metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
	if strings.Contains(logs.String(), `msg=reconciled`) {
		t.Fatalf("reconciled before any widget existed:\n%s", logs.String())
	}

	widgets := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"}, "spec": map[string]any{"size": int64(1)},
	}}
	var creating, created time.Time // the successful Create call
	eventually(t, "a widget created", 30*time.Second, func() (bool, string) {
		creating = time.Now()
		_, err := widgets.Create(ctx, widget, metav1.CreateOptions{})
		created = time.Now()
		return err == nil, errString(err)
	})
	annotated := func(generation int64) func() bool {
		return func() bool {
			u, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
			return err == nil && u.GetGeneration() == generation &&
				u.GetAnnotations()["kubeatlas.example/reconciled-generation"] == strconv.FormatInt(generation, 10)
		}
	}
	reconciled := when(t, "the widget annotated with generation 1", 30*time.Second, annotated(1))
	t.Logf("CRD established -> widget reconciled: %v (CRD created -> established: %v; the widget's Create call: %v after, it took %v; Create returned -> reconciled: %v)",
		reconciled.Sub(established).Round(time.Millisecond), established.Sub(crdCreated).Round(time.Millisecond), creating.Sub(established).Round(time.Millisecond),
		created.Sub(creating).Round(time.Millisecond), reconciled.Sub(created).Round(time.Millisecond))
	// Typically tens of milliseconds. Without the Provider watching
	// discovery (mgr.Add(p) left out), Kind would look again only every
	// 10 s: seconds later.
	if d := reconciled.Sub(created); d > 5*time.Second {
		t.Errorf("reconciled %v after the widget was created, want under 5 s", d.Round(time.Millisecond))
	}

	// A change of spec is a new generation: reconciled again, by the same process.
	if _, err := widgets.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"size":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	when(t, "the widget annotated with generation 2", 30*time.Second, annotated(2))
	running("after reconciling")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Errorf("on SIGTERM: %v, want exit 0", exitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM:\n%s", logs.String())
	}

	// Every line is a log line (no panic, no stray output), none an error
	// (but a request that the shutdown cancelled: client-go logs the body
	// it could not finish reading), and each generation's change was
	// logged.
	logged := map[string]bool{}
	stopping := false
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		stopping = stopping || strings.Contains(line, `msg="Stopping and waiting`)
		cancelled := stopping && strings.Contains(line, `err="context canceled"`)
		if !strings.HasPrefix(line, "time=") || strings.Contains(line, "level=ERROR") && !cancelled {
			t.Errorf("an error, or not a log line: %s", line)
		}
		if strings.Contains(line, "msg=reconciled controller=kubeatlas-example namespace=default name=w1 ") {
			_, fields, _ := strings.Cut(line, " generation=")
			logged[fields] = true
		}
	}
	if !logged["1 changed=true"] || !logged["2 changed=true"] {
		t.Errorf("reconciles logged: %v, want generations 1 and 2 changed", logged)
	}
}

// when polls cond every 10 ms until it holds and returns when it did.
func when(t *testing.T, what string, limit time.Duration, cond func() bool) time.Time {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
	}
	return time.Now()
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func errString(err error) string {
	if apierrors.IsNotFound(err) {
		return "the widgets resource is not served yet"
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// lockedBuffer is a bytes.Buffer that a process's output and the test may
// use at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
