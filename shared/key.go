package shared

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"time"

	"k8s.io/client-go/rest"
)

// serverKey names a server as the registry shares it: the same URL, TLS
// trust and proxy (doc.go). It is a SHA-256 of those, so that a map of
// keys holds no certificate authority and no proxy credentials.
type serverKey [sha256.Size]byte

// clientKey names one shared client: a server, an identity on it, and
// the settings of the HTTP client that the client's users are handed.
type clientKey struct {
	server   serverKey
	identity [sha256.Size]byte
}

// serverPart is what makes two configs reach the same server.
type serverPart struct {
	URL        string // scheme, host and path prefix (rest.DefaultServerUrlFor)
	Insecure   bool
	ServerName string
	CA         []byte // CAData, else the contents of CAFile
	NextProtos []string
	Proxy      string // the proxy cfg.Proxy picks for URL; "" for none or the environment's
	Dial       string // "" or the identity of a custom transport (see identityOf)
}

// identityPart is who the requests are sent as, and the HTTP client's
// settings. Files are named by path: client-go rereads a token file and
// a rotated certificate, which stay the same identity.
type identityPart struct {
	BearerToken, BearerTokenFile string
	Username, Password           string
	CertData, KeyData            []byte
	CertFile, KeyFile            string
	Exec                         *execPart
	AuthProvider                 any // *clientcmdapi.AuthProviderConfig: a name and a config map
	Persister                    string
	Impersonate                  rest.ImpersonationConfig
	UserAgent                    string
	Timeout                      time.Duration
	DisableCompression           bool
}

// execPart is the ExecConfig fields that decide what the plugin returns;
// Config (the cluster's extension) is encoded as JSON.
type execPart struct {
	Command            string
	Args               []string
	Env                any
	APIVersion         string
	ProvideClusterInfo bool
	InteractiveMode    string
	Config             any
}

// keyFor is the key of cfg's shared client. ok is false for a config
// whose transport cannot be compared by value (a Dial or WrapTransport
// function, a Transport that is not a pointer, an AuthConfigPersister
// that is not one): such a config gets a client of its own. It reads
// CAFile; an unreadable one is an error, as it would be to client-go.
func keyFor(cfg *rest.Config) (k clientKey, ok bool, err error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return k, false, err
	}
	sp := serverPart{URL: base.String(), Insecure: cfg.Insecure, ServerName: cfg.ServerName, CA: cfg.CAData, NextProtos: cfg.NextProtos}
	if len(sp.CA) == 0 && cfg.CAFile != "" {
		if sp.CA, err = os.ReadFile(cfg.CAFile); err != nil {
			return k, false, fmt.Errorf("reading the config's CA file: %w", err)
		}
	}
	if cfg.Proxy != nil {
		u, err := cfg.Proxy(&http.Request{Method: http.MethodGet, URL: base, Header: http.Header{}})
		if err != nil {
			return k, false, fmt.Errorf("the config's proxy for %s: %w", base.Redacted(), err)
		}
		if u != nil {
			sp.Proxy = u.String()
		}
	}
	ok = cfg.Dial == nil && cfg.WrapTransport == nil
	if cfg.Transport != nil {
		id, comparable := identityOf(cfg.Transport)
		sp.Dial, ok = id, ok && comparable
	}
	ip := identityPart{
		BearerToken: cfg.BearerToken, BearerTokenFile: cfg.BearerTokenFile,
		Username: cfg.Username, Password: cfg.Password,
		CertData: cfg.CertData, KeyData: cfg.KeyData, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile,
		Impersonate: cfg.Impersonate, UserAgent: cfg.UserAgent, Timeout: cfg.Timeout, DisableCompression: cfg.DisableCompression,
	}
	if cfg.AuthProvider != nil {
		ip.AuthProvider = cfg.AuthProvider
	}
	if cfg.AuthConfigPersister != nil {
		id, comparable := identityOf(cfg.AuthConfigPersister)
		ip.Persister, ok = id, ok && comparable
	}
	if e := cfg.ExecProvider; e != nil {
		ip.Exec = &execPart{Command: e.Command, Args: e.Args, Env: e.Env, APIVersion: e.APIVersion,
			ProvideClusterInfo: e.ProvideClusterInfo, InteractiveMode: string(e.InteractiveMode), Config: e.Config}
	}
	sb, err := json.Marshal(sp)
	if err != nil {
		return k, false, err
	}
	ib, err := json.Marshal(ip)
	if err != nil {
		// An exec extension that cannot be encoded: not comparable, so
		// not shared.
		return clientKey{server: sha256.Sum256(sb)}, false, nil
	}
	return clientKey{server: sha256.Sum256(sb), identity: sha256.Sum256(append(sb, ib...))}, ok, nil
}

// identityOf names a value that is comparable only by identity (a
// transport, a persister) when it is a pointer: the same pointer is the
// same transport. Anything else cannot be named, and ok is false.
func identityOf(v any) (id string, ok bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer {
		return "", false
	}
	return fmt.Sprintf("%T@%x", v, rv.Pointer()), true
}
