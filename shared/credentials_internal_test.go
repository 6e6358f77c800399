package shared

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"unsafe"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// TestCredentialsSendWhatClientGoSends: for configs whose only
// credentials are a bearer token and impersonation, the headers the
// server gets through compactTransport's client are those it gets
// through client-go's (rest.HTTPClientFor), the oracle, for requests that
// bring none of them and for requests that bring their own of each; the
// caller's request is left as it was. Any other credential keeps
// client-go's transport.
func TestCredentialsSendWhatClientGoSends(t *testing.T) {
	var mu sync.Mutex
	var got http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
	}))
	defer ts.Close()
	sent := func(t *testing.T, hc *http.Client, pre http.Header) http.Header {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, ts.URL+"/apis", nil)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(req.Header, pre.Clone())
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !reflect.DeepEqual(req.Header, pre) && !(len(req.Header) == 0 && len(pre) == 0) {
			t.Errorf("the caller's request was changed: %v, was %v", req.Header, pre)
		}
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	requests := map[string]http.Header{
		"no headers":             {},
		"its own token":          {"Authorization": {"Bearer mine"}},
		"its own user agent":     {"User-Agent": {"mine/1"}},
		"its own impersonation":  {"Impersonate-User": {"someone"}, "Impersonate-Group": {"theirs"}},
		"a group, but no user":   {"Impersonate-Group": {"theirs"}},
		"an empty token":         {"Authorization": {""}},
		"all of its own at once": {"Authorization": {"Bearer mine"}, "User-Agent": {"mine/1"}, "Impersonate-User": {"someone"}},
	}
	for name, cfg := range map[string]rest.Config{
		"nothing":            {},
		"a user agent":       {UserAgent: "agent/1"},
		"a token":            {BearerToken: "tok-a", UserAgent: "agent/1"},
		"a user":             {BearerToken: "tok-a", Impersonate: rest.ImpersonationConfig{UserName: "user-1"}},
		"groups but no user": {BearerToken: "tok-a", Impersonate: rest.ImpersonationConfig{Groups: []string{"g1", "g2"}}},
		"everything": {BearerToken: "tok-a", UserAgent: "agent/1", Impersonate: rest.ImpersonationConfig{
			UserName: "user-1", UID: "uid-1", Groups: []string{"g1", "g2", "g1"},
			Extra: map[string][]string{"scopes": {"a", "b"}, "example.com/key with space%": {"c"}, "ünicode": {"d"}, "empty": {}},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.Host = ts.URL
			want, err := rest.HTTPClientFor(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			hc, compact, err := compactTransport(&cfg)
			if err != nil || !compact {
				t.Fatalf("compactTransport: %v, %v", compact, err)
			}
			if hc.Timeout != want.Timeout {
				t.Errorf("timeout %v, client-go's %v", hc.Timeout, want.Timeout)
			}
			for rname, pre := range requests {
				if g, w := sent(t, hc, pre), sent(t, want, pre); !reflect.DeepEqual(g, w) {
					t.Errorf("%s: the server got\n%v\nclient-go's sends\n%v", rname, g, w)
				}
			}
		})
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A client certificate that client-go loads: a config refused only
	// because client-go could not build its transport proves nothing.
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("client.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(t.TempDir(), "cert"), filepath.Join(t.TempDir(), "key")
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// An auth provider client-go knows (registered once a process: a
	// second registration of the name is an error, not a second one).
	_ = rest.RegisterAuthProviderPlugin("kubeatlas-test", func(string, map[string]string, rest.AuthProviderConfigPersister) (rest.AuthProvider, error) {
		return testAuthProvider{}, nil
	})
	for name, cfg := range map[string]rest.Config{
		"a token file":   {BearerTokenFile: tokenFile},
		"basic auth":     {Username: "u", Password: "p"},
		"a certificate":  {TLSClientConfig: rest.TLSClientConfig{CertData: certPEM, KeyData: keyPEM}},
		"cert files":     {TLSClientConfig: rest.TLSClientConfig{CertFile: certFile, KeyFile: keyFile}},
		"an exec plugin": {ExecProvider: &clientcmdapi.ExecConfig{Command: "x", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}},
		"auth provider":  {AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "kubeatlas-test"}},
		"a wrapper":      {BearerToken: "tok", WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return rt }},
	} {
		cfg.Host = ts.URL
		if _, err := rest.HTTPClientFor(&cfg); err != nil {
			t.Fatalf("client-go cannot build a transport for a config with %s, which proves nothing: %v", name, err)
		}
		if _, compact, _ := compactTransport(&cfg); compact {
			t.Errorf("a config with %s has the compact transport", name)
		}
	}
}

type testAuthProvider struct{}

func (testAuthProvider) WrapTransport(rt http.RoundTripper) http.RoundTripper { return rt }
func (testAuthProvider) Login() error                                         { return nil }

// TestCredentialsAreSmall pins what an identity's transport holds: 48
// bytes, 112 with impersonation, where client-go's round trippers hold
// 80 (user agent and bearer token) and 160 (and impersonation).
func TestCredentialsAreSmall(t *testing.T) {
	if n := unsafe.Sizeof(credentials{}); n > 48 {
		t.Errorf("credentials are %d bytes, want at most 48", n)
	}
	if n := unsafe.Sizeof(impersonating{}); n > 112 {
		t.Errorf("impersonating credentials are %d bytes, want at most 112", n)
	}
}
