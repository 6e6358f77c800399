package consistency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// directTimeout bounds asking the servers at their own addresses, all of
// them together: an address that is not routable from here, or a host
// that accepts connections and never answers (a tenant's lease can name
// any), must not hold the check for a TCP timeout, nor one after the other.
const directTimeout = 10 * time.Second

// directParallelism bounds the servers asked at once (the leases are the
// cluster's to list, as many as it likes); all share directTimeout.
const directParallelism = 8

// ErrNotAskedDirectly is what Report.NotAskedDirectly wraps: the check
// would have asked the servers at the addresses the cluster names, but
// could not have verified whom the client's credentials went to there, or
// its requests would not have gone to those addresses.
var ErrNotAskedDirectly = errors.New("consistency: servers not asked at their own addresses")

// ErrAddressShared is a Server's Err when another live identity lease names
// its address too: one host cannot count as two servers, so none of them is
// asked there (a tenant's lease may copy a real server's address).
var ErrAddressShared = errors.New("another identity lease names the same address")

// directConfig is the config the servers are asked with at the addresses
// the cluster names, or why they may not be: where the user's credentials
// go is decided here and in directClient, and nowhere else.
//
// A direct request is the request to the client's URL, host, Host header,
// TLS server name, credentials and all (an exec plugin is told the
// kubeconfig's server, a token's audience is the same); only its TCP
// connection is dialed to the server's address (directClient). The
// server's certificate is therefore verified for the name the kubeconfig
// knows the cluster by (its tls-server-name, or its host, an IP or not)
// against the kubeconfig's CA, in the TLS handshake, before any credential
// is sent: a certificate the cluster's CA signed for the address a lease
// names (a kubelet's) does not pass. Where nothing can be verified (plain
// http, insecure-skip-tls-verify), servers are asked directly only by a
// client that carries no credentials (nothing to steal, and the client's
// URL is not verified either). Never where the request would not go to the
// address dialed: with a custom Transport (client-go then ignores Dial) or
// through a proxy (it would dial the proxy).
func (k *checker) directConfig() (*rest.Config, error) {
	cfg := rest.CopyConfig(k.cfg)
	if cfg.Transport != nil {
		return nil, fmt.Errorf("%w: the client's rest.Config has a Transport of its own, which does not dial the addresses the check would", ErrNotAskedDirectly)
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment) // client-go's default
	}
	if u, err := proxy(&http.Request{URL: k.url.Base}); err != nil || u != nil {
		return nil, fmt.Errorf("%w: the client reaches %s through a proxy", ErrNotAskedDirectly, k.url.Base.Host)
	}
	verified := k.url.Base.Scheme == "https" && !cfg.Insecure
	if !verified && carriesCredentials(cfg) {
		why := "over plain http"
		if cfg.Insecure {
			why = "with TLS verification off (insecure-skip-tls-verify)"
		}
		return nil, fmt.Errorf("%w: %s nothing verifies who answers at an address the cluster names, and the client's credentials would go there", ErrNotAskedDirectly, why)
	}
	if verified && cfg.TLSClientConfig.ServerName == "" {
		// What Go's transport would do for the URL's host anyway; said
		// here so that no later change of the URL can move it.
		cfg.TLSClientConfig.ServerName = k.url.Base.Hostname()
	}
	return cfg, nil
}

// carriesCredentials tells whether requests made with cfg may carry
// something that proves who the user is. A WrapTransport may add anything.
func carriesCredentials(cfg *rest.Config) bool {
	return cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.Username != "" || cfg.Password != "" ||
		cfg.CertData != nil || cfg.CertFile != "" || cfg.KeyData != nil || cfg.KeyFile != "" ||
		cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.WrapTransport != nil || cfg.Transport != nil
}

