package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
	if code, _, errOut := runCheck(t, "--no-such-flag"); code != cannotTell || !strings.Contains(errOut, "unknown flag: --no-such-flag") {
		t.Errorf("a bad flag: exit %d, %s", code, errOut)
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
	if code != disagree || !strings.Contains(out, "upgraded.example.com/v1") || !strings.Contains(errOut, "embedded fake cluster (two API servers behind one URL, v1.36.3 and v1.37.1") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestTimeout: the whole check has --timeout to finish (default 1m): a
// cluster whose URL accepts connections and never answers gets exit
// status 2 and says why, after about that long.
func TestTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"--kubeconfig", writeKubeconfig(t, "http://"+ln.Addr().String()), "--timeout", "500ms"}, &out, &errOut)
	if code != cannotTell || !strings.Contains(errOut.String(), "did not finish within --timeout 500ms") || ctx.Err() != nil {
		t.Errorf("a cluster that never answers: exit %d, %s (the test's own deadline: %v)", code, errOut.String(), ctx.Err())
	}
	if code, _, errOut := runCheck(t, "--help"); code != agree || !strings.Contains(errOut, "--timeout duration") || !strings.Contains(errOut, "(default 1m0s)") {
		t.Errorf("--help: exit %d, %s", code, errOut)
	}
}

// TestServerThatDoesNotAnswer: a lease names a server that refuses
// connections (down, its lease still current); the two servers that
// answer agree and every sample through the URL reaches them: it names
// the one not seen, and exits 2: that server was not seen, so it cannot
// tell.
func TestServerThatDoesNotAnswer(t *testing.T) {
	srv, _ := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now
	mux := http.NewServeMux()
	mux.Handle("/", srv)
	mux.HandleFunc("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		var list map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		list["items"] = append(list["items"].([]any), map[string]any{
			"metadata": map[string]any{"name": "apiserver-down", "labels": map[string]string{"kubernetes.io/hostname": "kas-down"},
				"annotations": map[string]string{"kubernetes.io/peer-advertise-address": down}},
			"spec": map[string]any{"leaseDurationSeconds": 3600, "renewTime": time.Now().UTC().Format(time.RFC3339)},
		})
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	})
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	code, out, errOut := runCheck(t, "--kubeconfig", writeKubeconfig(t, front.URL))
	if code != cannotTell || !strings.Contains(out, "Not seen, and reached by no sample through the URL (16 samples): kas-down.") ||
		!strings.Contains(out, "Every API server that answers serves the same discovery, but not every server was seen (16 samples through the URL): cannot tell.") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestPointedAtOneServer: pointed at one server's own address, through
// its URL only (as where the others cannot be asked), it sees that server
// alone. With peer-aggregated discovery, that server's merged view serves
// what its peer serves and it does not: it exits 1, naming each resource
// as served through a peer (it exited 2, cannot tell, on 7ae8804). Where
// the two serve the same, it cannot tell: exit 2, never 0. Asked both
// directly, it names the difference once.
func TestPointedAtOneServer(t *testing.T) {
	srv, _ := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky),
		discoverytest.WithBackendVersions("v1.36.3", "v1.37.1"), discoverytest.WithPeerAggregation())
	old := srv.Backends()[0]
	kubeconfig := writeKubeconfig(t, old.URL())
	code, out, errOut := runCheck(t, "--kubeconfig", kubeconfig, "--through-url", "--samples", "4")
	if code != cannotTell || !strings.Contains(out, "The servers seen agree, but not every server was seen (4 samples through the URL): cannot tell.") {
		t.Errorf("servers alike: exit %d\n%s%s", code, out, errOut)
	}
	if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "Upgrade"}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCheck(t, "--kubeconfig", kubeconfig, "--through-url", "--samples", "4")
	if code != disagree || !regexp.MustCompile(`(?m)^upgraded\.example\.com/v1 upgrades: served by a peer of unnamed v1\.36\.3 \(discovery \w+\), not by unnamed v1\.36\.3 \(discovery \w+\) itself$`).MatchString(out) ||
		!strings.Contains(out, "The API servers disagree (not every server seen, 4 samples through the URL).") {
		t.Errorf("the peer upgraded: exit %d\n%s%s", code, out, errOut)
	}
	// Both asked directly: what the peer serves is a difference between
	// the two views, named once, not again as served through a peer.
	code, out, errOut = runCheck(t, "--kubeconfig", kubeconfig)
	if code != disagree || !strings.Contains(out, "upgraded.example.com/v1 upgrades: served by apiserver-1; not by apiserver-0\n") || strings.Contains(out, "SERVED THROUGH A PEER") {
		t.Errorf("both asked: exit %d\n%s%s", code, out, errOut)
	}
}
