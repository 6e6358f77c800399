package shared

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"runtime"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serverKey names a server as the registry shares it: the same URL and
// TLS trust (doc.go). It is a SHA-256 of those, so that a map of keys
// holds no certificate authority.
type serverKey [sha256.Size]byte

// clientKey names one shared client: a server, an identity on it, and
// the settings of the HTTP client that the client's users are handed.
// identity is a sum over the server's part and the identity's (keyFor):
// it alone names the client, and is the registry's map key.
type clientKey struct {
	server   serverKey
	identity identityKey
}

// identityKey is clientKey.identity: a server and an identity on it.
type identityKey [sha256.Size]byte

// serverPart is what makes two configs reach the same server.
type serverPart struct {
	URL        string // scheme, host and path prefix (rest.DefaultServerUrlFor)
	Insecure   bool
	ServerName string
	CA         []byte // CAData, else the contents of CAFile
	NextProtos []string
	Transport  string // "" or the identity of a custom transport (see identityOf)
}

// identityPart is who the requests are sent as, and the HTTP client's
// settings. Files are named by path: client-go rereads a token file, a
// rotated certificate and a CA file, which stay the same identity (and a
// CA file is not the same client as its bytes given as CAData, which are
// never reread).
type identityPart struct {
	BearerToken, BearerTokenFile string
	Username, Password           string
	CertData, KeyData            []byte
	CertFile, KeyFile, CAFile    string
	Exec                         *execPart
	AuthProvider                 *clientcmdapi.AuthProviderConfig // a name and a config map
	Persister                    string
	Impersonate                  rest.ImpersonationConfig
	UserAgent                    string
	Timeout                      time.Duration
	DisableCompression           bool
}

// execPart is every field of an ExecConfig, which client-go's own cache
// of exec authenticators keys on too: what the plugin is, what it is
// told, and whether it may run at all (PluginPolicy, which encoding/json
// would skip in an ExecConfig). Config (the cluster's extension) is its
// type and JSON.
type execPart struct {
	Command                 string
	Args                    []string
	Env                     []clientcmdapi.ExecEnvVar
	APIVersion              string
	InstallHint             string
	ProvideClusterInfo      bool
	ConfigType              string
	Config                  json.RawMessage
	InteractiveMode         string
	StdinUnavailable        bool
	StdinUnavailableMessage string
	PolicyType              string
	Allowlist               []string // the entries' commands
}

// keyFor is the key of cfg's shared client. ok is false for a config
// that cannot be compared by value: one that sets a field configField
// does not know (one client-go added since), a Dial, WrapTransport or
// Proxy function, a Transport or AuthConfigPersister that is not a
// pointer, or an exec extension that does not encode. Such a config gets
// a client of its own. It reads CAFile; an unreadable one is an error,
// as it would be to client-go.
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
	ok = keyable(cfg)
	if cfg.Transport != nil {
		id, byPointer := identityOf(cfg.Transport)
		sp.Transport, ok = id, ok && byPointer
	}
	ip := identityPart{
		BearerToken: cfg.BearerToken, BearerTokenFile: cfg.BearerTokenFile,
		Username: cfg.Username, Password: cfg.Password,
		CertData: cfg.CertData, KeyData: cfg.KeyData, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, CAFile: cfg.CAFile,
		AuthProvider: cfg.AuthProvider, Impersonate: cfg.Impersonate,
		UserAgent: cfg.UserAgent, Timeout: cfg.Timeout, DisableCompression: cfg.DisableCompression,
	}
	if cfg.AuthConfigPersister != nil {
		id, byPointer := identityOf(cfg.AuthConfigPersister)
		ip.Persister, ok = id, ok && byPointer
	}
	if e := cfg.ExecProvider; e != nil {
		ip.Exec = &execPart{Command: e.Command, Args: e.Args, Env: e.Env, APIVersion: e.APIVersion, InstallHint: e.InstallHint,
			ProvideClusterInfo: e.ProvideClusterInfo, InteractiveMode: string(e.InteractiveMode),
			StdinUnavailable: e.StdinUnavailable, StdinUnavailableMessage: e.StdinUnavailableMessage,
			PolicyType: string(e.PluginPolicy.PolicyType)}
		for _, a := range e.PluginPolicy.Allowlist {
			ip.Exec.Allowlist = append(ip.Exec.Allowlist, a.Command)
		}
		if e.Config != nil {
			ip.Exec.ConfigType = fmt.Sprintf("%T", e.Config)
			if ip.Exec.Config, err = json.Marshal(e.Config); err != nil {
				ok = false // an extension that cannot be encoded cannot be compared
			}
		}
	}
	sb, err := json.Marshal(sp)
	if err != nil {
		return k, false, err
	}
	k.server = sha256.Sum256(sb)
	if !ok {
		return k, false, nil
	}
	ib, err := json.Marshal(ip)
	if err != nil {
		return k, false, nil
	}
	k.identity = sha256.Sum256(append(sb, ib...))
	return k, true, nil
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

// fieldUse is how the key treats a field of rest.Config.
type fieldUse int

