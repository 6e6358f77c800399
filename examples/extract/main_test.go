package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// extract runs the command in process on the embedded cluster, with its
// own cache directory and no kubeconfig.
func extract(t *testing.T, cacheDir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("KUBECACHEDIR", cacheDir)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	var out, errOut bytes.Buffer
	err = run(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestExtractEmbedded: each manager's configuration, and only its own: the
// sidecar injector's container is not the deployer's, and both are
// extracted when no manager is named.
func TestExtractEmbedded(t *testing.T) {
	dir := t.TempDir()
	out, stderr, err := extract(t, dir, "deployments", "web", "--field-manager", "sidecar-injector")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(out, "envoy:1.31") || strings.Contains(out, "nginx") || strings.Contains(out, "replicas") {
		t.Errorf("sidecar-injector's configuration:\n%s", out)
	}
	out, stderr, err = extract(t, dir, "deployment.apps/web")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	deployer, injector, ok := strings.Cut(out, "---\n")
	if !ok || !strings.Contains(deployer, "# applied by deployer") || !strings.Contains(deployer, "replicas: 3") || strings.Contains(deployer, "envoy") ||
		!strings.Contains(injector, "# applied by sidecar-injector") {
		t.Errorf("every manager:\n%s", out)
	}
	// Errors name what is missing, as kubectl's do.
	if _, _, err := extract(t, dir, "deployments", "nope"); err == nil || !strings.Contains(err.Error(), `deployments.apps "nope" not found`) {
		t.Errorf("a missing object: %v", err)
	}
	if _, _, err := extract(t, dir, "widgets", "foo"); err == nil || err.Error() != `the server doesn't have a resource type "widgets"` {
		t.Errorf("a resource the server does not serve: %v", err)
	}
	if _, _, err := extract(t, dir, "deployments"); err == nil || !strings.Contains(err.Error(), "name one object") {
		t.Errorf("no name: %v", err)
	}
}
