package shared_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeatlas/kubeatlas/shared"
)

// headerLog is a server that answers every request 200 and logs the
// Authorization header of each path (for a proxy, of each URL).
type headerLog struct {
	mu   sync.Mutex
	auth map[string][]string
}

func startHeaderLog(t *testing.T) (*headerLog, string) {
	t.Helper()
	l := &headerLog{auth: map[string][]string{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.auth[r.URL.Path] = append(l.auth[r.URL.Path], r.Header.Get("Authorization"))
		l.mu.Unlock()
		http.Error(w, "logged", http.StatusOK)
	}))
	t.Cleanup(ts.Close)
	return l, ts.URL
}

func (l *headerLog) of(path string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.auth[path]
}

// execPlugin writes a credential plugin that prints token.
func execPlugin(t *testing.T, token string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the plugin is a shell script")
	}
	p := filepath.Join(t.TempDir(), "get-token")
	script := "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"" + token + "\"}}'\n"
	if err := os.WriteFile(p, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// Two configs that differ only in their exec plugin's policy are two
// clients: one whose policy denies the plugin sends no token, even after
// one that allows it took its client (kubeatlas#43: it was sent the
// other's token).
func TestPluginPolicyIsKeyed(t *testing.T) {
	l, srv := startHeaderLog(t)
	plugin := execPlugin(t, "tok-exec")
	config := func(policy clientcmdapi.PolicyType) *rest.Config {
		return &rest.Config{Host: srv, ExecProvider: &clientcmdapi.ExecConfig{
			Command: plugin, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			PluginPolicy: clientcmdapi.PluginPolicy{PolicyType: policy},
		}}
	}
	send := func(r *shared.Registry, cfg *rest.Config, path string) {
		t.Helper()
		h, err := r.Acquire(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		resp, err := h.HTTPClient().Get(srv + path)
		if err == nil { // a denied plugin fails the request before it is sent
			resp.Body.Close()
		}
	}
	// Alone, the denied config sends nothing; after the allowed one, in
	// the same registry, the same (whose client lingers).
	send(newRegistry(t, shared.WithoutWatch()), config(clientcmdapi.PluginPolicyDenyAll), "/denied-alone")
	r := newRegistry(t, shared.WithoutWatch())
	send(r, config(clientcmdapi.PluginPolicyAllowAll), "/allowed")
	send(r, config(clientcmdapi.PluginPolicyDenyAll), "/denied")
	if got := l.of("/allowed"); len(got) != 1 || got[0] != "Bearer tok-exec" {
		t.Errorf("the allowed plugin's config sent %q, want its token", got)
	}
	for _, p := range []string{"/denied-alone", "/denied"} {
		for _, a := range l.of(p) {
			if a != "" {
				t.Errorf("the denied plugin's config sent %q to %s", a, p)
			}
		}
	}
}

// Two configs whose proxy functions pick the same proxy (none) for the
// server's URL but not for every path are two clients: each request goes
// where its own config's function sends it (kubeatlas#43: both went
// where the first one's did).
func TestProxyFunctionIsNotShared(t *testing.T) {
	direct, srv := startHeaderLog(t)
	proxy, proxyURL := startHeaderLog(t)
	pu, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(srv)
	if err != nil {
		t.Fatal(err)
	}
	byPath := func(r *http.Request) (*url.URL, error) {
		if r.URL.Path == "/tunnelled" {
			return pu, nil
		}
		return nil, nil
	}
	r := newRegistry(t, shared.WithoutWatch())
	hDirect, err := r.Acquire(&rest.Config{Host: srv, BearerToken: "tok", Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer hDirect.Release()
	hByPath, err := r.Acquire(&rest.Config{Host: srv, BearerToken: "tok", Proxy: byPath})
	if err != nil {
		t.Fatal(err)
	}
	defer hByPath.Release()
	if hDirect.Discovery() == hByPath.Discovery() {
		t.Error("two proxy functions share one client")
	}
	for _, h := range []*shared.Handle{hDirect, hByPath} {
		resp, err := h.HTTPClient().Get(base.JoinPath("/tunnelled").String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The proxy sees the absolute URL's path.
	if n, p := len(direct.of("/tunnelled")), len(proxy.of("/tunnelled")); n != 1 || p != 1 {
		t.Errorf("/tunnelled reached the server directly %d times and through the proxy %d times, want once each", n, p)
	}
}
