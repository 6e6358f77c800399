package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// binary is this program, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fake-apiserver")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "fake-apiserver")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startBinary runs this program, returning its base URL from the first line
// of its stdout. It is stopped with SIGINT at cleanup and must exit cleanly.
func startBinary(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fake-apiserver exited with %v after SIGINT", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("fake-apiserver did not stop on SIGINT")
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://127.0.0.1:") {
		t.Fatalf("first line %q (%v), want the base URL", line, err)
	}
	return strings.TrimSpace(line)
}

// expectedNames computes `kubectl api-resources -o name` from a server's
// aggregated v2 discovery: resource for the core group, resource.group
// otherwise, subresources excluded.
func expectedNames(t *testing.T, base string) []string {
	t.Helper()
	var names []string
	for _, path := range []string{"/api", "/apis"} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, g := range list.Items {
			seen := map[string]bool{}
			for _, v := range g.Versions {
				for _, r := range v.Resources {
					name := r.Resource
					if g.Name != "" {
						name += "." + g.Name
					}
					if !seen[name] {
						seen[name] = true
						names = append(names, name)
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

func kubectl(t *testing.T, base string, args ...string) (string, error) {
	t.Helper()
	bin := testenv.Tool(t, "kubectl")
	args = append([]string{"--server", base, "--cache-dir", t.TempDir()}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestKubectlAgainstFakeServer drives the real kubectl against this program
// in every server generation: api-resources lists exactly what the server
// serves, and explain finds built-in and custom kinds in OpenAPI v3.
func TestKubectlAgainstFakeServer(t *testing.T) {
	testenv.Tool(t, "kubectl")
	for _, gen := range []string{"v2", "v2+v2beta1", "v2beta1", "legacy"} {
		t.Run(gen, func(t *testing.T) {
			base := startBinary(t, "--crds", "30", "--groups", "3", "--generation", gen)
			out, err := kubectl(t, base, "api-resources", "-o", "name")
			if err != nil {
				t.Fatalf("kubectl api-resources: %v\n%s", err, out)
			}
			got := strings.Fields(out)
			slices.Sort(got)
			// The content is the same in every generation; read it where it
			// is served as aggregated v2.
			same, err := discoverytest.NewServer(discoverytest.WithCRDs(30, 3))
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(same)
			defer ts.Close()
			want := expectedNames(t, ts.URL)
			if !slices.Equal(got, want) {
				t.Errorf("kubectl api-resources -o name lists %d names, the server serves %d\n got %v\nwant %v", len(got), len(want), got, want)
			}
			if !slices.Contains(got, "widget0007s.g001.stress.example.com") {
				t.Errorf("a synthetic CRD is missing from kubectl's list")
			}
			if gen != "v2" {
				return
			}
			out, err = kubectl(t, base, "explain", "deployments")
			if err != nil || !strings.Contains(out, "KIND:       Deployment") || !strings.Contains(out, "GROUP:      apps") {
				t.Errorf("kubectl explain deployments: %v\n%s", err, out)
			}
			out, err = kubectl(t, base, "explain", "widget0007.spec.template.spec.containers")
			if err != nil || !strings.Contains(out, "KIND:       Widget0007") || !strings.Contains(out, "FIELD: containers <[]Container>") {
				t.Errorf("kubectl explain widget0007.spec.template.spec.containers: %v\n%s", err, out)
			}
		})
	}
}

// TestKubectlSeesStaleGroup: an unreachable aggregated API server (a Stale
// group-version) is dropped by kubectl v1.32 without a word: the server lists
// metrics.k8s.io with freshness Stale, and kubectl lists everything else.
func TestKubectlSeesStaleGroup(t *testing.T) {
	testenv.Tool(t, "kubectl")
	base := startBinary(t, "--stale", "metrics.k8s.io/v1beta1")
	want := expectedNames(t, base)
	if !slices.Contains(want, "pods.metrics.k8s.io") {
		t.Fatalf("the server does not list the stale group: %v", want)
	}
	out, err := kubectl(t, base, "api-resources", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl api-resources: %v\n%s", err, out)
	}
	got := strings.Fields(out)
	slices.Sort(got)
	want = slices.DeleteFunc(want, func(n string) bool { return strings.HasSuffix(n, ".metrics.k8s.io") })
	if !slices.Equal(got, want) {
		t.Errorf("kubectl lists %v\nwant everything but the stale group: %v", got, want)
	}
}

// TestToken: with --token the server demands it, as a real one does. (kubectl
// will not send a token over plain HTTP, so this asks with net/http.)
func TestToken(t *testing.T) {
	base := startBinary(t, "--token", "s3cret")
	for auth, want := range map[string]int{"Bearer s3cret": http.StatusOK, "": http.StatusForbidden, "Bearer wrong": http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodGet, base+"/apis", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d", auth, resp.StatusCode, want)
		}
	}
}

// TestExitsWhenStdinCloses: run as the commands' embedded cluster, the
// server goes when its parent closes its stdin (or dies), and not before.
func TestExitsWhenStdinCloses(t *testing.T) {
	cmd := exec.Command(binary, "--exit-when-stdin-closes")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	resp, err := http.Get(strings.TrimSpace(line) + "/version")
	if err != nil {
		t.Fatalf("not serving while stdin is open: %v", err)
	}
	resp.Body.Close()
	// A connection the client opened and sent nothing on, as an HTTP
	// client's pool may leave: a graceful shutdown waits 5 s for it
	// (net/http calls a new connection idle only after 5 s), and the
	// embedded commands hung that long after printing.
	idle, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSpace(line), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	time.Sleep(100 * time.Millisecond) // accepted
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stdin.Close()
	_ = idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a connection with no request was not closed at once when stdin closed: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exited with %v after stdin closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after its stdin closed")
	}
}

// TestDemoCRD: --demo-crd-every makes a CRD come and go, for watch-apis's
// embedded demo.
func TestDemoCRD(t *testing.T) {
	base := startBinary(t, "--demo-crd-every", "200ms")
	served := func() bool {
		resp, err := http.Get(base + "/apis/demo.example.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for _, want := range []bool{true, false} {
		deadline := time.Now().Add(10 * time.Second)
		for served() != want {
			if time.Now().After(deadline) {
				t.Fatalf("demo.example.com/v1 served=%v for 10 s", !want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
