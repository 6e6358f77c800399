package apiserver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"

	"github.com/kubeatlas/kubeatlas/apiserver"
	"github.com/kubeatlas/kubeatlas/apiserver/registry"
)

// served is a kubeatlas-apiserver in local mode, in process, fed by a
// fake upstream cluster.
type served struct {
	URL        string
	Config     *rest.Config // reaches the served API
	Kubeconfig string
	CertDir    string
	Stores     apiserver.Stores
	stop       func()
}

type serveOptions struct {
	tune     func(*registry.Config)
	addr     string // host:port to listen on; "" for any port
	certDir  string // where the serving certificate is (reused) or made; "" for a new one
	checkInt time.Duration
}

// serve starts the served API over upstream (a fake's URL); it stops at the
// end of the test, or when stop is called.
func serve(t testing.TB, upstream string, so serveOptions) *served {
	t.Helper()
	addr := so.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	// A restarted server takes its predecessor's port, which the kernel may
	// hold for a moment.
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := so.certDir
	if dir == "" {
		dir = t.TempDir()
	}
	o := apiserver.NewOptions()
	o.Local = true
	o.Recommended.SecureServing.Listener = ln
	o.Recommended.SecureServing.ServerCert.CertDirectory = dir
	scheme := apiserver.NewScheme()
	codecs := serializer.NewCodecFactory(scheme)
	cfg, err := o.Config(scheme, codecs)
	if err != nil {
		t.Fatal(err)
	}
	client, err := discovery.New(&rest.Config{Host: upstream})
	if err != nil {
		t.Fatal(err)
	}
	checkInt := so.checkInt
	if checkInt == 0 {
		checkInt = -1
	}
	feed := &apiserver.Feed{
		Client: client, Stores: apiserver.NewStores(so.tune), CheckInterval: checkInt, CheckDelay: 50 * time.Millisecond,
		WatchOptions: []watch.Option{watch.WithDebounce(10 * time.Millisecond)},
	}
	srv, err := apiserver.New(cfg, scheme, codecs, feed)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	s := &served{URL: "https://" + ln.Addr().String(), Stores: feed.Stores, Kubeconfig: filepath.Join(dir, "kubeconfig"), CertDir: dir}
	certFile := o.Recommended.SecureServing.ServerCert.CertKey.CertFile
	if err := apiserver.WriteLocalKubeconfig(s.Kubeconfig, s.URL, certFile); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	s.Config = &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("server: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("server did not stop")
		}
	}
	t.Cleanup(s.stop)
	waitReady(t, s)
	return s
}

// waitReady waits until the server answers and has the upstream's groups.
func waitReady(t testing.TB, s *served) {
	t.Helper()
	hc, err := rest.HTTPClientFor(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && len(s.Stores.Groups.Names()) > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startFake starts a fake upstream cluster.
func startFake(t testing.TB, opts ...discoverytest.Option) (*discoverytest.Server, string) {
	t.Helper()
	return discoverytest.Start(t, opts...)
}
