//go:build linux

package tests

// The aggregation harness: a real kube-apiserver with the front-proxy
// (requestheader) flags and aggregator routing, and a network namespace
// with an address of its own where an aggregated API server listens. The
// aggregator refuses loopback addresses in EndpointSlices, so an
// aggregated server on 127.0.0.1 cannot be registered; one in a namespace
// at the far end of a veth pair can.
//
// For a server binary (kubeatlas-apiserver): startAggregation, then
// netnsLink.start with aggregation.serverArgs, then aggregation.register
// (TestAggregationDelegatedServer does this). For a server in the test's
// own process: netnsLink.listen (the tiny server of aggregated_test.go).

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"golang.org/x/sys/unix"

	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// netnsPrefix starts the name of every network namespace the harness
// creates: kubeatlas-PID-INDEX, PID the test process's, so that a later
// run can tell a leftover of a killed run (its process is gone) from a
// namespace of a test running now in another process.
const netnsPrefix = "kubeatlas-"

// netnsIndex counts the namespaces this process created, so that parallel
// tests pick different subnets.
var netnsIndex atomic.Uint32

// netnsLink is a network namespace joined to the host by a veth pair: the
// host side has hostIP, the namespace side nsIP, in a /30 of 10.213.0.0/16.
type netnsLink struct {
	name   string // the namespace, under /run/netns
	hostIf string // the host side of the veth pair
	hostIP string
	nsIP   string
}

// aggregationMissing skips, or fails when testenv.RequireVar is set.
func aggregationMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(testenv.RequireVar) != "" {
		t.Fatalf(format+" ("+testenv.RequireVar+" is set, so this is a failure)", args...)
	}
	t.Skipf(format+" (set "+testenv.RequireVar+"=1 to fail instead)", args...)
}

// newNetns creates a network namespace with a veth pair to the host, both
// ends up, and deletes it at the test's end. It first deletes the
// namespaces of killed runs (whose process is gone); the veth pair goes
// with its namespace side.
func newNetns(t testing.TB) *netnsLink {
	t.Helper()
	if os.Geteuid() != 0 {
		aggregationMissing(t, "the aggregation harness creates a network namespace and a veth pair, which needs root")
	}
	ip := testenv.Tool(t, "ip")
	run := func(args ...string) error {
		out, err := exec.Command(ip, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	sweepNetns(t, ip)

	pid := os.Getpid()
	// Start from a subnet that depends on the pid, so that two test
	// processes do not walk the same subnets in the same order; a subnet
	// or interface name another test holds is skipped.
	const subnets = 1 << 14 // /30s in 10.213.0.0/16
	start := (uint32(pid)*64 + netnsIndex.Add(1)) % subnets
	var lastErr error
	for k := range uint32(64) {
		i := (start + k*97) % subnets
		n := &netnsLink{
			name:   fmt.Sprintf("%s%d-%d", netnsPrefix, pid, i),
			hostIf: fmt.Sprintf("ka%d", i),
			hostIP: fmt.Sprintf("10.213.%d.%d", i/64, (i%64)*4+1),
			nsIP:   fmt.Sprintf("10.213.%d.%d", i/64, (i%64)*4+2),
		}
		if err := run("netns", "add", n.name); err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() { n.delete(ip) })
		if taken, err := subnetTaken(n.hostIP); err != nil || taken {
			n.delete(ip)
			lastErr = fmt.Errorf("subnet of %s is in use here (%v)", n.hostIP, err)
			continue
		}
		// The peer is created inside the namespace, so that the pair
		// never exists without it: deleting the namespace deletes both.
		if err := run("link", "add", n.hostIf, "type", "veth", "peer", "name", "eth0", "netns", n.name); err != nil {
			n.delete(ip)
			lastErr = err
			continue
		}
		for _, args := range [][]string{
			{"addr", "add", n.hostIP + "/30", "dev", n.hostIf},
			{"link", "set", n.hostIf, "up"},
			{"netns", "exec", n.name, "ip", "addr", "add", n.nsIP + "/30", "dev", "eth0"},
			{"netns", "exec", n.name, "ip", "link", "set", "eth0", "up"},
			{"netns", "exec", n.name, "ip", "link", "set", "lo", "up"},
		} {
			if err := run(args...); err != nil {
				aggregationMissing(t, "cannot set up the network namespace %s: %v", n.name, err)
			}
		}
		return n
	}
	aggregationMissing(t, "cannot create a network namespace with a veth pair here: %v", lastErr)
	return nil
}

// subnetTaken reports whether an interface of the host already has an
// address in hostIP's /30 (an unrelated network using 10.213.0.0/16).
func subnetTaken(hostIP string) (bool, error) {
	_, subnet, err := net.ParseCIDR(hostIP + "/30")
	if err != nil {
		return false, err
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && subnet.Contains(ipn.IP) {
			return true, nil
		}
	}
	return false, nil
}

// sweepNetns deletes the namespaces named kubeatlas-PID-INDEX whose PID
// is no longer a running process: leftovers of a run that was killed
// before its cleanups ran. Those of live processes are left alone.
func sweepNetns(t testing.TB, ip string) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return // none yet
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), netnsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // alive (or not ours to judge)
		}
		if out, err := exec.Command(ip, "netns", "del", e.Name()).CombinedOutput(); err != nil {
			t.Logf("deleting the leftover network namespace %s: %v: %s", e.Name(), err, out)
		} else {
			t.Logf("deleted the leftover network namespace %s", e.Name())
		}
	}
}

