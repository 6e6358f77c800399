// Package tests is kubeatlas's integration tier: a real kube-apiserver
// v1.36.3 and etcd on loopback, driven through kubeatlas and kubectl. The
// server binary comes from ../kube-apiserver (go build there; .ci/run does)
// and is named by KUBEATLAS_KUBE_APISERVER; etcd from Debian's etcd-server.
package tests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

const token = "kubeatlas-integration-token"

// viewerToken authenticates a user with no role bindings: discovery is
// allowed (system:discovery binds every authenticated user), listing and
// watching CRDs and APIServices are not.
const viewerToken = "kubeatlas-integration-viewer"

// cluster is a running kube-apiserver with its etcd.
type cluster struct {
	config *rest.Config
	url    string
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startCluster starts etcd and kube-apiserver on loopback for the test.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	bin := os.Getenv("KUBEATLAS_KUBE_APISERVER")
	if bin == "" {
		if os.Getenv(testenv.RequireVar) != "" {
			t.Fatal("KUBEATLAS_KUBE_APISERVER is not set; build it in internal/integration/kube-apiserver")
		}
		t.Skip("KUBEATLAS_KUBE_APISERVER is not set: build the real kube-apiserver in internal/integration/kube-apiserver (.ci/run does)")
	}
	etcdBin := testenv.Tool(t, "etcd")
	dir := t.TempDir()

	etcdURL := startEtcd(t, etcdBin, dir)

	// A self-signed serving certificate for 127.0.0.1.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, filepath.Join(dir, "serving.crt"), "CERTIFICATE", certDER)
	writePEM(t, filepath.Join(dir, "serving.key"), "EC PRIVATE KEY", keyDER)
	writeAuthFiles(t, dir)

	port := freePort(t)
	apiserver := exec.Command(bin, apiserverFlags(etcdURL, dir, port,
		filepath.Join(dir, "certs"), filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key"))...)
	log := logFile(t, dir, "kube-apiserver.log")
	apiserver.Stdout, apiserver.Stderr = log, log
	if err := apiserver.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apiserver.Process.Kill(); _ = apiserver.Wait() })

	c := &cluster{url: fmt.Sprintf("https://127.0.0.1:%d", port)}
	c.config = &rest.Config{Host: c.url, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})}, QPS: -1}
	if err := waitReady(context.Background(), c.url, 90*time.Second); err != nil {
		logs, _ := os.ReadFile(filepath.Join(dir, "kube-apiserver.log"))
		t.Fatalf("kube-apiserver not ready: %v\n%s", err, tail(logs, 3000))
	}
	return c
}

// startEtcd starts etcd on loopback with its data and log in dir, stopped
// at the test's end, and returns its client URL.
func startEtcd(t testing.TB, etcdBin, dir string) string {
	t.Helper()
	return startEtcdProc(t, etcdBin, dir).url
}

// etcdProc is an etcd started by startEtcdProc.
type etcdProc struct {
	url  string
	args []string
	bin  string
	dir  string
	cmd  *exec.Cmd
}

// startEtcdProc starts etcd on loopback with its data and log in dir,
// stopped at the test's end.
func startEtcdProc(t testing.TB, etcdBin, dir string) *etcdProc {
	t.Helper()
	etcdPort, peerPort := freePort(t), freePort(t)
	e := &etcdProc{url: fmt.Sprintf("http://127.0.0.1:%d", etcdPort), bin: etcdBin, dir: dir, args: []string{"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort)}}
	if err := e.start(t); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *etcdProc) start(t testing.TB) error {
	cmd := exec.Command(e.bin, e.args...)
	cmd.Stdout, cmd.Stderr = logFile(t, e.dir, "etcd.log"), logFile(t, e.dir, "etcd.log")
	if err := cmd.Start(); err != nil {
		return err
	}
	e.cmd = cmd
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return nil
}

// restart kills etcd and starts it again on the same ports and data, and
// waits until it answers /health, within 60 s. Not safe for concurrent
// use.
func (e *etcdProc) restart(t testing.TB) error {
	_ = e.cmd.Process.Kill()
	_ = e.cmd.Wait()
	if err := e.start(t); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(e.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/health: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not healthy 60 s after its restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeAuthFiles writes into dir what every kube-apiserver of a test's
// control plane shares: a service-account key pair (sa.key, sa.pub) and the
// token file (tokens.csv) naming the admin (token) and the viewer
// (viewerToken).
func writeAuthFiles(t testing.TB, dir string) {
	t.Helper()
	sa, _ := rsa.GenerateKey(rand.Reader, 2048)
	writePEM(t, filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa))
	saPub, _ := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	writePEM(t, filepath.Join(dir, "sa.pub"), "PUBLIC KEY", saPub)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+`,admin,admin-uid,"system:masters"`+"\n"+viewerToken+`,viewer,viewer-uid`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// apiserverFlags are the flags of a kube-apiserver on loopback at port,
// with etcd at etcdURL and the auth files writeAuthFiles wrote into dir.
func apiserverFlags(etcdURL, dir string, port int, certDir, certFile, keyFile string) []string {
	return []string{
		"--etcd-servers", etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
		"--service-account-key-file=" + filepath.Join(dir, "sa.pub"), "--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none", "--profiling=false",
	}
}

// waitReady polls url's /readyz with the admin token until it answers 200,
// within the given time or until ctx ends.
func waitReady(ctx context.Context, url string, within time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", within, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", context.Cause(ctx), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func logFile(t testing.TB, dir, name string) *os.File {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, within, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeKubeconfig writes a kubeconfig for the cluster's admin into dir and
// returns its path.
func (c *cluster) writeKubeconfig(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
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
`, c.url, base64.StdEncoding.EncodeToString(c.config.CAData), token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
