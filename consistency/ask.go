package consistency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// directTimeout bounds asking one server directly: an address that is not
// routable from here must not hold the check for a TCP timeout.
const directTimeout = 10 * time.Second

// askDirectly reads a server's own view and version at its address.
func (k *checker) askDirectly(ctx context.Context, s *Server) error {
	ctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	hc, err := k.directClient(s.Address)
	if err != nil {
		return err
	}
	defer utilnet.CloseIdleConnectionsFor(hc.HC.Transport)
	return k.askOn(ctx, hc, s)
}

// directClient is an HTTP client for the API server at address (host:port,
// as its lease or the EndpointSlice names it) with the credentials of the
// config the client was built from: whom the user's credentials go to is
// decided here, and only here. The server's certificate is checked for the
// name the client knows the cluster by (when that is a name, not an IP).
func (k *checker) directClient(address string) (*httpx.Client, error) {
	cfg := rest.CopyConfig(k.cfg)
	host := k.url.Base.Hostname()
	cfg.Host = k.url.Base.Scheme + "://" + address
	if cfg.TLSClientConfig.ServerName == "" && net.ParseIP(host) == nil {
		cfg.TLSClientConfig.ServerName = host
	}
	_, hc, base, err := httpx.FromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("consistency: a client for %s: %w", address, err)
	}
	direct := httpx.NewClient(hc, base, discovery.DefaultMaxRedirects)
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
			c := *k.url
			c.HC = httpx.WithRedirectPolicy(&http.Client{Transport: own.Transport, Timeout: own.Timeout}, discovery.DefaultMaxRedirects)
			return &c, func() { utilnet.CloseIdleConnectionsFor(own.Transport) }
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
	resp, err := hc.Get(ctx, httpx.Request{Ref: path, Accept: mediatype.Aggregated("v2", false, profile)})
	if err != nil {
		return discovery.Document{}, fmt.Errorf("consistency: GET %s: %w", path, err)
	}
	ct := resp.Header.Get("Content-Type")
	mt, err := mediatype.ParseDiscovery(ct)
	if err == nil && !mt.Aggregated {
		err = errors.New("not aggregated discovery: the server is older than 1.26, or it is off")
	}
	if err != nil {
		return discovery.Document{}, &discovery.ResponseError{Path: path, ContentType: ct, Err: err}
	}
	return discovery.Document{Body: resp.Body, ContentType: ct, ETag: resp.Header.Get("ETag")}, nil
}

// sampleThroughURL asks through the client's URL, each sample on a new
// connection, until as many more servers as want were told apart (or
// samples ran out; with want <= 0, the cluster named none, and every
// sample is spent). A sample matches a server of the same version and
// views; one that matches none is a server of its own, given the
// identity of the only lease left unreached, if there is exactly one.
func (k *checker) sampleThroughURL(ctx context.Context, out *Report, samples, want int) {
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
				return
			}
			continue
		}
		if i := slices.IndexFunc(out.Servers, func(r Server) bool {
			return r.View != nil && r.Version == s.Version && viewKey(r.View) == viewKey(s.View)
		}); i >= 0 {
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
}
