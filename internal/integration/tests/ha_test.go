//go:build linux

package tests

// An HA control plane of two real kube-apiservers of different minor
// versions on one etcd, optionally with the KEP-4020 peer proxy (mixed
// version proxy and peer-aggregated discovery), behind a round-robin TCP
// load balancer of our own. /work/shared/realserver.md records why it is
// built this way: each server runs in its own UTS namespace with its own
// hostname, since the API server identity lease is named after the
// hostname, and the serving certificates name kubernetes.default.svc,
// which the peer proxy verifies.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
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

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// nextAPIServerVar names the second, newer kube-apiserver of the HA pair
// (v1.37.1, built in ../kube-apiserver-v1.37); KUBEATLAS_KUBE_APISERVER
// names the first (v1.36.3).
const nextAPIServerVar = "KUBEATLAS_KUBE_APISERVER_NEXT"

// haOptions choose how startHA configures both servers.
type haOptions struct {
	// peerProxy gives both servers the KEP-4020 peer flags: a front-proxy
	// (requestheader) CA and client certificate, --peer-ca-file and
	// --peer-advertise-ip/-port, so that each serves peer-aggregated
	// discovery and proxies requests for resources only its peer serves.
	// Without it each server serves its own discovery alone, though its
	// identity lease still carries a kubernetes.io/peer-advertise-address
	// annotation (its --advertise-address and --secure-port).
	peerProxy bool
	// storageVersionAPI turns on the StorageVersionAPI feature gate and
	// internal.apiserver.k8s.io/v1alpha1 (storageversions) on both; the
	// same two flags work on v1.36.3 and v1.37.1.
	storageVersionAPI bool
	// sameVersion starts both servers from KUBEATLAS_KUBE_APISERVER
	// (v1.36.3): a pair that agrees.
	sameVersion bool
	// aggregatorRouting gives both --enable-aggregator-routing, so that an
	// APIService is reached at its EndpointSlice's address (an aggregated
	// server in a network namespace: see aggregation_test.go) rather than
	// at a ClusterIP nobody routes.
	aggregatorRouting bool
}

// haServer is one kube-apiserver of an haPlane.
type haServer struct {
	name    string // its hostname, which names its identity lease
	url     string // https://127.0.0.1:PORT
	version string // its /version gitVersion, e.g. v1.36.3
	port    int
	log     string   // the path of its log file
	args    []string // its flags, kept for restart
	proc    *haProc
}

// stop kills this server alone (the others and etcd keep running) and
// waits for it to exit. Stopping twice is harmless.
func (s haServer) stop() { s.proc.stop() }

// haProc is a kube-apiserver process. unshare and sh exec it, so the pid
// started is the server's own.
type haProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when it has exited
	err    error         // Wait's answer, once exited is closed
}

func (p *haProc) stop() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// haPlane is an HA control plane started by startHA.
type haPlane struct {
	servers []haServer  // servers[0] from KUBEATLAS_KUBE_APISERVER, servers[1] from KUBEATLAS_KUBE_APISERVER_NEXT
	lb      *roundRobin // in front of both servers, in that order
	config  *rest.Config
	caPEM   []byte // the CA of both serving certificates
	dir     string // certificates, etcd's data and every log
	unshare string // the unshare binary each server is started through
	etcd    *etcdProc
}

// configFor returns a rest.Config for the admin at url (a server's, the
// balancer's, or any proxy's in front of them that passes TLS through).
func (p *haPlane) configFor(url string) *rest.Config {
	return &rest.Config{Host: url, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM}, QPS: -1}
}

// httpClient returns a plain net/http client trusting the plane's CA. It
// sends no credentials; see get.
func (p *haPlane) httpClient(keepAlives bool) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: !keepAlives,
	}}
}

// haMissing skips, or fails when testenv.RequireVar is set.
func haMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(testenv.RequireVar) != "" {
		t.Fatalf(format+" ("+testenv.RequireVar+" is set, so this is a failure)", args...)
	}
	t.Skipf(format+" (set "+testenv.RequireVar+"=1 to fail instead)", args...)
}

