package consistency

import (
	"context"
	"errors"
	"fmt"
	"net"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
	"github.com/kubeatlas/kubeatlas/internal/optset"
)

// DefaultSamples is how many requests through the client's URL Check sends
// at most.
const DefaultSamples = 16

// Option configures Check.
type Option func(*options) error

type options struct {
	samples    int
	throughURL bool
	clock      clock.PassiveClock
	apiServers []string // vouched for by the caller (WithAPIServers)

	given optset.Given // the options given, by name (named)
}

// named is the option name, which may be given once (optset).
func named(name string, set func(*options) error) Option {
	return optset.Named("consistency", name, func(o *options) *optset.Given { return &o.given }, set)
}

// WithSamples bounds the requests (each on a new connection) sent through
// the client's URL to reach servers that cannot be asked directly.
// Default: DefaultSamples (16).
func WithSamples(n int) Option {
	return named("WithSamples", func(o *options) error {
		if n < 1 {
			return fmt.Errorf("consistency: at least one sample is needed, got %d", n)
		}
		o.samples = n
		return nil
	})
}

// WithURLOnly asks only through the client's URL, as from outside the
// cluster's network where the servers' own addresses cannot be reached.
// Default: each server is asked directly where its address is known.
func WithURLOnly() Option {
	return named("WithURLOnly", func(o *options) error { o.throughURL = true; return nil })
}

// WithAPIServers vouches for addresses (host:port) as the cluster's API
// servers, beside those the kubernetes EndpointSlices in default list: the
// client's credentials go to a server asked there, as to a listed one.
// It is for an operator who knows the control plane's addresses where the
// EndpointSlices cannot say them (a control plane on loopback, which
// EndpointSlices may not list; one whose slices the user may not read);
// the vouching is the caller's, never a Lease's. Default: none.
func WithAPIServers(addresses ...string) Option {
	return named("WithAPIServers", func(o *options) error {
		for _, a := range addresses {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("consistency: WithAPIServers(%q): want host:port: %w", a, err)
			}
			o.apiServers = append(o.apiServers, normalAddress(a))
		}
		return nil
	})
}

// WithClock sets the clock that identity leases are judged alive by, and
// that the servers' views are timed with. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return named("WithClock", func(o *options) error {
		if c == nil {
			return errors.New("consistency: nil clock")
		}
		o.clock = c
		return nil
	})
}

// Check tells whether the API servers of c's cluster serve the same
// discovery, as coordinated discovery was proposed to (during an upgrade
// they do not), from what the cluster tells about itself:
//   - its identity leases say how many API servers there are and which
//     are alive, and where each can be reached (the peer-advertise
//     address); the kubernetes EndpointSlice gives addresses where leases
//     give none;
//   - each server reached directly is asked for its /version, its own
//     view (/api and /apis with profile=nopeer, KEP-4020) and its merged
//     /apis, which, where it differs, names what only a peer serves;
//   - servers that cannot be reached directly (no address, an address not
//     routable from here or named by two leases, a certificate not valid
//     for the client's host, a client without a rest.Config
//     (discovery.Client.Config), or WithURLOnly) are sampled through
//     the client's URL on new connections, /version and discovery on one
//     connection, and told apart by version and views, up to WithSamples
//     requests;
//   - where the StorageVersion API is served, whether the servers encode
//     each resource in one version.
//
// The Report's Verdict is Consistent only when every live server was seen
// and they agree, Inconsistent when what was seen differs (a server's
// merged view serving more than its own shows a peer that serves more,
// whether or not that peer could be asked), and Unknown otherwise.
//
// Direct requests are the client's requests to its URL, dialed to the
// servers' addresses: their certificates are verified for the client's
// host name (an IP address or not) before any credential is sent, the
// client's credentials go only to the addresses the kubernetes
// EndpointSlice lists (elsewhere a server is asked without any), and a
// client with credentials that cannot verify them (plain http, TLS
// verification off) asks nobody directly (see the package documentation,
// and Report.NotAskedDirectly). Every server is asked at once, under one
// 10 s deadline. It needs aggregated discovery (1.26+); a server without
// it is an error.
//
// Check uses none of c's snapshots, and its requests are not c's: only
// those through c's URL are counted in c.Stats().Requests. Responses are
// read within 64 MiB (discovery's default), and requests answered 429
// or 5xx with Retry-After are retried up to 5 times, whatever c's own
// options.
func Check(ctx context.Context, c *discovery.Client, opts ...Option) (*Report, error) {
	o := options{samples: DefaultSamples, clock: clock.RealClock{}}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	k, err := newChecker(c, o)
	if err != nil {
		return nil, err
	}
	return k.check(ctx)
}

