package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// TestSameAsKubectl: for kinds, field paths, maps, lists, a CRD, the
// resource.group form and --recursive, the output is kubectl explain's,
// byte for byte.
func TestSameAsKubectl(t *testing.T) {
	kubectl := testenv.Tool(t, "kubectl")
	srv, err := discoverytest.NewServer(discoverytest.WithCRDs(10, 2))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	t.Setenv("KUBECACHEDIR", t.TempDir())
	for _, args := range [][]string{
		{"deployments"},
		{"deployments.spec.template.spec.containers"},
		{"deploy.spec.template.spec.containers.image"},
		{"widget0001s.spec"},
		{"--recursive", "deployments.spec"},
		{"deployments.spec", "--recursive"}, // flags after arguments, as kubectl takes them
		{"pods"},
		{"deploy.metadata.labels"},
		{"deployments.spec.template.spec.containers", "--recursive"},
		{"deployments.apps.spec.replicas"},
		{"widget0001s.g001.stress.example.com.spec"},
		{"--api-version", "apps/v1", "deploy.spec"},
	} {
		var out, errOut bytes.Buffer
		if err := run(append([]string{"--server", ts.URL}, args...), &out, &errOut); err != nil {
			t.Fatalf("explain %v: %v\n%s", args, err, errOut.String())
		}
		cmd := exec.Command(kubectl, append([]string{"explain", "--server", ts.URL, "--cache-dir", t.TempDir()}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=")
		want, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl explain %v: %v", args, err)
		}
		// Byte for byte: users diff.
		if out.String() != string(want) || len(want) < 40 {
			t.Errorf("explain %v:\n got:\n%s\nwant:\n%s", args, out.String(), want)
		}
	}
}

// TestUnservedAPIVersion: --api-version that the server does not serve is
// an error, as in kubectl, not the preferred version's schema.
func TestUnservedAPIVersion(t *testing.T) {
	_, base := discoverytest.Start(t)
	t.Setenv("KUBECACHEDIR", t.TempDir())
	var out, errOut bytes.Buffer
	err := run([]string{"--server", base, "--api-version", "apps/v9", "deploy"}, &out, &errOut)
	if err == nil || out.Len() != 0 {
		t.Errorf("explain --api-version apps/v9 deploy: %v\n%s", err, out.String())
	}
}

// TestMissingField: kubectl prints the header, then an error naming the
// path's last field, whichever is missing.
func TestMissingField(t *testing.T) {
	_, base := discoverytest.Start(t)
	t.Setenv("KUBECACHEDIR", t.TempDir())
	var out, errOut bytes.Buffer
	err := run([]string{"--server", base, "deploy.spec.nope.deeper"}, &out, &errOut)
	if err == nil || err.Error() != `field "deeper" does not exist` {
		t.Errorf("error: %v", err)
	}
	if want := "GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n\n"; out.String() != want {
		t.Errorf("stdout %q, want kubectl's header %q", out.String(), want)
	}
}

// TestShortNameWarning: a short name two resources share is explained
// with kubectl's warning on stderr, once.
func TestShortNameWarning(t *testing.T) {
	_, base := discoverytest.Start(t)
	t.Setenv("KUBECACHEDIR", t.TempDir())
	var out, errOut bytes.Buffer
	if err := run([]string{"--server", base, "ev"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if want := "Warning: short name \"ev\" could also match lower priority resource events.events.k8s.io\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
}

// TestWarmCacheAsksOnlyTheRoot: a second explain reads the document from
// the disk cache.
func TestWarmCacheAsksOnlyTheRoot(t *testing.T) {
	srv, err := discoverytest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	t.Setenv("KUBECACHEDIR", t.TempDir())
	args := []string{"--server", ts.URL, "deployments.spec"}
	if err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	if err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Path, "/openapi/v3/") {
			t.Errorf("a warm run fetched %s", r.Path)
		}
	}
	if err := run([]string{"--server", ts.URL, "nosuchthings"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Errorf("an unknown resource explained")
	}
}

// TestWarmCacheServerDown: with a warm cache, explain works while the
// server is down and says it explains from what was cached, as
// api-resources does (it failed: the OpenAPI root was never cached).
func TestWarmCacheServerDown(t *testing.T) {
	srv, err := discoverytest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Setenv("KUBECACHEDIR", t.TempDir())
	args := []string{"--server", ts.URL, "deployments.spec"}
	var warm bytes.Buffer
	if err := run(args, &warm, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	ts.Close()
	var out, errOut bytes.Buffer
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("server down, warm cache: %v\n%s", err, errOut.String())
	}
	if out.String() != warm.String() {
		t.Errorf("server down: explained\n%s\nwant what it explained before\n%s", out.String(), warm.String())
	}
	for _, want := range []string{"could not revalidate the cached discovery", "could not read the OpenAPI root"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr %q does not say %q", errOut.String(), want)
		}
	}
}

// TestHelpShowsTheArgument: --help says what explain takes, not only its
// flags, and ends with status 0.
func TestHelpShowsTheArgument(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run([]string{"--help"}, &stdout, &stderr)
	if status := cli.Status(err, &stderr); status != 0 {
		t.Fatalf("status %d: %s", status, stderr.String())
	}
	if !strings.HasPrefix(stderr.String(), "Usage: explain [flags] RESOURCE[.FIELD.PATH]\n") || !strings.Contains(stderr.String(), "--recursive") {
		t.Errorf("--help printed:\n%s", stderr.String())
	}
}
