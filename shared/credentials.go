package shared

import (
	"fmt"
	"net/http"
	"strings"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Most identities of a server differ only in who they send requests as:
// a bearer token and impersonation over the same TLS settings (a gateway
// or dashboard impersonating each user). client-go builds each of them
// one transport for the TLS settings, cached and shared, and three round
// trippers of its own above it: its user agent's, its bearer token's and
// its impersonation's (transport.HTTPWrappersForConfig), 80 bytes held,
// 160 with impersonation. Such an identity's transport is one object
// instead (credentials), which sets the same headers, as those round
// trippers do, over the transport client-go builds for the config
// without them: 48 bytes, 112 with impersonation. Any other credential
// (a token file, which client-go rereads, basic auth, a client
// certificate, an exec plugin or auth provider) or a WrapTransport keeps
// client-go's own. TestCredentialsSendWhatClientGoSends holds it to
// client-go's headers.

// compactTransport is what client-go's rest.HTTPClientFor would build
// for cfg, when cfg's only credentials are a bearer token and
// impersonation: an HTTP client over one credentials object; ok is false
// for any other config (build then takes client-go's).
func compactTransport(cfg *rest.Config) (hc *http.Client, ok bool, err error) {
	if !compactCredentials(cfg) {
		return nil, false, nil
	}
	bare := *cfg
	bare.BearerToken, bare.UserAgent, bare.Impersonate = "", "", rest.ImpersonationConfig{}
	next, err := rest.TransportFor(&bare)
	if err != nil {
		return nil, false, err
	}
	c := credentials{next: next, agent: cfg.UserAgent, token: cfg.BearerToken}
	if impersonates(cfg.Impersonate) {
		return &http.Client{Transport: &impersonating{credentials: c, as: cfg.Impersonate}, Timeout: cfg.Timeout}, true, nil
	}
	return &http.Client{Transport: &c, Timeout: cfg.Timeout}, true, nil
}

// compactCredentials reports whether cfg's only credentials are a bearer
// token and impersonation, and nothing wraps its transport.
func compactCredentials(cfg *rest.Config) bool {
	return cfg.BearerTokenFile == "" && cfg.Username == "" && cfg.Password == "" &&
		len(cfg.CertData) == 0 && len(cfg.KeyData) == 0 && cfg.CertFile == "" && cfg.KeyFile == "" &&
		cfg.AuthProvider == nil && cfg.AuthConfigPersister == nil && cfg.ExecProvider == nil &&
		cfg.WrapTransport == nil
}

// impersonates is client-go's test for an impersonating round tripper.
func impersonates(ic rest.ImpersonationConfig) bool {
	return ic.UserName != "" || ic.UID != "" || len(ic.Groups) > 0 || len(ic.Extra) > 0
}

// credentials is an identity's transport with a bearer token and no
// impersonation: what client-go's user agent and bearer token round
// trippers set, each only where the request has none.
type credentials struct {
	next         http.RoundTripper
	agent, token string // "" for none
}

func (c *credentials) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.send(req, nil)
}

// WrappedRoundTripper is the transport below the credentials, for
// client-go's utilnet.RoundTripperWrapper walkers, as client-go's round
// trippers unwrap to theirs.
func (c *credentials) WrappedRoundTripper() http.RoundTripper { return c.next }

// impersonating is an identity's transport with impersonation too.
type impersonating struct {
	credentials
	as rest.ImpersonationConfig
}

func (c *impersonating) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.send(req, &c.as)
}

// send sets what client-go's round trippers set, on one copy of req
// rather than one each: impersonation (all of it, unless the request
// names a user to impersonate), the user agent and the bearer token
// (each unless the request has its own).
func (c *credentials) send(req *http.Request, as *rest.ImpersonationConfig) (*http.Response, error) {
	h := req.Header
	setAs := as != nil && h.Get(transport.ImpersonateUserHeader) == ""
	setAgent := c.agent != "" && h.Get("User-Agent") == ""
	setToken := c.token != "" && h.Get("Authorization") == ""
	if !setAs && !setAgent && !setToken {
		return c.next.RoundTrip(req)
	}
	req = utilnet.CloneRequest(req)
	h = req.Header
	if setAs {
		h.Set(transport.ImpersonateUserHeader, as.UserName)
		if as.UID != "" {
			h.Set(transport.ImpersonateUIDHeader, as.UID)
		}
		for _, g := range as.Groups {
			h.Add(transport.ImpersonateGroupHeader, g)
		}
		for k, vs := range as.Extra {
			for _, v := range vs {
				h.Add(transport.ImpersonateUserExtraHeaderPrefix+headerKeyEscape(k), v)
			}
		}
	}
	if setAgent {
		h.Set("User-Agent", c.agent)
	}
	if setToken {
		h.Set("Authorization", "Bearer "+c.token)
	}
	return c.next.RoundTrip(req)
}

// headerKeyEscape is client-go's (transport/round_trippers.go) for the
// keys of Impersonate-Extra-: a byte that is not a token byte of an HTTP
// header name (RFC 7230), and '%', %-encoded.
func headerKeyEscape(key string) string {
	var b strings.Builder
	for i := range len(key) {
		if c := key[i]; c == '%' || !tokenByte(c) {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func tokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
