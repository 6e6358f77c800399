package consistency_test

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
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// The cluster's side of a trust test: a CA that signs the API servers'
// certificates, and a kubelet's (a certificate for its node's IP), as a
// real cluster's CA does.

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue is a certificate the CA signed: for serving at ips and names, or
// a client certificate (for cn) when both are empty.
func (ca *testCA) issue(t *testing.T, cn string, ips []string, names ...string) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: names,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if len(ips) == 0 && len(names) == 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, pair
}

// serve starts h on host (an IP; port chosen by the system), over TLS
// with cert when it is not nil, asking clients for a certificate (and
// counting those that send one).
func serve(t *testing.T, host string, h http.Handler, cert *tls.Certificate, clientCerts *atomic.Int32) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", host, err)
	}
	s := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	if cert == nil {
		s.Start()
	} else {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}, ClientAuth: tls.RequestClientCert,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if len(raw) > 0 && clientCerts != nil {
					clientCerts.Add(1)
				}
				return nil
			}}
		s.StartTLS()
	}
	t.Cleanup(s.Close)
	return s
}

// lease is an identity lease as the check reads it.
type lease struct{ name, hostname, address string }

// withLeases serves the cluster srv, but with the identity leases given
// (a tenant with the edit role in kube-system can write any).
func withLeases(srv http.Handler, leases func() []lease) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", srv)
	mux.HandleFunc("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", func(w http.ResponseWriter, r *http.Request) {
		type item struct {
			Metadata map[string]any `json:"metadata"`
			Spec     map[string]any `json:"spec"`
		}
		var items []item
		for _, l := range leases() {
			meta := map[string]any{"name": l.name, "namespace": "kube-system",
				"labels": map[string]string{"apiserver.kubernetes.io/identity": "kube-apiserver", "kubernetes.io/hostname": l.hostname}}
			if l.address != "" {
				meta["annotations"] = map[string]string{"kubernetes.io/peer-advertise-address": l.address}
			}
			items = append(items, item{Metadata: meta, Spec: map[string]any{
				"holderIdentity": l.name + "_1", "leaseDurationSeconds": 3600,
				"renewTime": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "LeaseList", "apiVersion": "coordination.k8s.io/v1", "metadata": map[string]any{}, "items": items})
	})
	return mux
}

// backendLeases are the leases of srv's backends, each at the address
// given (none when addresses is shorter).
func backendLeases(srv *discoverytest.Server, addresses ...string) []lease {
	var out []lease
	for i, b := range srv.Backends() {
		l := lease{name: b.LeaseName(), hostname: b.ID()}
		if i < len(addresses) {
			l.address = addresses[i]
		}
		out = append(out, l)
	}
	return out
}

// thief is a host a tenant's lease names: it counts what reaches it.
type thief struct {
	requests    atomic.Int32 // HTTP requests, whatever they carry
	clientCerts atomic.Int32 // TLS handshakes in which the client sent a certificate
	mu          sync.Mutex
	auth        []string // Authorization headers seen
}

func (th *thief) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	th.requests.Add(1)
	th.mu.Lock()
	if a := r.Header.Get("Authorization"); a != "" {
		th.auth = append(th.auth, a)
	}
	th.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"gitVersion":"v1.36.3"}`)
}

// TestCredentialsGoOnlyWhereTheKubeconfigVouches: a tenant's identity
// lease names a host holding a certificate the cluster's CA signed for the
// host's own IP (a kubelet's serving certificate). Whatever the
// kubeconfig (its server an IP, as in-cluster and kubeadm's admin.conf; a
// host name; plain http; TLS verification off; a custom Dial; a token
// file; an exec plugin), the host gets no request and no client
// certificate: a server's certificate is verified for the kubeconfig's
// name, never for the address the cluster named, and where nothing can be
// verified the check says why it asked nobody directly. The real servers
// are still reached, through the URL.
func TestCredentialsGoOnlyWhereTheKubeconfigVouches(t *testing.T) {
	ca := newTestCA(t)
	clientCert, clientKey, _ := ca.issue(t, "admin", nil)
	_, _, frontCert := ca.issue(t, "kube-apiserver", []string{"127.0.0.1"}, "localhost", "kubernetes.default.svc")
	// The tenant's host: another loopback IP, as a node's.
	_, _, kubeletCert := ca.issue(t, "system:node:worker", []string{"127.0.0.2"}, "worker")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("file-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh, shErr := exec.LookPath("sh")

	type mode struct {
		name     string
		tls      bool
		host     string // the kubeconfig's server's host
		config   func(cfg *rest.Config)
		verified bool // servers are verified, so asked directly
	}
	creds := func(cfg *rest.Config) {
		cfg.BearerToken = "secret"
		cfg.CertData, cfg.KeyData = clientCert, clientKey
	}
	modes := []mode{
		{name: "IP kubeconfig", tls: true, host: "127.0.0.1", config: creds, verified: true},
		{name: "host name kubeconfig", tls: true, host: "localhost", config: creds, verified: true},
		{name: "plain http", host: "127.0.0.1", config: func(cfg *rest.Config) { cfg.BearerToken = "secret" }},
		{name: "insecure-skip-tls-verify", tls: true, host: "127.0.0.1", config: func(cfg *rest.Config) {
			creds(cfg)
			cfg.Insecure, cfg.CAData = true, nil
		}},
		{name: "custom Dial", tls: true, host: "127.0.0.1", verified: true, config: func(cfg *rest.Config) {
			creds(cfg)
			cfg.Dial = (&net.Dialer{}).DialContext
		}},
		{name: "token file", tls: true, host: "127.0.0.1", verified: true, config: func(cfg *rest.Config) { cfg.BearerTokenFile = tokenFile }},
	}
	if shErr == nil {
		modes = append(modes, mode{name: "exec plugin", tls: true, host: "127.0.0.1", verified: true, config: func(cfg *rest.Config) {
			cfg.ExecProvider = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: sh, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
				Args: []string{"-c", `echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-secret"}}'`}}
		}})
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			th := &thief{}
			var hostileCert *tls.Certificate
			if m.tls {
				hostileCert = &kubeletCert
			}
			hostile := serve(t, "127.0.0.2", th, hostileCert, &th.clientCerts)
			srv, err := discoverytest.NewServer(discoverytest.WithBackends(2, discoverytest.Sticky))
			if err != nil {
				t.Fatal(err)
			}
			leases := append(backendLeases(srv), lease{name: "apiserver-tenant", hostname: "tenant", address: hostile.Listener.Addr().String()})
			var frontTLS *tls.Certificate
			if m.tls {
				frontTLS = &frontCert
			}
			front := serve(t, "127.0.0.1", withLeases(srv, func() []lease { return leases }), frontTLS, nil)
			_, port, _ := net.SplitHostPort(front.Listener.Addr().String())
			scheme := map[bool]string{true: "https", false: "http"}[m.tls]
			cfg := &rest.Config{Host: scheme + "://" + net.JoinHostPort(m.host, port)}
			if m.tls {
				cfg.CAData = ca.pem
			}
			m.config(cfg)
			c, err := discovery.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			r, err := consistency.Check(context.Background(), c, consistency.WithSamples(8))
			if err != nil {
				t.Fatal(err)
			}
			if n, certs := th.requests.Load(), th.clientCerts.Load(); n != 0 || certs != 0 {
				t.Errorf("the host a tenant's lease names got %d requests (Authorization %q) and %d client certificates, want none", n, th.auth, certs)
			}
			var tenant *consistency.Server
			for i := range r.Servers {
				if r.Servers[i].Identity == "apiserver-tenant" {
					tenant = &r.Servers[i]
				}
			}
			if tenant == nil || tenant.View != nil || tenant.Address != "" {
				t.Errorf("the tenant's lease: %+v, want it not asked", tenant)
			}
			if m.verified {
				var unknown x509.UnknownAuthorityError
				var invalid x509.HostnameError
				if r.NotAskedDirectly != nil || tenant == nil || (!errors.As(tenant.Err, &invalid) && !errors.As(tenant.Err, &unknown)) {
					t.Errorf("not asked directly: %v; the tenant's server: %v, want its certificate refused for %s", r.NotAskedDirectly, tenant.Err, m.host)
				}
			} else if !errors.Is(r.NotAskedDirectly, consistency.ErrNotAskedDirectly) {
				t.Errorf("not asked directly: %v, want ErrNotAskedDirectly: nothing can be verified there", r.NotAskedDirectly)
			}
			if r.Certainty == consistency.EveryServerAsked || r.Samples == 0 {
				t.Errorf("%v after %d samples: the real servers have no address, they can only be sampled", r.Certainty, r.Samples)
			}
		})
	}
}

