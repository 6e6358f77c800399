package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCheck(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestExitStatus: 0 when every server agrees and all were asked, 2 when
// it cannot tell (servers alike cannot be told apart through the URL alone,
// or no answer at all), 1 when the servers disagree (with what differs),
// 0 for --help.
func TestExitStatus(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky), discoverytest.WithBackendVersions("v1.36.3", "v1.37.1"))
	kubeconfig := writeKubeconfig(t, base)
	code, out, errOut := runCheck(t, "--kubeconfig", kubeconfig)
	if code != agree || !strings.Contains(out, "Every API server serves the same discovery (every server asked directly") {
		t.Errorf("servers that agree: exit %d\n%s%s", code, out, errOut)
	}
	// Servers alike in version and discovery cannot be told apart through
	// the URL: it cannot tell whether it saw both.
	_, alike := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky))
	code, out, errOut = runCheck(t, "--kubeconfig", writeKubeconfig(t, alike), "--through-url", "--samples", "4")
	if code != cannotTell || !strings.Contains(out, "cannot tell") {
		t.Errorf("through the URL, servers alike: exit %d\n%s%s", code, out, errOut)
	}
	if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "Upgrade"}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCheck(t, "--kubeconfig", kubeconfig)
	if code != disagree || !regexp.MustCompile(`(?m)^upgraded\.example\.com/v1 upgrades: served by apiserver-1; not by apiserver-0$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^apiserver-1 +apiserver-\w+ +v1\.37\.1 +127\.0\.0\.1:\d+ `).MatchString(out) {
		t.Errorf("servers that disagree: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCheck(t, "--server", "http://127.0.0.1:1"); code != cannotTell || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("no server: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCheck(t, "--help"); code != agree || !strings.Contains(errOut, "--through-url") {
		t.Errorf("--help: exit %d, %s", code, errOut)
	}
}

// TestEmbedded: with no kubeconfig it checks the embedded fake cluster,
// whose second server is upgraded first.
func TestEmbedded(t *testing.T) {
	testenv.NoKubeconfig(t)
	t.Setenv(cli.FakeAPIServerEnv, "")
	code, out, errOut := runCheck(t)
	if code != disagree || !strings.Contains(out, "upgraded.example.com/v1") || !strings.Contains(errOut, "embedded fake cluster") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}