// askAllDirectly asks every live server with an address at it with cfg (nil:
// none is asked), all at once under one deadline, and returns how many
// answered. The client's credentials go only to the addresses apiServers
// lists (the kubernetes EndpointSlice, which only API servers write): a
// lease is anyone's who may write Leases in kube-system, and a host it
// names may hold a certificate the cluster's CA signed for the
// kubeconfig's name (a kubelet's serving certificate for the node IP the
// kubeconfig names, on another port), which the TLS check cannot tell from
// an API server's. Elsewhere the server is asked without credentials
// (rest.AnonymousClientConfig: no token, client certificate, plugin or
// WrapTransport). A server not asked, or that did not answer, loses its
// address (Server.Address is where a server was asked).
func (k *checker) askAllDirectly(ctx context.Context, servers []Server, cfg *rest.Config, apiServers []string) int {
	var anonymous *rest.Config
	if cfg != nil {
		markShared(servers)
		anonymous = rest.AnonymousClientConfig(cfg)
	}
	vouched := map[string]bool{}
	for _, a := range apiServers {
		vouched[a] = true
	}
	ctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	var g errgroup.Group
	g.SetLimit(directParallelism)
	answered := make([]bool, len(servers))
	for i := range servers {
		s := &servers[i]
		if cfg == nil || !s.Alive || s.Address == "" || s.Err != nil {
			s.Address = ""
			continue
		}
		with := anonymous
		if vouched[normalAddress(s.Address)] {
			with, s.Vouched = cfg, true
		}
		g.Go(func() error {
			if err := k.askDirectly(ctx, s, with); err != nil {
				s.Err, s.Address, s.Vouched = err, "", false
			} else {
				answered[i] = true
			}
			return nil
		})
	}
	_ = g.Wait()
	n := 0
	for _, a := range answered {
		if a {
			n++
		}
	}
	return n
}

// markShared gives ErrAddressShared to every live server whose address
// another live server's lease names too (an expired lease may name the
// address of the server that took its host's place).
func markShared(servers []Server) {
	named := map[string][]int{}
	for i, s := range servers {
		if s.Alive && s.Address != "" {
			a := normalAddress(s.Address)
			named[a] = append(named[a], i)
		}
	}
	for _, at := range named {
		if len(at) < 2 {
			continue
		}
		for _, i := range at {
			var others []string
			for _, j := range at {
				if j != i {
					others = append(others, servers[j].Identity)
				}
			}
			s := &servers[i]
			s.Err = fmt.Errorf("%w (%s, named by %s too)", ErrAddressShared, s.Address, strings.Join(others, ", "))
			s.Address = ""
		}
	}
}

// normalAddress spells host:port one way, so that one address written two
// ways ("[::ffff:10.0.0.1]:6443", "10.0.0.1:6443") is seen as one.
func normalAddress(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// askDirectly reads a server's own view and version at its address.
func (k *checker) askDirectly(ctx context.Context, s *Server, cfg *rest.Config) error {
	hc, err := k.directClient(cfg, s.Address)
	if err != nil {
		return err
	}
	defer utilnet.CloseIdleConnectionsFor(hc.HC.Transport)
	if err := k.askOn(ctx, hc, s); err != nil {
		// The request's URL is the client's: say where it went.
		return fmt.Errorf("at %s: %w", s.Address, err)
	}
	return nil
}

// directClient is an HTTP client whose requests are the client's, to its
// URL (see directConfig), with every connection dialed to address (host:
// port, as a lease or the EndpointSlice names it), through the config's
// own Dial if it has one. A config with a Dial is never shared by
// client-go's transport cache, so this client's connections are its own.
func (k *checker) directClient(cfg *rest.Config, address string) (*httpx.Client, error) {
	cfg = rest.CopyConfig(cfg)
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext // client-go's
	}
	cfg.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) { return dial(ctx, network, address) }
	// No proxy (directConfig refused one for the URL), said so that the
	// dial above is the only one.
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	_, hc, base, err := httpx.FromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("consistency: a client for %s: %w", address, err)
	}
	direct := httpx.NewClient(hc, base, httpx.DefaultMaxRedirects)
	direct.Body, direct.MaxRetries = k.url.Body, k.url.MaxRetries
	return direct, nil
}

// sampleClient is an HTTP client through the client's URL whose next
// request opens a new connection, and what to call when the sample is
// done: with the client's rest.Config, a transport of its own for this
// sample (a config with a Dial is never shared by client-go's transport
// cache, so nobody else's connections are closed); otherwise the client's
// own, its idle connections closed first.
func (k *checker) sampleClient() (hc *httpx.Client, done func()) {
	if k.cfg != nil {
		cfg := rest.CopyConfig(k.cfg)
		cfg.Dial = (&net.Dialer{}).DialContext
		if own, err := rest.HTTPClientFor(cfg); err == nil {
			c := k.url.Clone()
			c.HC = httpx.WithRedirectPolicy(&http.Client{Transport: own.Transport, Timeout: own.Timeout}, httpx.DefaultMaxRedirects)
			return c, func() { utilnet.CloseIdleConnectionsFor(own.Transport) }
		}
	}
	utilnet.CloseIdleConnectionsFor(k.url.HC.Transport)
	return k.url, func() {}
}