// TestServersVerifiedForTheKubeconfigAreAsked: servers whose certificates
// are valid for the kubeconfig's name (an IP, or a host name; kubeadm
// puts the control-plane endpoint and kubernetes.default.svc in every API
// server's certificate) are asked directly, with the client's
// credentials, all of them.
func TestServersVerifiedForTheKubeconfigAreAsked(t *testing.T) {
	ca := newTestCA(t)
	_, _, serving := ca.issue(t, "kube-apiserver", []string{"127.0.0.1"}, "localhost", "kubernetes.default.svc")
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			srv, err := discoverytest.NewServer(discoverytest.WithBackends(2, discoverytest.Sticky),
				discoverytest.WithBackendVersions("v1.36.3", "v1.37.1"), discoverytest.WithBearerToken("secret"))
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			for _, b := range srv.Backends() {
				addrs = append(addrs, serve(t, "127.0.0.1", b, &serving, nil).Listener.Addr().String())
			}
			front := serve(t, "127.0.0.1", withLeases(srv, func() []lease { return backendLeases(srv, addrs...) }), &serving, nil)
			_, port, _ := net.SplitHostPort(front.Listener.Addr().String())
			c, err := discovery.New(&rest.Config{Host: "https://" + net.JoinHostPort(host, port), BearerToken: "secret", TLSClientConfig: rest.TLSClientConfig{CAData: ca.pem}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := consistency.Check(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Certainty != consistency.EveryServerAsked || r.Samples != 0 || r.Servers[0].Version != "v1.36.3" || r.Servers[1].Version != "v1.37.1" ||
				r.Servers[0].Address != addrs[0] || r.Servers[1].Address != addrs[1] {
				t.Errorf("%v, %d samples, servers %+v: want both asked at %v", r.Certainty, r.Samples, r.Servers, addrs)
			}
		})
	}
}