// startHA starts etcd and two kube-apiservers on it, the first from
// KUBEATLAS_KUBE_APISERVER and the second from
// KUBEATLAS_KUBE_APISERVER_NEXT, each in its own UTS namespace with its own
// hostname, waits until both are ready and puts a round-robin balancer in
// front of them. Everything stops at the test's end.
func startHA(t testing.TB, o haOptions) *haPlane {
	t.Helper()
	bins := []string{os.Getenv("KUBEATLAS_KUBE_APISERVER"), os.Getenv(nextAPIServerVar)}
	if o.sameVersion {
		bins[1] = bins[0]
	}
	if bins[0] == "" || bins[1] == "" {
		haMissing(t, "the HA pair needs KUBEATLAS_KUBE_APISERVER (v1.36.3, built in internal/integration/kube-apiserver) and %s (v1.37.1, built in internal/integration/kube-apiserver-v1.37)", nextAPIServerVar)
	}
	if os.Geteuid() != 0 {
		haMissing(t, "the HA pair runs each kube-apiserver in its own UTS namespace, which needs root")
	}
	unshare := testenv.Tool(t, "unshare")
	if out, err := exec.Command(unshare, "--uts", "sh", "-c", "hostname kubeatlas-probe").CombinedOutput(); err != nil {
		haMissing(t, "unshare --uts cannot set a hostname here: %v: %s", err, out)
	}
	etcdBin := testenv.Tool(t, "etcd")
	versions := make([]string, len(bins))
	for i, bin := range bins {
		out, err := exec.Command(bin, "--version").Output()
		f := strings.Fields(string(out))
		if err != nil || len(f) != 2 {
			t.Fatalf("%s --version: %v: %q", bin, err, out)
		}
		versions[i] = f[1]
	}

	dir := t.TempDir()
	etcd := startEtcdProc(t, etcdBin, dir)
	etcdURL := etcd.url
	writeAuthFiles(t, dir)

	ca := newTestCA(t, "kubeatlas-ha-ca")
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", ca.cert.Raw)
	var peerFlags []string
	if o.peerProxy {
		front := newTestCA(t, "kubeatlas-front-proxy-ca")
		writePEM(t, filepath.Join(dir, "front-proxy-ca.crt"), "CERTIFICATE", front.cert.Raw)
		crt, key := front.issue(t, dir, "front-proxy-client", "front-proxy-client", false)
		peerFlags = []string{
			"--proxy-client-cert-file=" + crt, "--proxy-client-key-file=" + key,
			"--requestheader-client-ca-file=" + filepath.Join(dir, "front-proxy-ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--peer-ca-file=" + filepath.Join(dir, "ca.crt"),
			"--peer-advertise-ip=127.0.0.1",
		}
	}

	p := &haPlane{caPEM: ca.pem, dir: dir, unshare: unshare, etcd: etcd}
	start := time.Now()
	for i, bin := range bins {
		name := fmt.Sprintf("kas-%d", i)
		port := freePort(t)
		crt, key := ca.issue(t, dir, name, name, true)
		args := apiserverFlags(etcdURL, dir, port, filepath.Join(dir, name+"-certs"), crt, key)
		if o.peerProxy {
			args = append(append(args, peerFlags...), "--peer-advertise-port="+strconv.Itoa(port))
		}
		if o.aggregatorRouting {
			args = append(args, "--enable-aggregator-routing=true")
		}
		if o.storageVersionAPI {
			args = append(args, "--feature-gates=StorageVersionAPI=true", "--runtime-config=internal.apiserver.k8s.io/v1alpha1=true")
		}
		s := haServer{name: name, url: fmt.Sprintf("https://127.0.0.1:%d", port), version: versions[i], port: port,
			log: filepath.Join(dir, name+".log"), args: args}
		proc, err := p.launch(t, s, bin)
		if err != nil {
			t.Fatal(err)
		}
		s.proc = proc
		p.servers = append(p.servers, s)
	}

	errs := make([]error, len(p.servers))
	var wg sync.WaitGroup
	for i, s := range p.servers {
		wg.Go(func() {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			go func() {
				select {
				case <-s.proc.exited:
					cancel(fmt.Errorf("it exited: %v", s.proc.err))
				case <-ctx.Done():
				}
			}()
			errs[i] = waitReady(ctx, s.url, 120*time.Second)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			s := p.servers[i]
			logs, _ := os.ReadFile(s.log)
			t.Fatalf("%s (%s) not ready: %v\n%s", s.name, s.version, err, tail(logs, 3000))
		}
	}
	t.Logf("HA pair %s (%s) and %s (%s) ready in %v (peerProxy=%v storageVersionAPI=%v)",
		p.servers[0].name, p.servers[0].version, p.servers[1].name, p.servers[1].version,
		time.Since(start).Round(10*time.Millisecond), o.peerProxy, o.storageVersionAPI)

	p.lb = newRoundRobin(t, strings.TrimPrefix(p.servers[0].url, "https://"), strings.TrimPrefix(p.servers[1].url, "https://"))
	p.config = p.configFor(p.lb.url())
	return p
}

// launch starts server s from bin with s's flags, in its own UTS namespace
// named s.name, logging to s.log (appended to), and stops it at the test's
// end. It does not wait for the server to be ready.
func (p *haPlane) launch(t testing.TB, s haServer, bin string) (*haProc, error) {
	t.Helper()
	// sh sets the hostname in the new UTS namespace and execs the
	// server: its pid is the one started, so Kill stops the server.
	cmd := exec.Command(p.unshare, append([]string{"--uts", "sh", "-c", `hostname "$0" && exec "$@"`, s.name, bin}, s.args...)...)
	log := logFile(t, p.dir, filepath.Base(s.log))
	cmd.Stdout, cmd.Stderr = log, log
	// Should the test binary die without its cleanups (a timeout's
	// panic), the servers die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	proc := &haProc{cmd: cmd, exited: make(chan struct{})}
	go func() { proc.err = cmd.Wait(); close(proc.exited) }()
	t.Cleanup(proc.stop)
	return proc, nil
}

// restart stops server i and starts it again from bin (another
// kube-apiserver version, for a rolling upgrade or a rollback) on the same
// port, certificates, flags and etcd, then waits until it is ready, within
// 120 s or until ctx ends. It returns the version bin says it is. The
// balancer is not told: take the server out around the restart, as a load
// balancer's health check would. Not safe for concurrent use with reads of
// p.servers[i].version or .proc.
func (p *haPlane) restart(ctx context.Context, t testing.TB, i int, bin string) (string, error) {
	t.Helper()
	out, err := exec.Command(bin, "--version").Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 2 {
		return "", fmt.Errorf("%s --version: %v: %q", bin, err, out)
	}
	s := &p.servers[i]
	s.proc.stop()
	proc, err := p.launch(t, *s, bin)
	if err != nil {
		return "", err
	}
	s.proc, s.version = proc, f[1]
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-proc.exited:
			cancel(fmt.Errorf("it exited: %v", proc.err))
		case <-ctx.Done():
		}
	}()
	if err := waitReady(ctx, s.url, 120*time.Second); err != nil {
		logs, _ := os.ReadFile(s.log)
		return "", fmt.Errorf("%s (%s) not ready after its restart: %v\n%s", s.name, s.version, err, tail(logs, 3000))
	}
	return s.version, nil
}

