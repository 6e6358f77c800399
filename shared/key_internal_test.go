package shared

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The key: what makes the same server, what makes the same identity, and
// what cannot be compared.
func TestKey(t *testing.T) {
	dir := t.TempDir()
	caA, caB := filepath.Join(dir, "a.crt"), filepath.Join(dir, "b.crt")
	for p, body := range map[string]string{caA: "ca one", caB: "ca two"} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := func() *rest.Config {
		return &rest.Config{Host: "https://api.example:6443", BearerToken: "t1", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca one")}}
	}
	proxyTo := func(u string) func(*http.Request) (*url.URL, error) {
		p, _ := url.Parse(u)
		return http.ProxyURL(p)
	}
	transport := &http.Transport{}
	for _, tc := range []struct {
		name                   string
		change                 func(*rest.Config)
		sameServer, sameClient bool
		shareable              bool
	}{
		{"a copy", func(*rest.Config) {}, true, true, true},
		{"the CA as a file of the same bytes", func(c *rest.Config) { c.CAData, c.CAFile = nil, caA }, true, true, true},
		{"another CA file", func(c *rest.Config) { c.CAData, c.CAFile = nil, caB }, false, false, true},
		{"another path prefix", func(c *rest.Config) { c.Host += "/k8s/clusters/c1" }, false, false, true},
		{"another host", func(c *rest.Config) { c.Host = "https://api2.example:6443" }, false, false, true},
		{"insecure", func(c *rest.Config) { c.Insecure, c.CAData = true, nil }, false, false, true},
		{"a server name", func(c *rest.Config) { c.ServerName = "kubernetes" }, false, false, true},
		{"a proxy", func(c *rest.Config) { c.Proxy = proxyTo("http://proxy:3128") }, false, false, true},
		{"another token", func(c *rest.Config) { c.BearerToken = "t2" }, true, false, true},
		{"a token file", func(c *rest.Config) { c.BearerToken, c.BearerTokenFile = "", "/var/run/token" }, true, false, true},
		{"a client certificate", func(c *rest.Config) { c.CertData, c.KeyData = []byte("cert"), []byte("key") }, true, false, true},
		{"basic auth", func(c *rest.Config) { c.Username, c.Password = "u", "p" }, true, false, true},
		{"an exec plugin", func(c *rest.Config) {
			c.ExecProvider = &clientcmdapi.ExecConfig{Command: "get-token", Args: []string{"a"}}
		}, true, false, true},
		{"an auth provider", func(c *rest.Config) {
			c.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"client-id": "x"}}
		}, true, false, true},
		{"impersonating a user", func(c *rest.Config) { c.Impersonate.UserName = "alice" }, true, false, true},
		{"impersonating a group", func(c *rest.Config) { c.Impersonate.Groups = []string{"admins"} }, true, false, true},
		{"impersonating with an extra", func(c *rest.Config) { c.Impersonate.Extra = map[string][]string{"scope": {"x"}} }, true, false, true},
		{"impersonating a UID", func(c *rest.Config) { c.Impersonate.UID = "42" }, true, false, true},
		{"another user agent", func(c *rest.Config) { c.UserAgent = "mine" }, true, false, true},
		{"a timeout", func(c *rest.Config) { c.Timeout = 5e9 }, true, false, true},
		{"a transport (a pointer)", func(c *rest.Config) { c.Transport = transport }, false, false, true},
		{"a dial function", func(c *rest.Config) {
			c.Dial = func(ctx context.Context, n, a string) (net.Conn, error) { return nil, nil }
		}, true, false, false},
		{"a transport wrapper", func(c *rest.Config) { c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return rt } }, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, ok, err := keyFor(base())
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			cfg := base()
			tc.change(cfg)
			got, ok, err := keyFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.shareable {
				t.Errorf("shareable = %v, want %v", ok, tc.shareable)
			}
			if !tc.shareable {
				return
			}
			if (got.server == want.server) != tc.sameServer {
				t.Errorf("same server = %v, want %v", got.server == want.server, tc.sameServer)
			}
			if (got == want) != tc.sameClient {
				t.Errorf("same client = %v, want %v", got == want, tc.sameClient)
			}
		})
	}
	// The same transport pointer is the same client.
	c1, c2 := base(), base()
	c1.Transport, c2.Transport = transport, transport
	k1, _, _ := keyFor(c1)
	k2, _, _ := keyFor(c2)
	if k1 != k2 {
		t.Error("two configs with one transport have two keys")
	}
}