// checker is one Check: how it reaches the cluster, and its options.
type checker struct {
	o options
	// url sends requests to the client's URL, through its HTTP client.
	url *httpx.Client
	// cfg is the config the client was built from, with which servers
	// are asked at their own addresses; nil when there is none.
	cfg *rest.Config
}

func newChecker(c *discovery.Client, o options) (*checker, error) {
	hc, connCfg := c.Connection()
	base, _, err := rest.DefaultServerUrlFor(connCfg)
	if err != nil {
		return nil, fmt.Errorf("consistency: %w", err)
	}
	url := httpx.NewClient(hc, base, httpx.DefaultMaxRedirects)
	url.Gzip = !connCfg.DisableCompression
	url.MaxRetries = httpx.DefaultMaxRetries
	url.Body = httpx.Options{Limit: httpx.DefaultMaxResponseBytes}
	return &checker{o: o, url: url, cfg: c.Config()}, nil
}

var (
	errLeaseExpired = errors.New("its identity lease has expired: the server is gone, or cannot renew it")
	errNotTold      = errors.New("not reached directly, and not told apart from the servers seen through the URL")
)

func (k *checker) check(ctx context.Context) (*Report, error) {
	servers, leasesErr := k.identityLeases(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	out := &Report{Servers: servers}
	// Servers are asked at their own addresses only with the client's
	// rest.Config and no path prefix (a fleet proxy's URL), and only where
	// directConfig finds the client's credentials safe there.
	var direct *rest.Config
	if !k.o.throughURL && k.cfg != nil && k.url.Base.Path == "" {
		direct, out.NotAskedDirectly = k.directConfig()
	}
	var apiServers []string
	if direct != nil {
		apiServers = k.apiServerAddresses(ctx)
		if leasesErr == nil {
			addEndpointSliceAddresses(out, apiServers)
		}
		apiServers = append(apiServers, k.o.apiServers...)
	}

	// The merged /apis through the URL, which every server answers alike
	// when peer aggregation is on.
	merged, err := k.getAggregated(ctx, k.url, "/apis", false)
	if err != nil {
		return nil, err
	}
	out.MergedETag = merged.ETag

	// Each server with an address, directly, all at once.
	live := 0
	for _, s := range out.Servers {
		if s.Alive {
			live++
		}
	}
	reached := k.askAllDirectly(ctx, out.Servers, direct, apiServers)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// The rest through the URL.
	matchedDirect := -1
	if reached < live || leasesErr != nil {
		matchedDirect = k.sampleThroughURL(ctx, out, k.o.samples, live-reached)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	for i := range out.Servers {
		s := &out.Servers[i]
		switch {
		case s.View != nil:
		case s.Err == nil && !s.Alive:
			s.Err = errLeaseExpired
		case s.Err == nil:
			s.Err = errNotTold
		}
	}
	out.Differences = differences(out.Servers)
	k.storageVersions(ctx, out)

	told := 0
	for i := range out.Servers {
		if out.Servers[i].View != nil {
			told++
		}
	}
	switch {
	case leasesErr == nil && reached >= live && live > 0:
		out.Certainty = EveryServerAsked
	case leasesErr == nil && told >= live && live > 0:
		out.Certainty = EveryServerSampled
	case leasesErr == nil && reached > 0 && matchedDirect == out.Samples && out.Samples == k.o.samples && everyDirectViewSampled(out.Servers):
		out.Certainty = EveryAnsweringServerSeen
	default:
		out.Certainty = NotEveryServerSeen
	}
	return out, nil
}

// everyDirectViewSampled tells whether the samples through the URL reached
// each version and view of the servers asked directly: the balancer gives
// new connections to each kind of server the check knows, not to one.
func everyDirectViewSampled(servers []Server) bool {
	type kind struct {
		version string
		view    [2]string
	}
	sampled := map[kind]bool{}
	for _, s := range servers {
		if s.View != nil && s.Address != "" {
			k := kind{s.Version, viewKey(s.View)}
			sampled[k] = sampled[k] || s.Samples > 0
		}
	}
	for _, ok := range sampled {
		if !ok {
			return false
		}
	}
	return len(sampled) > 0
}