const (
	// unknownField is a field configField does not list (one client-go
	// added since): a config that sets it is not shared.
	unknownField fieldUse = iota
	// keyedField is part of the key by value.
	keyedField
	// identityField is part of the key by identity (identityOf).
	identityField
	// uncomparableField is a function: a config that sets it is not
	// shared.
	uncomparableField
	// ignoredField changes neither what the shared HTTP client sends nor
	// where (configField says why for each).
	ignoredField
	// nestedField is a struct, a pointer to one or a slice of them, whose
	// fields are listed under its path.
	nestedField
)

// configField is the use of the field of rest.Config at path: field names
// joined by dots, an embedded struct named by its type, a slice's
// elements by the slice. Every field is listed, which TestConfigFields
// checks against rest.Config by reflection, and keyFor against what it
// is given (keyable): a field client-go adds is unknown, and a config
// that sets it gets a client of its own until it is listed here and
// keyed.
func configField(path string) fieldUse {
	switch path {
	case "ContentConfig", "TLSClientConfig", "Impersonate", "AuthProvider", "ExecProvider",
		"ExecProvider.Env", "ExecProvider.PluginPolicy", "ExecProvider.PluginPolicy.Allowlist":
		return nestedField

	case "Host", // as rest.DefaultServerUrlFor makes the base URL of it
		"Username", "Password", "BearerToken", "BearerTokenFile",
		"Impersonate.UserName", "Impersonate.UID", "Impersonate.Groups", "Impersonate.Extra",
		"AuthProvider.Name", "AuthProvider.Config",
		"TLSClientConfig.Insecure", "TLSClientConfig.ServerName",
		"TLSClientConfig.CertFile", "TLSClientConfig.KeyFile", "TLSClientConfig.CAFile",
		"TLSClientConfig.CertData", "TLSClientConfig.KeyData", "TLSClientConfig.CAData",
		"TLSClientConfig.NextProtos",
		"UserAgent", "DisableCompression", "Timeout":
		return keyedField
	case "ExecProvider.Command", "ExecProvider.Args", "ExecProvider.Env.Name", "ExecProvider.Env.Value",
		"ExecProvider.APIVersion", "ExecProvider.InstallHint", "ExecProvider.ProvideClusterInfo",
		"ExecProvider.Config", "ExecProvider.InteractiveMode",
		"ExecProvider.StdinUnavailable", "ExecProvider.StdinUnavailableMessage",
		"ExecProvider.PluginPolicy.PolicyType", "ExecProvider.PluginPolicy.Allowlist.Command":
		// All of them, as client-go's exec authenticator cache: the
		// policy decides whether the plugin runs at all, the hint and
		// message what its failure says.
		return keyedField

	case "Transport", "AuthConfigPersister":
		return identityField

	case "Dial", "WrapTransport":
		return uncomparableField
	case "Proxy":
		// A function may pick by anything in the request (its path):
		// the URL it picks for one request says nothing of another's.
		// http.ProxyFromEnvironment, rest's default, is the same as none.
		return uncomparableField

	case "APIPath",
		// A RESTClient's path under Host; discovery and openapi3 read
		// /api, /apis and /openapi/v3 under Host's prefix.
		"ContentConfig.AcceptContentTypes", "ContentConfig.ContentType",
		"ContentConfig.GroupVersion", "ContentConfig.NegotiatedSerializer",
		// A RESTClient's encoding; discovery and openapi3 negotiate their
		// own Accept, and the HTTP client reads none of these.
		"QPS", "Burst", "RateLimiter",
		// A RESTClient's client-side throttle: the HTTP client sends the
		// same requests to the same place.
		"WarningHandler", "WarningHandlerWithContext":
		// What a RESTClient does with the Warning headers of answers.
		return ignoredField
	}
	return unknownField
}

// keyable reports whether every field cfg sets is one configField
// lists, and none is a function.
func keyable(cfg *rest.Config) bool {
	c := *cfg
	if c.Proxy != nil && isProxyFromEnvironment(c.Proxy) {
		c.Proxy = nil
	}
	return keyableStruct(reflect.ValueOf(c), "")
}

func keyableStruct(v reflect.Value, prefix string) bool {
	t := v.Type()
	for i := range t.NumField() {
		path, f := prefix+t.Field(i).Name, v.Field(i)
		switch configField(path) {
		case nestedField:
			if !keyableNested(f, path+".") {
				return false
			}
		case keyedField, identityField, ignoredField:
		default: // uncomparable or unknown
			if !f.IsZero() {
				return false
			}
		}
	}
	return true
}

func keyableNested(v reflect.Value, prefix string) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return v.IsNil() || keyableStruct(v.Elem(), prefix)
	case reflect.Slice:
		for i := range v.Len() {
			if !keyableStruct(v.Index(i), prefix) {
				return false
			}
		}
		return true
	}
	return keyableStruct(v, prefix)
}

// isProxyFromEnvironment reports whether p is http.ProxyFromEnvironment
// (a function, named by its symbol; a closure of the same package would
// be named with a suffix).
func isProxyFromEnvironment(p func(*http.Request) (*url.URL, error)) bool {
	f := runtime.FuncForPC(reflect.ValueOf(p).Pointer())
	return f != nil && f.Name() == "net/http.ProxyFromEnvironment"
}