// testCA is a certificate authority for a test's certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func serialNumber(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pemCert(der)}
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// issue writes NAME.crt and NAME.key into dir: a serving certificate for
// 127.0.0.1, localhost and the kubernetes service's names when server is
// true, a client certificate for cn otherwise.
func (ca *testCA) issue(t testing.TB, dir, name, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// roundRobin is a TCP load balancer on loopback: each new connection goes
// to the next backend in turn that is not taken out, and its bytes are
// copied both ways until either side closes. It does no health checks: a
// connection handed to a backend that is down is closed at once (take the
// backend out to stop that). Close it, or let the test's end do so.
type roundRobin struct {
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	backends []string // host:port
	out      []bool
	counts   []int
	next     int
	conns    map[net.Conn]struct{}
	closed   bool
}

// newRoundRobin listens on 127.0.0.1 and balances over backends
// (host:port), in that order.
func newRoundRobin(t testing.TB, backends ...string) *roundRobin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &roundRobin{ln: ln, backends: backends, out: make([]bool, len(backends)), counts: make([]int, len(backends)), conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(func() { r.Close() })
	return r
}

// addr is the balancer's host:port.
func (r *roundRobin) addr() string { return r.ln.Addr().String() }

// url is https:// and the balancer's address.
func (r *roundRobin) url() string { return "https://" + r.addr() }

// connections returns how many connections were handed to each backend
// (counting those whose dial then failed), in the order of the backends.
func (r *roundRobin) connections() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.counts...)
}