// deadHost accepts connections and never answers.
func deadHost(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestDeadLeasesDoNotHoldTheCheck: six leases name hosts that accept
// connections and never answer. The servers are asked all at once under
// one deadline, so the check returns well within 15 s; the two real
// servers are asked directly, every sample through the URL reaches one of
// them, and the check says every server that answers was seen, naming the
// six that did not answer: a tenant's leases cannot make it "not every
// server seen" for ever. The six were not seen, so the verdict is Unknown,
// never Consistent.
func TestDeadLeasesDoNotHoldTheCheck(t *testing.T) {
	t.Parallel()
	srv, _ := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky))
	var addrs []string
	for _, b := range srv.Backends() {
		addrs = append(addrs, strings.TrimPrefix(b.URL(), "http://"))
	}
	leases := backendLeases(srv, addrs...)
	for i := range 6 {
		leases = append(leases, lease{name: fmt.Sprintf("apiserver-dead%d", i), hostname: fmt.Sprintf("dead-%d", i), address: deadHost(t)})
	}
	front := serve(t, "127.0.0.1", withLeases(srv, func() []lease { return leases }), nil, nil)
	c, err := discovery.New(&rest.Config{Host: front.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := consistency.Check(ctx, c)
	if err != nil {
		t.Fatalf("six dead leases: %v (the test's deadline is 15 s)", err)
	}
	asked, dead := 0, 0
	for _, s := range r.Servers {
		switch {
		case s.View != nil && s.Address != "":
			asked++
		case s.View == nil && s.Err != nil && strings.HasPrefix(s.Hostname, "dead-"):
			dead++
		}
	}
	if asked != 2 || dead != 6 || r.Verdict() != consistency.Unknown || r.Certainty != consistency.EveryAnsweringServerSeen {
		t.Errorf("%d asked, %d dead, verdict %v, %v: want the two asked, six that did not answer, every answering server seen, and no verdict", asked, dead, r.Verdict(), r.Certainty)
	}
}

// TestAddressNamedTwice: two leases name one host (a tenant's copies a
// real server's address). One server cannot count as two: neither lease's
// server is asked there, both say why, and the check does not say every
// server was asked directly.
func TestAddressNamedTwice(t *testing.T) {
	srv, _ := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky))
	var addrs []string
	for _, b := range srv.Backends() {
		addrs = append(addrs, strings.TrimPrefix(b.URL(), "http://"))
	}
	leases := append(backendLeases(srv, addrs...), lease{name: "apiserver-tenant", hostname: "tenant", address: addrs[0]})
	front := serve(t, "127.0.0.1", withLeases(srv, func() []lease { return leases }), nil, nil)
	c, err := discovery.New(&rest.Config{Host: front.URL})
	if err != nil {
		t.Fatal(err)
	}
	r, err := consistency.Check(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Certainty == consistency.EveryServerAsked {
		t.Errorf("two leases naming %s counted as two servers asked directly", addrs[0])
	}
	shared := 0
	for _, s := range r.Servers {
		if errors.Is(s.Err, consistency.ErrAddressShared) {
			shared++
			if s.Address != "" || s.Identity == "" {
				t.Errorf("%+v: want it not asked at the address another lease names", s)
			}
		}
	}
	if shared != 2 {
		t.Errorf("%d servers say their address is named twice, want 2: %+v", shared, r.Servers)
	}
}

