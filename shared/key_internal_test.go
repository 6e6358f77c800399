package shared

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeatlas/kubeatlas/internal/restconfigtest"
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
		// client-go rereads a CA file (ClientsAllowCARotation), never
		// CAData: the same server, not the same client.
		{"the CA as a file of the same bytes", func(c *rest.Config) { c.CAData, c.CAFile = nil, caA }, true, false, true},
		{"another CA file", func(c *rest.Config) { c.CAData, c.CAFile = nil, caB }, false, false, true},
		{"another path prefix", func(c *rest.Config) { c.Host += "/k8s/clusters/c1" }, false, false, true},
		{"another host", func(c *rest.Config) { c.Host = "https://api2.example:6443" }, false, false, true},
		{"insecure", func(c *rest.Config) { c.Insecure, c.CAData = true, nil }, false, false, true},
		{"a server name", func(c *rest.Config) { c.ServerName = "kubernetes" }, false, false, true},
		{"a proxy", func(c *rest.Config) { c.Proxy = proxyTo("http://proxy:3128") }, true, false, false},
		{"the environment's proxy, rest's default", func(c *rest.Config) { c.Proxy = http.ProxyFromEnvironment }, true, true, true},
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
		{"a transport that is not a pointer", func(c *rest.Config) { c.Transport = roundTripFunc(nil) }, true, false, false},
		{"an exec extension that does not encode", func(c *rest.Config) {
			c.ExecProvider = &clientcmdapi.ExecConfig{Command: "get-token", Config: &runtime.Unknown{Raw: []byte("{")}}
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
			// The registry keys its clients by identity alone, which
			// names the server as well.
			if (got.identity == want.identity) != tc.sameClient {
				t.Errorf("same identity sum = %v, want %v (same client)", got.identity == want.identity, tc.sameClient)
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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Every field of rest.Config, down to the fields of its structs, is
// listed by configField, and is what it is listed as: a field client-go
// adds fails this test until it is keyed, keyed by identity, or ignored
// with a reason. Each field is set to two values in two otherwise equal
// configs: keyed fields give two keys, ignored ones one, identity fields
// one for the same pointer and two for two, functions no key at all.
func TestConfigFields(t *testing.T) {
	var leaves []string
	var walk func(typ reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			path := prefix + f.Name
			switch configField(path) {
			case nestedField:
				ft := f.Type
				for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
					ft = ft.Elem()
				}
				if ft.Kind() != reflect.Struct {
					t.Errorf("%s (%v) is listed as nested, but holds no struct", path, f.Type)
					continue
				}
				walk(ft, path+".")
			case unknownField:
				t.Errorf("rest.Config's %s (%v) is not listed in configField: key it, key it by identity, or say why it is ignored", path, f.Type)
			default:
				leaves = append(leaves, path)
			}
		}
	}
	walk(reflect.TypeFor[rest.Config](), "")
	if len(leaves) < 40 {
		t.Fatalf("only %d fields found: %v", len(leaves), leaves)
	}

	base := func() *rest.Config {
		return &rest.Config{Host: "https://api.example:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	}
	for _, path := range leaves {
		t.Run(path, func(t *testing.T) {
			c1, c2 := base(), base()
			v1 := restconfigtest.Set(t, c1, path, 1)
			restconfigtest.Set(t, c2, path, 2)
			k1, ok1, err1 := keyFor(c1)
			k2, ok2, err2 := keyFor(c2)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			switch use := configField(path); use {
			case uncomparableField:
				if ok1 || ok2 {
					t.Errorf("a config that sets %s is shared", path)
				}
			case keyedField:
				if !ok1 || !ok2 || k1 == k2 {
					t.Errorf("two values of %s: shareable %v, %v; one key %v", path, ok1, ok2, k1 == k2)
				}
			case ignoredField:
				if !ok1 || !ok2 || k1 != k2 {
					t.Errorf("two values of ignored %s: shareable %v, %v; one key %v", path, ok1, ok2, k1 == k2)
				}
			case identityField:
				c3 := base()
				restconfigtest.SetTo(c3, path, v1)
				k3, ok3, _ := keyFor(c3)
				if !ok1 || !ok2 || !ok3 || k1 == k2 || k1 != k3 {
					t.Errorf("%s: two pointers give one key %v, one pointer two keys %v (shareable %v, %v, %v)", path, k1 == k2, k1 != k3, ok1, ok2, ok3)
				}
			default:
				t.Fatalf("%s: use %d", path, use)
			}
		})
	}
}

// A field that configField does not know (one client-go adds) makes a
// config that sets it unshareable: the key fails closed.
func TestUnknownFieldIsNotShared(t *testing.T) {
	type future struct {
		Host            string
		TLSClientConfig rest.TLSClientConfig
		NewSecret       string
	}
	if !keyableStruct(reflect.ValueOf(future{Host: "h", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}), "") {
		t.Error("a config that sets only listed fields is not keyable")
	}
	if keyableStruct(reflect.ValueOf(future{Host: "h", NewSecret: "s"}), "") {
		t.Error("a config that sets an unlisted field is keyable")
	}
	type futureTLS struct {
		TLSClientConfig struct{ Insecure, NewTrust bool }
	}
	var f futureTLS
	f.TLSClientConfig.NewTrust = true
	if keyableStruct(reflect.ValueOf(f), "") {
		t.Error("a config that sets an unlisted nested field is keyable")
	}
}

// BenchmarkKey is the key of a config as a kubeconfig with an exec
// plugin makes it, which every Acquire computes:
//
//	go test -run '^$' -bench Key -benchmem ./shared/
func BenchmarkKey(b *testing.B) {
	cfg := &rest.Config{Host: "https://api.example:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte(strings.Repeat("c", 1200))},
		ExecProvider: &clientcmdapi.ExecConfig{Command: "aws", Args: []string{"eks", "get-token", "--cluster-name", "prod"},
			Env: []clientcmdapi.ExecEnvVar{{Name: "AWS_PROFILE", Value: "prod"}}, APIVersion: "client.authentication.k8s.io/v1beta1",
			InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode},
		QPS: 20, Burst: 30, UserAgent: "controller/v1"}
	for b.Loop() {
		if _, ok, err := keyFor(cfg); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