// takeOut stops handing new connections to backend i; its open
// connections go on.
func (r *roundRobin) takeOut(i int) { r.mu.Lock(); r.out[i] = true; r.mu.Unlock() }

// putBack hands new connections to backend i again.
func (r *roundRobin) putBack(i int) { r.mu.Lock(); r.out[i] = false; r.mu.Unlock() }

// Close stops listening, closes every connection and waits until every
// copy has ended.
func (r *roundRobin) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	err := r.ln.Close()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// track registers c to be closed by Close, or reports false when Close
// has begun (then c is not registered).
func (r *roundRobin) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *roundRobin) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// pick returns the next backend in turn that is not taken out, or -1.
func (r *roundRobin) pick() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.backends {
		i := (r.next + k) % len(r.backends)
		if !r.out[i] {
			r.next = i + 1
			r.counts[i]++
			return i
		}
	}
	return -1
}

func (r *roundRobin) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go r.handle(c)
	}
}

func (r *roundRobin) handle(c net.Conn) {
	defer r.wg.Done()
	defer r.untrack(c)
	defer c.Close()
	i := r.pick()
	if i < 0 {
		return
	}
	b, err := net.DialTimeout("tcp", r.backends[i], 5*time.Second)
	if err != nil {
		return
	}
	if !r.track(b) {
		b.Close()
		return
	}
	defer r.untrack(b)
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	// One side has ended: end the other copy too.
	c.Close()
	b.Close()
	<-done
}

// The aggregated discovery media type, and its profile=nopeer form: the
// server's own resources alone, without its peers'.
const (
	discoveryV2       = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	discoveryV2NoPeer = discoveryV2 + ";profile=nopeer"
)

// haResponse is a response get read.
type haResponse struct {
	status int
	header http.Header
	body   []byte
	// What net/http takes out of header: Content-Length (-1 when
	// unknown), Transfer-Encoding, and whether it removed a gzip
	// Content-Encoding it had asked for.
	contentLength    int64
	transferEncoding []string
	uncompressed     bool
}

