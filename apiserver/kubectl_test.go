package apiserver_test

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// kubectl get apigroups shows the table, and kubectl get apigroups -w a new
// CRD's group, against local mode (the kubeconfig it writes).
func TestKubectl(t *testing.T) {
	kubectl := testenv.Tool(t, "kubectl")
	fake, url := startFake(t)
	s := serve(t, url, serveOptions{})
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", s.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	out := run("get", "apigroups")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if h := strings.Fields(lines[0]); strings.Join(h, " ") != "NAME PREFERRED VERSIONS RESOURCES FRESHNESS AGE" {
		t.Fatalf("header %q", lines[0])
	}
	if !strings.Contains(out, "\napps ") || !strings.Contains(out, "\ncore ") {
		t.Fatalf("no apps or core row:\n%s", out)
	}
	if out := run("get", "apigroups.discovery.kubeatlas.io", "apps", "-o", "jsonpath={.status.preferredVersion}"); out != "v1" {
		t.Fatalf("apps preferred version %q", out)
	}
	if out := run("get", "apigroups", "-l", "discovery.kubeatlas.io/stale=true", "-o", "name"); strings.TrimSpace(out) != "" && !strings.Contains(out, "No resources") {
		t.Fatalf("stale groups on a healthy fake: %q", out)
	}
	if out := run("get", "apigroups", "--field-selector", "metadata.name=apps", "-o", "name"); strings.TrimSpace(out) != "group.discovery.kubeatlas.io/apps" {
		t.Fatalf("field selector: %q", out)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", s.Kubeconfig, "get", "apigroups", "-w", "--no-headers")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	seen := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		listed := false
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "apps ") {
				listed = true
			}
			if listed && strings.HasPrefix(sc.Text(), "widgets.example.com ") {
				seen <- sc.Text()
				return
			}
		}
	}()
	// The watch starts with the list; add the CRD once the list is out.
	time.Sleep(500 * time.Millisecond)
	if err := fake.AddCRD(discoverytest.CRD{Group: "widgets.example.com", Versions: []string{"v1beta1"}, Kind: "Widget"}); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-seen:
		if f := strings.Fields(line); len(f) < 5 || f[1] != "v1beta1" || f[4] != "Current" {
			t.Fatalf("watched row %q", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("kubectl get -w did not show the new group")
	}
}