// askOn reads a server's version, own view and merged /apis through hc,
// one request after the other (so that on a new connection through a
// balancer, all reach one server).
func (k *checker) askOn(ctx context.Context, hc *httpx.Client, s *Server) error {
	resp, err := hc.Get(ctx, httpx.Request{Ref: "/version", Accept: "application/json"})
	if err != nil {
		return fmt.Errorf("consistency: GET /version: %w", err)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		return &discovery.ResponseError{Path: "/version", ContentType: resp.Header.Get("Content-Type"), Err: err}
	}
	named, err := k.getAggregated(ctx, hc, "/apis", true)
	if err != nil {
		return err
	}
	core, err := k.getAggregated(ctx, hc, "/api", true)
	if err != nil {
		return err
	}
	now := k.o.clock.Now()
	view, err := discovery.NewSnapshot(core, named, now)
	if err != nil {
		return err
	}
	// Its merged view names what it serves through its peers.
	merged, err := k.getAggregated(ctx, hc, "/apis", false)
	if err != nil {
		return err
	}
	var fromPeers []schema.GroupVersionResource
	if merged.ETag != named.ETag {
		all, err := discovery.NewSnapshot(core, merged, now)
		if err != nil {
			return err
		}
		fromPeers = missingFrom(all, view)
	}
	s.Version, s.View, s.ETag, s.FromPeers = v.GitVersion, view, named.ETag, fromPeers
	return nil
}

// getAggregated reads one aggregated discovery document through hc: the
// server's own (profile=nopeer) or the merged one. Anything else (legacy
// discovery) is an error.
func (k *checker) getAggregated(ctx context.Context, hc *httpx.Client, path string, own bool) (discovery.Document, error) {
	profile := ""
	if own {
		profile = "nopeer"
	}
	resp, err := hc.Get(ctx, httpx.Request{Ref: path, Accept: surface.Source{Format: surface.FormatAggregatedV2}.MediaType(profile)})
	if err != nil {
		return discovery.Document{}, fmt.Errorf("consistency: GET %s: %w", path, err)
	}
	ct := resp.Header.Get("Content-Type")
	if _, err := surface.SourceOf(ct); err != nil {
		return discovery.Document{}, &discovery.ResponseError{Path: path, ContentType: ct, Err: err}
	}
	return discovery.Document{Body: resp.Body, ContentType: ct, ETag: resp.Header.Get("ETag")}, nil
}

// sampleThroughURL asks through the client's URL, each sample on a new
// connection, until as many more servers as want were told apart (or
// samples ran out; with want <= 0, the cluster named none, and every
// sample is spent). A sample matches a server of the same version and
// views; one that matches none is a server of its own, given the
// identity of the only lease left unreached, if there is exactly one. It
// returns how many samples were answered by a server asked directly (as
// far as version and views tell).
func (k *checker) sampleThroughURL(ctx context.Context, out *Report, samples, want int) (matchedDirect int) {
	found := 0
	for range samples {
		if want > 0 && found >= want {
			break
		}
		hc, done := k.sampleClient()
		var s Server
		err := k.askOn(ctx, hc, &s)
		done()
		out.Samples++
		if err != nil {
			if ctx.Err() != nil {
				return matchedDirect
			}
			continue
		}
		// A server asked directly first: it is known for sure.
		same := func(r Server) bool {
			return r.View != nil && r.Version == s.Version && viewKey(r.View) == viewKey(s.View)
		}
		i := slices.IndexFunc(out.Servers, func(r Server) bool { return r.Address != "" && same(r) })
		if i >= 0 {
			matchedDirect++
		} else {
			i = slices.IndexFunc(out.Servers, same)
		}
		if i >= 0 {
			out.Servers[i].Samples++
			continue
		}
		found++
		s.Samples, s.Alive = 1, true
		var unreached []int
		for i, r := range out.Servers {
			if r.View == nil && r.Alive {
				unreached = append(unreached, i)
			}
		}
		if len(unreached) == 1 {
			r := &out.Servers[unreached[0]]
			r.Version, r.View, r.ETag, r.Samples, r.Address, r.Err = s.Version, s.View, s.ETag, 1, "", nil
			continue
		}
		out.Servers = append(out.Servers, s)
	}
	return matchedDirect
}