// withEndpointSlice serves h, with the kubernetes EndpointSlices listing
// addrs (one slice per address: the test's servers share an IP and differ
// by port), or a 403 when addrs is nil (a user who may not read them).
func withEndpointSlice(h http.Handler, addrs []string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", func(w http.ResponseWriter, r *http.Request) {
		if addrs == nil {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
			return
		}
		var items []map[string]any
		for _, a := range addrs {
			host, port, _ := net.SplitHostPort(a)
			p, _ := strconv.Atoi(port)
			items = append(items, map[string]any{
				"metadata":    map[string]any{"name": "kubernetes", "labels": map[string]string{"kubernetes.io/service-name": "kubernetes"}},
				"addressType": "IPv4", "endpoints": []map[string]any{{"addresses": []string{host}}},
				"ports": []map[string]any{{"name": "https", "port": p, "protocol": "TCP"}}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1", "items": items})
	})
	return mux
}

// credentials counts the requests that reached h with a credential.
type credentials struct {
	h      http.Handler
	tokens atomic.Int32
}

func (c *credentials) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		c.tokens.Add(1)
	}
	c.h.ServeHTTP(w, r)
}

// TestCredentialsGoOnlyToListedAPIServers: a tenant's identity lease
// names another port of the API server's own host (127.0.0.1, the
// kubeconfig's server), where a service holds a certificate the cluster's
// CA signed for that IP (a kubelet's serving certificate for the node IP):
// it passes the TLS check for the kubeconfig's name, so on c7f0643 it got
// the bearer token (4 requests) and the client certificate (5
// handshakes). Credentials now go only to the addresses the kubernetes
// EndpointSlice lists, which only API servers write: that host gets no
// token and no client certificate (it may be asked without any, and its
// answer is reported as an unvouched server's), while the two listed
// servers are asked with the client's credentials. A user who may not
// read the EndpointSlice sends credentials to no address at all.
func TestCredentialsGoOnlyToListedAPIServers(t *testing.T) {
	ca := newTestCA(t)
	clientCert, clientKey, _ := ca.issue(t, "admin", nil)
	_, _, serving := ca.issue(t, "kube-apiserver", []string{"127.0.0.1"}, "localhost", "kubernetes.default.svc")
	_, _, kubeletCert := ca.issue(t, "system:node:controlplane", []string{"127.0.0.1"}, "controlplane")
	for _, listed := range []bool{true, false} {
		t.Run(fmt.Sprintf("EndpointSlice readable %v", listed), func(t *testing.T) {
			th := &thief{}
			hostile := serve(t, "127.0.0.1", th, &kubeletCert, &th.clientCerts)
			srv, err := discoverytest.NewServer(discoverytest.WithBackends(2, discoverytest.Sticky))
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			var backends []*credentials
			for _, b := range srv.Backends() {
				c := &credentials{h: b}
				backends = append(backends, c)
				addrs = append(addrs, serve(t, "127.0.0.1", c, &serving, nil).Listener.Addr().String())
			}
			leases := append(backendLeases(srv, addrs...), lease{name: "apiserver-tenant", hostname: "tenant", address: hostile.Listener.Addr().String()})
			slice := addrs
			if !listed {
				slice = nil
			}
			front := serve(t, "127.0.0.1", withEndpointSlice(withLeases(srv, func() []lease { return leases }), slice), &serving, nil)
			cfg := &rest.Config{Host: "https://" + front.Listener.Addr().String(), BearerToken: "secret",
				TLSClientConfig: rest.TLSClientConfig{CAData: ca.pem, CertData: clientCert, KeyData: clientKey}}
			c, err := discovery.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			r, err := consistency.Check(context.Background(), c, consistency.WithSamples(8))
			if err != nil {
				t.Fatal(err)
			}
			if certs := th.clientCerts.Load(); len(th.auth) != 0 || certs != 0 {
				t.Errorf("the host the tenant's lease names got Authorization %q and %d client certificates, want none (%d requests)", th.auth, certs, th.requests.Load())
			}
			for i, s := range r.Servers {
				switch {
				case s.Identity == "apiserver-tenant":
					if s.Vouched {
						t.Errorf("the tenant's server counted as vouched: %+v", s)
					}
				case listed:
					if !s.Vouched || s.Address != addrs[i] || s.View == nil || backends[i].tokens.Load() == 0 {
						t.Errorf("listed server %d: %+v, %d requests with a token: want it asked with the client's credentials", i, s, backends[i].tokens.Load())
					}
				default:
					if s.Vouched || backends[i].tokens.Load() != 0 {
						t.Errorf("server %d with no EndpointSlice readable: vouched %v, %d requests with a token, want none", i, s.Vouched, backends[i].tokens.Load())
					}
				}
			}
		})
	}
}