// get GETs url+path as the admin with the given Accept (none if empty).
func (p *haPlane) get(t testing.TB, hc *http.Client, url, path, accept string) haResponse {
	t.Helper()
	r, err := p.tryGet(hc, url, path, accept)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (p *haPlane) tryGet(hc *http.Client, url, path, accept string) (haResponse, error) {
	req, err := http.NewRequest(http.MethodGet, url+path, nil)
	if err != nil {
		return haResponse{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return haResponse{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return haResponse{}, err
	}
	return haResponse{status: resp.StatusCode, header: resp.Header, body: body,
		contentLength: resp.ContentLength, transferEncoding: resp.TransferEncoding, uncompressed: resp.Uncompressed}, nil
}

// headers is the response's status and the headers a discovery client
// cares about, for logs.
func (r haResponse) headers() string {
	return fmt.Sprintf("%d Content-Type=%q ETag=%q Vary=%q Cache-Control=%q (%d bytes; Content-Length %d, Transfer-Encoding %q, gzip taken off %v)",
		r.status, r.header.Get("Content-Type"), r.header.Get("ETag"), r.header.Values("Vary"), r.header.Values("Cache-Control"), len(r.body),
		r.contentLength, r.transferEncoding, r.uncompressed)
}

// discoveryResources returns group/version/resource of every resource in
// an aggregated discovery document (the core group as "core").
func discoveryResources(t testing.TB, body []byte) map[string]bool {
	t.Helper()
	var doc struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Versions []struct {
				Version   string `json:"version"`
				Resources []struct {
					Resource string `json:"resource"`
				} `json:"resources"`
			} `json:"versions"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("not an aggregated discovery document: %v: %s", err, tail(body, 300))
	}
	set := map[string]bool{}
	for _, g := range doc.Items {
		group := g.Metadata.Name
		if group == "" {
			group = "core"
		}
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				set[group+"/"+v.Version+"/"+r.Resource] = true
			}
		}
	}
	return set
}

// minus returns the sorted members of a that b lacks.
func minus(a, b map[string]bool) []string {
	var d []string
	for k := range a {
		if !b[k] {
			d = append(d, k)
		}
	}
	sort.Strings(d)
	return d
}

// haLease is an API server identity lease.
type haLease struct {
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		HolderIdentity string `json:"holderIdentity"`
	} `json:"spec"`
}

// identityLeases lists kube-system's API server identity leases by the
// hostname label.
func (p *haPlane) identityLeases(t testing.TB, hc *http.Client, url string) map[string]haLease {
	t.Helper()
	r := p.get(t, hc, url, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver", "application/json")
	if r.status != http.StatusOK {
		t.Fatalf("listing leases: %s: %s", r.headers(), tail(r.body, 300))
	}
	var list struct{ Items []haLease }
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]haLease{}
	for _, l := range list.Items {
		m[l.Metadata.Labels["kubernetes.io/hostname"]] = l
	}
	return m
}

// record writes the response's status, headers (less those that differ on
// every response) and first 2 KiB of body into testdata/ha/NAME, when
// KUBEATLAS_HA_RECORD is set. The request asked for gzip, as net/http and
// client-go do.
func record(t testing.TB, name string, r haResponse) {
	t.Helper()
	if os.Getenv("KUBEATLAS_HA_RECORD") == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d\n", r.status)
	keys := make([]string, 0, len(r.header))
	for k := range r.header {
		switch k {
		case "Date", "Audit-Id", "X-Kubernetes-Pf-Flowschema-Uid", "X-Kubernetes-Pf-Prioritylevel-Uid":
			continue // differ on every response
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintf(&b, "(net/http: %d bytes read; Content-Length %d, Transfer-Encoding %q, gzip taken off %v)\n",
		len(r.body), r.contentLength, r.transferEncoding, r.uncompressed)
	fmt.Fprintf(&b, "\n%s\n", r.body[:min(len(r.body), 2048)])
	path := filepath.Join("testdata", "ha", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHAPairServesWhatRealserverMdSays starts the mixed-version HA pair
// with and without the peer proxy and checks, with plain net/http, what
// /work/shared/realserver.md records: one identity lease per server, each
// server's own /version, and peer-aggregated discovery that is the same on
// both servers while each server's profile=nopeer view is its own. With
// KUBEATLAS_HA_RECORD=1 it rewrites testdata/ha with the discovery
// responses (headers and the first 2 KiB), for comparison with
// discoverytest's fake server.
func TestHAPairServesWhatRealserverMdSays(t *testing.T) {
	t.Run("peerProxy", func(t *testing.T) {
		p := startHA(t, haOptions{peerProxy: true})
		checkHAPair(t, p, true)
	})
	t.Run("noPeerProxy", func(t *testing.T) {
		p := startHA(t, haOptions{})
		checkHAPair(t, p, false)
		checkBalancer(t, p)
	})
	t.Run("peerProxyStorageVersionAPI", func(t *testing.T) {
		p := startHA(t, haOptions{peerProxy: true, storageVersionAPI: true})
		checkStorageVersions(t, p)
	})
}

func checkHAPair(t *testing.T, p *haPlane, peer bool) {
	hc := p.httpClient(true)
	defer hc.CloseIdleConnections()
	ready := time.Now()
	old, next := p.servers[0], p.servers[1]

	// One identity lease per server, with its peer address when the peer
	// proxy is on.
	var leases map[string]haLease
	eventually(t, "an identity lease per server", 60*time.Second, func() (bool, string) {
		leases = p.identityLeases(t, hc, old.url)
		for _, s := range p.servers {
			l, ok := leases[s.name]
			if !ok {
				return false, fmt.Sprintf("no lease labelled kubernetes.io/hostname=%s among %d", s.name, len(leases))
			}
			if peer && !slices.Contains(slices.Collect(maps.Values(l.Metadata.Annotations)), fmt.Sprintf("127.0.0.1:%d", s.port)) {
				return false, fmt.Sprintf("lease %s has no annotation 127.0.0.1:%d: %v", l.Metadata.Name, s.port, l.Metadata.Annotations)
			}
		}
		return len(leases) == len(p.servers), fmt.Sprintf("%d leases", len(leases))
	})
	for _, s := range p.servers {
		l := leases[s.name]
		t.Logf("%s (%s): lease %s holderIdentity=%s labels=%v annotations=%v", s.name, s.version, l.Metadata.Name, l.Spec.HolderIdentity, l.Metadata.Labels, l.Metadata.Annotations)
	}

	// Each server says its own version.
	for _, s := range p.servers {
		r := p.get(t, hc, s.url, "/version", "")
		var v struct {
			GitVersion string `json:"gitVersion"`
		}
		if err := json.Unmarshal(r.body, &v); err != nil || r.status != http.StatusOK {
			t.Fatalf("%s /version: %s: %v", s.name, r.headers(), err)
		}
		if v.GitVersion != s.version {
			t.Errorf("%s /version says %s, want %s", s.name, v.GitVersion, s.version)
		}
	}

	// Discovery: merged (default) and nopeer views of /apis on both.
	type views struct{ merged, nopeer [2]haResponse }
	read := func(path string) views {
		var v views
		for i, s := range p.servers {
			v.merged[i] = p.get(t, hc, s.url, path, discoveryV2)
			v.nopeer[i] = p.get(t, hc, s.url, path, discoveryV2NoPeer)
		}
		return v
	}
	etag := func(r haResponse) string { return r.header.Get("ETag") }
	var apis views
	if peer {
		eventually(t, "peer-aggregated /apis converging", 120*time.Second, func() (bool, string) {
			apis = read("/apis")
			return etag(apis.merged[0]) == etag(apis.merged[1]) && etag(apis.nopeer[0]) != etag(apis.merged[0]),
				fmt.Sprintf("merged %s %s, nopeer %s %s", etag(apis.merged[0]), etag(apis.merged[1]), etag(apis.nopeer[0]), etag(apis.nopeer[1]))
		})
		t.Logf("peer-aggregated /apis converged %v after both were ready", time.Since(ready).Round(10*time.Millisecond))
	} else {
		eventually(t, "each server's /apis its own", 60*time.Second, func() (bool, string) {
			apis = read("/apis")
			return etag(apis.merged[0]) == etag(apis.nopeer[0]) && etag(apis.merged[1]) == etag(apis.nopeer[1]) && etag(apis.merged[0]) != etag(apis.merged[1]),
				fmt.Sprintf("merged %s %s, nopeer %s %s", etag(apis.merged[0]), etag(apis.merged[1]), etag(apis.nopeer[0]), etag(apis.nopeer[1]))
		})
	}
	core := read("/api")
	view := map[string]views{"apis": apis, "api": core}
	mode := map[bool]string{true: "peer-proxy", false: "no-peer-proxy"}[peer]
	for _, path := range []string{"apis", "api"} {
		for i, s := range p.servers {
			for _, w := range []struct {
				name string
				r    haResponse
			}{{"merged", view[path].merged[i]}, {"nopeer", view[path].nopeer[i]}} {
				if w.r.status != http.StatusOK {
					t.Errorf("%s /%s %s: %s", s.version, path, w.name, w.r.headers())
				}
				t.Logf("%s /%s %s: %s", s.version, path, w.name, w.r.headers())
				record(t, fmt.Sprintf("%s/%s_%s_%s.txt", mode, s.version, path, w.name), w.r)
			}
		}
	}

	// Revalidating a view with an ETag is answered 304 by a server that
	// serves that view with that ETag, and 200 otherwise.
	for _, w := range []struct {
		name, accept string
		rs           [2]haResponse
	}{{"merged", discoveryV2, apis.merged}, {"nopeer", discoveryV2NoPeer, apis.nopeer}} {
		for i := range p.servers {
			for j, s := range p.servers {
				req, _ := http.NewRequest(http.MethodGet, s.url+"/apis", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Accept", w.accept)
				req.Header.Set("If-None-Match", etag(w.rs[i]))
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if i == j {
					record(t, fmt.Sprintf("%s/%s_apis_%s_if-none-match.txt", mode, s.version, w.name), haResponse{status: resp.StatusCode, header: resp.Header, body: body,
						contentLength: resp.ContentLength, transferEncoding: resp.TransferEncoding, uncompressed: resp.Uncompressed})
				}
				want := http.StatusOK
				if etag(w.rs[i]) == etag(w.rs[j]) {
					want = http.StatusNotModified
				}
				if resp.StatusCode != want {
					t.Errorf("/apis %s on %s with If-None-Match of %s's: %s, want %d", w.name, s.version, p.servers[i].version, resp.Status, want)
				}
			}
		}
	}

	res := func(r haResponse) map[string]bool { return discoveryResources(t, r.body) }
	onlyNext := minus(res(apis.nopeer[1]), res(apis.nopeer[0]))
	onlyOld := minus(res(apis.nopeer[0]), res(apis.nopeer[1]))
	t.Logf("/apis: %s serves %d resources %s does not: %v", next.version, len(onlyNext), old.version, onlyNext)
	t.Logf("/apis: %s serves %d resources %s does not: %v", old.version, len(onlyOld), next.version, onlyOld)
	coreOnlyNext := minus(res(core.nopeer[1]), res(core.nopeer[0]))
	coreOnlyOld := minus(res(core.nopeer[0]), res(core.nopeer[1]))
	t.Logf("/api: only %s: %v; only %s: %v", next.version, coreOnlyNext, old.version, coreOnlyOld)
	if len(onlyNext) == 0 {
		t.Errorf("%s serves no resource %s does not", next.version, old.version)
	}
	if peer {
		if lacking := minus(res(apis.nopeer[1]), res(apis.merged[0])); len(lacking) > 0 {
			t.Errorf("%s's merged /apis lacks %v its peer serves", old.version, lacking)
		}
		t.Logf("%s: merged /apis equals its nopeer view: %v, merged /api equals its nopeer view: %v",
			next.version, etag(apis.merged[1]) == etag(apis.nopeer[1]), etag(core.merged[1]) == etag(core.nopeer[1]))
		t.Logf("%s: merged /api equals its nopeer view: %v; resources merged-only %v",
			old.version, etag(core.merged[0]) == etag(core.nopeer[0]), minus(res(core.merged[0]), res(core.nopeer[0])))
	}
}

// checkBalancer sends requests on new connections through the balancer,
// takes a server out, stops it, and puts it back.
func checkBalancer(t *testing.T, p *haPlane) {
	hc := p.httpClient(false) // one connection per request
	versions := map[string]int{}
	for range 4 {
		r := p.get(t, hc, p.lb.url(), "/version", "")
		var v struct {
			GitVersion string `json:"gitVersion"`
		}
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatalf("/version through the balancer: %s: %v", r.headers(), err)
		}
		versions[v.GitVersion]++
	}
	if got := p.lb.connections(); !slices.Equal(got, []int{2, 2}) || versions[p.servers[0].version] != 2 || versions[p.servers[1].version] != 2 {
		t.Fatalf("4 connections through the balancer: per backend %v, versions %v", got, versions)
	}
	p.lb.takeOut(1)
	p.servers[1].stop()
	p.servers[1].stop() // harmless
	for range 2 {
		if r := p.get(t, hc, p.lb.url(), "/readyz", ""); r.status != http.StatusOK {
			t.Fatalf("/readyz through the balancer with one server out: %s", r.headers())
		}
	}
	if got := p.lb.connections(); !slices.Equal(got, []int{4, 2}) {
		t.Fatalf("with backend 1 out: per backend %v, want [4 2]", got)
	}
	p.lb.putBack(1)
	var failed int
	for range 2 {
		if _, err := p.tryGet(hc, p.lb.url(), "/readyz", ""); err != nil {
			failed++
		}
	}
	if got := p.lb.connections(); failed != 1 || !slices.Equal(got, []int{5, 3}) {
		t.Fatalf("backend 1 put back while stopped: %d of 2 requests failed (want 1), per backend %v (want [5 3])", failed, got)
	}
}

// checkStorageVersions logs what the StorageVersion API says once both
// servers have written their storage versions.
func checkStorageVersions(t *testing.T, p *haPlane) {
	hc := p.httpClient(true)
	defer hc.CloseIdleConnections()
	ready := time.Now()
	type storageVersion struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status struct {
			StorageVersions []struct {
				APIServerID       string   `json:"apiServerID"`
				EncodingVersion   string   `json:"encodingVersion"`
				DecodableVersions []string `json:"decodableVersions"`
				ServedVersions    []string `json:"servedVersions"`
			} `json:"storageVersions"`
			CommonEncodingVersion *string          `json:"commonEncodingVersion"`
			Conditions            []map[string]any `json:"conditions"`
		} `json:"status"`
	}
	var list struct{ Items []storageVersion }
	var r haResponse
	eventually(t, "storage versions from both servers", 120*time.Second, func() (bool, string) {
		r = p.get(t, hc, p.servers[0].url, "/apis/internal.apiserver.k8s.io/v1alpha1/storageversions", "application/json")
		if r.status != http.StatusOK {
			return false, r.headers()
		}
		list.Items = nil
		if err := json.Unmarshal(r.body, &list); err != nil {
			return false, err.Error()
		}
		ids := map[string]bool{}
		for _, sv := range list.Items {
			for _, s := range sv.Status.StorageVersions {
				ids[s.APIServerID] = true
			}
		}
		return len(ids) == len(p.servers), fmt.Sprintf("%d storage versions, from %d servers", len(list.Items), len(ids))
	})
	t.Logf("storageversions: %d, from both servers %v after both were ready; %s", len(list.Items), time.Since(ready).Round(10*time.Millisecond), r.headers())
	for _, sv := range list.Items[:min(len(list.Items), 5)] {
		b, _ := json.Marshal(sv)
		t.Logf("storageversion %s", b)
	}
	// The ones whose servers disagree, and those only one server stores.
	var noCommon, single []string
	for _, sv := range list.Items {
		if sv.Status.CommonEncodingVersion == nil {
			var encodings []string
			for _, s := range sv.Status.StorageVersions {
				encodings = append(encodings, s.APIServerID+"="+s.EncodingVersion)
			}
			noCommon = append(noCommon, fmt.Sprintf("%s %v", sv.Metadata.Name, encodings))
		}
		if len(sv.Status.StorageVersions) == 1 {
			single = append(single, sv.Metadata.Name+" (only "+sv.Status.StorageVersions[0].APIServerID+")")
		}
	}
	t.Logf("no common encoding version: %v", noCommon)
	t.Logf("stored by one server only: %v", single)
	for _, s := range p.servers {
		l := p.identityLeases(t, hc, s.url)[s.name]
		t.Logf("%s is %s (apiServerID %s)", s.version, s.name, l.Metadata.Name)
	}
}