// delete removes the namespace and, with it, the veth pair. The kernel
// tears the pair down asynchronously; the host side is deleted here too
// so that its name and subnet are free at once. Deleting twice is
// harmless.
func (n *netnsLink) delete(ip string) {
	_ = exec.Command(ip, "link", "del", n.hostIf).Run()
	_ = exec.Command(ip, "netns", "del", n.name).Run()
}

// listen opens a TCP listener on nsIP:port inside the namespace (port 0
// picks one). Why not a child process: a socket belongs to the network
// namespace of the thread that created it, so one goroutine locked to an
// OS thread that joined the namespace can create the listener, and the
// server then runs in this process, where the test sees what it saw
// without any channel between processes.
//
// The thread goes back to the host's namespace before it is unlocked. It
// must not simply end (as Go ends a thread whose goroutine returns
// locked): a child started from that thread with Pdeathsig, such as the
// kube-apiserver, would be killed with it. Only if going back fails does
// the thread stay locked and end, so no goroutine ever runs in the
// namespace by accident.
func (n *netnsLink) listen(port int) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		host, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer host.Close()
		ns, err := os.Open(filepath.Join("/run/netns", n.name))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still in the host's namespace
			ch <- result{err: fmt.Errorf("setns %s: %w", n.name, err)}
			return
		}
		l, err := net.Listen("tcp", net.JoinHostPort(n.nsIP, strconv.Itoa(port)))
		if unix.Setns(int(host.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// command returns a command that runs name inside the namespace (ip netns
// exec execs it, so its pid is the program's), killed should the test
// binary die without its cleanups.
func (n *netnsLink) command(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testenv.Tool(t, "ip"), append([]string{"netns", "exec", n.name, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// start runs name with args inside the namespace, its output in
// logPath, and stops it at the test's end. Stop it earlier (and start it
// again) to test what clients see while an aggregated server is away.
func (n *netnsLink) start(t testing.TB, logPath, name string, args ...string) *haProc {
	t.Helper()
	cmd := n.command(t, name, args...)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &haProc{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.stop)
	return p
}

// aggregation is a kube-apiserver set up to aggregate, and a network
// namespace for the aggregated server.
type aggregation struct {
	*cluster // the test's view, on loopback
	netns    *netnsLink
	dir      string
	port     int    // the kube-apiserver's secure port, on every address
	caPEM    []byte // the CA of the kube-apiserver's serving certificate
	// frontProxyCAFile is the requestheader client CA: an aggregated
	// server's --requestheader-client-ca-file (kubeatlas-apiserver also
	// reads it from kube-system/extension-apiserver-authentication), and
	// what the tiny server checks the aggregator's client certificate with.
	frontProxyCAFile string
	frontProxyCA     *testCA
	// servingCA signs aggregated servers' serving certificates; its PEM
	// goes into APIServices' caBundle.
	servingCA *testCA
	// auditLog is the kube-apiserver's audit log (JSON lines, level
	// Metadata, every request once complete or, for a watch, once
	// started too): who asked it what, for tests that count what an
	// aggregated server or a client costs it (see auditEvents).
	auditLog string
}

// frontProxyClientName is the common name of the aggregator's client
// certificate, and the only one --requestheader-allowed-names allows.
const frontProxyClientName = "front-proxy-client"

// startAggregation creates a network namespace and starts etcd and a
// kube-apiserver (KUBEATLAS_KUBE_APISERVER) that aggregates: requestheader
// flags, a front-proxy client certificate, --enable-aggregator-routing (it
// dials the EndpointSlice address, not a ClusterIP nobody routes). The
// server listens on every address, since the test reaches it on loopback
// and the namespace on the host side of the veth pair; its serving
// certificate names both.
func startAggregation(t testing.TB) *aggregation {
	t.Helper()
	bin := os.Getenv("KUBEATLAS_KUBE_APISERVER")
	if bin == "" {
		aggregationMissing(t, "KUBEATLAS_KUBE_APISERVER is not set: build the real kube-apiserver in internal/integration/kube-apiserver (.ci/run does)")
	}
	etcdBin := testenv.Tool(t, "etcd")
	n := newNetns(t)
	dir := t.TempDir()
	etcdURL := startEtcd(t, etcdBin, dir)
	writeAuthFiles(t, dir)

	a := &aggregation{netns: n, dir: dir, port: freePort(t)}
	ca := newTestCA(t, "kubeatlas-aggregation-ca")
	a.caPEM = ca.pem
	crt, key := ca.issueServing(t, dir, "kube-apiserver", []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(n.hostIP)}, "localhost")
	a.frontProxyCA = newTestCA(t, "kubeatlas-front-proxy-ca")
	a.frontProxyCAFile = filepath.Join(dir, "front-proxy-ca.crt")
	writePEM(t, a.frontProxyCAFile, "CERTIFICATE", a.frontProxyCA.cert.Raw)
	proxyCrt, proxyKey := a.frontProxyCA.issue(t, dir, frontProxyClientName, frontProxyClientName, false)
	a.servingCA = newTestCA(t, "kubeatlas-aggregated-serving-ca")
	a.auditLog = filepath.Join(dir, "audit.log")
	auditPolicy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	args := apiserverFlags(etcdURL, dir, a.port, filepath.Join(dir, "certs"), crt, key)
	for i, f := range args {
		if f == "--bind-address=127.0.0.1" {
			// One bind address serves both the test (loopback) and
			// the namespace (the veth's host side).
			args[i] = "--bind-address=0.0.0.0"
		}
	}
	args = append(args,
		"--requestheader-client-ca-file="+a.frontProxyCAFile,
		"--requestheader-allowed-names="+frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+proxyCrt, "--proxy-client-key-file="+proxyKey,
		"--enable-aggregator-routing=true",
		"--audit-policy-file="+auditPolicy, "--audit-log-path="+a.auditLog,
	)
	cmd := exec.Command(bin, args...)
	log := logFile(t, dir, "kube-apiserver.log")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	url := fmt.Sprintf("https://127.0.0.1:%d", a.port)
	a.cluster = &cluster{url: url, config: (&haPlane{caPEM: a.caPEM}).configFor(url)}
	if err := waitReady(context.Background(), url, 90*time.Second); err != nil {
		logs, _ := os.ReadFile(filepath.Join(dir, "kube-apiserver.log"))
		t.Fatalf("kube-apiserver not ready: %v\n%s", err, tail(logs, 3000))
	}
	return a
}

// issueServing writes NAME.crt and NAME.key into dir: a serving
// certificate for the given addresses and DNS names.
func (ca *testCA) issueServing(t testing.TB, dir, name string, ips []net.IP, dnsNames ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips, DNSNames: dnsNames,
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

// aggregatedService names where an aggregated server is registered: the
// Service (without selector) and its EndpointSlice, in namespace.
type aggregatedService struct {
	namespace, name string
}

// serviceFor returns the Service an aggregated server is registered
// under: kube-system/NAME.
func serviceFor(name string) aggregatedService {
	return aggregatedService{namespace: "kube-system", name: name}
}

// host is the name the aggregator verifies the aggregated server's
// serving certificate for (it dials the endpoint address but checks the
// Service's DNS name).
func (s aggregatedService) host() string { return s.name + "." + s.namespace + ".svc" }

// servingCert writes a serving certificate for an aggregated server
// registered as svc, listening at the namespace's address, signed by the
// serving CA that register puts into the APIService's caBundle; it
// returns the files for --tls-cert-file and --tls-private-key-file.
func (a *aggregation) servingCert(t testing.TB, svc aggregatedService) (certFile, keyFile string) {
	t.Helper()
	return a.servingCA.issueServing(t, a.dir, "aggregated-"+svc.name, []net.IP{net.ParseIP(a.netns.nsIP)}, svc.host())
}

// register makes the aggregator route group/version to the server
// listening at the namespace's address and port: a Service without
// selector, an EndpointSlice naming nsIP:port, and an APIService with the
// serving CA in its caBundle. It returns once the APIService is
// Available (or fails the test with its condition).
func (a *aggregation) register(t testing.TB, svc aggregatedService, gv schema.GroupVersion, port int) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(a.config)
	if err != nil {
		t.Fatal(err)
	}
	const portName = "https"
	_, err = cs.CoreV1().Services(svc.namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc.name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: portName, Port: 443, TargetPort: intstr.FromInt32(int32(port)), Protocol: corev1.ProtocolTCP,
		}}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the Service %s/%s: %v", svc.namespace, svc.name, err)
	}
	ready := true
	_, err = cs.DiscoveryV1().EndpointSlices(svc.namespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc.name, Labels: map[string]string{discoveryv1.LabelServiceName: svc.name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{a.netns.nsIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo(portName), Port: ptrTo(int32(port)), Protocol: ptrTo(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the EndpointSlice %s/%s: %v", svc.namespace, svc.name, err)
	}

	dyn, err := dynamic.NewForConfig(a.config)
	if err != nil {
		t.Fatal(err)
	}
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	name := gv.Version + "." + gv.Group
	_, err = apiServices.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": gv.Group, "version": gv.Version,
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service":  map[string]any{"namespace": svc.namespace, "name": svc.name, "port": int64(443)},
			"caBundle": base64.StdEncoding.EncodeToString(a.servingCA.pem),
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the APIService %s: %v", name, err)
	}
	a.waitAPIService(t, name, "True", 60*time.Second)
}

// waitAPIService waits until the APIService's Available condition has
// the given status ("True" or "False").
func (a *aggregation) waitAPIService(t testing.TB, name, status string, within time.Duration) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(a.config)
	if err != nil {
		t.Fatal(err)
	}
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	start := time.Now()
	eventually(t, "APIService "+name+" Available="+status, within, func() (bool, string) {
		u, err := apiServices.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["type"] == "Available" {
				return c["status"] == status, fmt.Sprintf("Available=%v %v: %v", c["status"], c["reason"], c["message"])
			}
		}
		return false, "no Available condition yet"
	})
	t.Logf("APIService %s Available=%s after %v", name, status, time.Since(start).Round(10*time.Millisecond))
}

// kubeconfigInNetns writes into dir a kubeconfig for the admin that
// reaches the kube-apiserver from inside the namespace (server
// https://HOSTIP:PORT), for an aggregated server's --kubeconfig,
// --authentication-kubeconfig and --authorization-kubeconfig, and
// returns its path. The test's own view is cluster.writeKubeconfig (on
// loopback).
func (a *aggregation) kubeconfigInNetns(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig-netns")
	if err := os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://%s:%d", certificate-authority-data: %s}
users:
- name: admin
  user: {token: %q}
contexts:
- name: c
  context: {cluster: c, user: admin}
current-context: c
`, a.netns.hostIP, a.port, base64.StdEncoding.EncodeToString(a.caPEM), token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serverArgs are the flags of k8s.io/apiserver's RecommendedOptions (less
// etcd) that start an aggregated server, such as kubeatlas-apiserver, in
// the namespace, to be registered as svc: serving at nsIP:port with the
// certificate servingCert issues for svc, the kube-apiserver reached
// through kubeconfigInNetns for its own client and for delegated
// authentication (TokenReview, kube-system/extension-apiserver-
// authentication) and authorization (SubjectAccessReview), and the
// front-proxy CA and headers the aggregator uses.
func (a *aggregation) serverArgs(t testing.TB, svc aggregatedService, port int) []string {
	t.Helper()
	crt, key := a.servingCert(t, svc)
	kubeconfig := a.kubeconfigInNetns(t, t.TempDir())
	return []string{
		"--secure-port=" + strconv.Itoa(port), "--bind-address=" + a.netns.nsIP,
		"--tls-cert-file=" + crt, "--tls-private-key-file=" + key,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--requestheader-client-ca-file=" + a.frontProxyCAFile,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestNetnsHarness: a namespace left by a killed run (its process gone)
// is deleted before a new one is created, a live one is kept, parallel
// namespaces get different subnets, and the pair carries traffic both
// ways between the host and a listener opened inside.
func TestNetnsHarness(t *testing.T) {
	if os.Geteuid() != 0 {
		aggregationMissing(t, "the aggregation harness needs root")
	}
	ip := testenv.Tool(t, "ip")
	// A pid that is surely gone: a process that has exited and been
	// reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	leftover := fmt.Sprintf("%s%d-0", netnsPrefix, gone.Process.Pid)
	if out, err := exec.Command(ip, "netns", "add", leftover).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", leftover, err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "del", leftover).Run() })

	first := newNetns(t)
	if _, err := os.Stat(filepath.Join("/run/netns", leftover)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the leftover %s is still there (%v)", leftover, err)
	}
	second := newNetns(t)
	if _, err := os.Stat(filepath.Join("/run/netns", first.name)); err != nil {
		t.Errorf("a live namespace was swept: %v", err)
	}
	if first.hostIP == second.hostIP || first.hostIf == second.hostIf {
		t.Errorf("two namespaces share %s/%s", first.hostIP, first.hostIf)
	}

	l, err := second.listen(0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = fmt.Fprintf(c, "from %s\n", c.LocalAddr())
	}()
	c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("dialing the listener in the namespace: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if want := "from " + l.Addr().String() + "\n"; err != nil || line != want {
		t.Errorf("read %q, %v; want %q", line, err, want)
	}
	// The listener is not on the host: nothing listens at the host side.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(second.hostIP, strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), time.Second); err == nil {
		c.Close()
		t.Errorf("the namespace's listener is reachable on the host address too")
	}
}
