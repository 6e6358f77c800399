package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/internal/httpx"
	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// Certainty says how sure a consistency check is that it saw every API
// server.
type Certainty int

const (
	// EveryServerAsked: every live API server the cluster names (its
	// identity leases) was asked directly, at its own address.
	EveryServerAsked Certainty = iota
	// EveryServerSampled: some servers were reached only through the
	// client's URL (a load balancer), on new connections, and as many
	// distinct servers (by version and discovery) were told apart as the
	// cluster names live ones.
	EveryServerSampled
	// NotEveryServerSeen: fewer servers were told apart than the cluster
	// names (servers alike in version and discovery cannot be told apart
	// through a balancer), or the cluster names none (its identity leases
	// could not be read), so a server that disagrees may have been missed.
	NotEveryServerSeen
)

func (c Certainty) String() string {
	switch c {
	case EveryServerAsked:
		return "every server asked directly"
	case EveryServerSampled:
		return "every server reached through the URL"
	case NotEveryServerSeen:
		return "not every server seen"
	}
	return fmt.Sprintf("Certainty(%d)", int(c))
}

// ServerReport is one API server as a consistency check saw it.
type ServerReport struct {
	// Identity is its identity lease's name (kube-system, label
	// apiserver.kubernetes.io/identity=kube-apiserver); "" for a server
	// seen only through the client's URL that could not be matched to one.
	Identity string
	// Hostname is the lease's kubernetes.io/hostname label.
	Hostname string
	// Alive: its lease was renewed within its duration (a server seen
	// answering without a lease counts as alive).
	Alive bool
	// Address is where it was asked directly (the lease's
	// kubernetes.io/peer-advertise-address, or an address of the
	// kubernetes EndpointSlice); "" when it was reached only through the
	// client's URL, or not at all.
	Address string
	// Version is its /version gitVersion, when it was reached.
	Version string
	// ETag is its own /apis document's (profile=nopeer, KEP-4020); View
	// is its own discovery, /api and /apis. Both are empty when it was not
	// reached.
	ETag string
	View *Snapshot
	// FromPeers lists what this server's merged view (peer-aggregated
	// discovery, KEP-4020) serves that its own view does not: requests for
	// those reach it and are proxied to a peer.
	FromPeers []schema.GroupVersionResource
	// Samples counts the requests through the client's URL that reached
	// it (told apart by version and discovery).
	Samples int
	// Err is why it could not be asked.
	Err error
}

// Name is how the report names the server: its hostname, its identity,
// its address, or the version and discovery it was seen with.
func (s *ServerReport) Name() string {
	switch {
	case s.Hostname != "":
		return s.Hostname
	case s.Identity != "":
		return s.Identity
	case s.Address != "":
		return s.Address
	}
	etag := strings.Trim(s.ETag, `"`)
	return fmt.Sprintf("unnamed %s (discovery %.8s)", s.Version, etag)
}

// Difference is a group-version, or one of its resources, that not every
// reached server serves.
type Difference struct {
	GroupVersion schema.GroupVersion
	Resource     string   // "" for the whole group-version
	ServedBy     []string // server names (ServerReport.Name)
	MissingFrom  []string
}

// StorageVersionDisagreement is a resource whose API servers encode it in
// different versions (the StorageVersion API): a storage migration must
// wait for them to agree.
type StorageVersionDisagreement struct {
	Resource  schema.GroupResource
	Encodings map[string]string // server name -> encoding version
}

// Consistency is what CheckConsistency found.
type Consistency struct {
	Servers     []ServerReport
	Differences []Difference
	// StorageVersionAPI: the cluster serves internal.apiserver.k8s.io
	// StorageVersions (a feature gate), and StorageVersions lists the
	// resources its servers disagree on.
	StorageVersionAPI bool
	StorageVersions   []StorageVersionDisagreement
	// MergedETag is the /apis ETag of the client's URL's merged view (the
	// servers' views joined by peer-aggregated discovery, where it is on).
	MergedETag string
	Certainty  Certainty
	// Samples counts the requests through the client's URL the check
	// needed to reach the servers it could not ask directly.
	Samples int
}

// Consistent is true when every reached server serves the same discovery
// (its own view's documents have the same ETags) and, where the
// StorageVersion API is served, encodes every resource in one version.
// Certainty says whether a server may have been missed.
func (c *Consistency) Consistent() bool {
	var first [2]string
	for i := range c.Servers {
		s := &c.Servers[i]
		if s.View == nil {
			continue
		}
		k := viewKey(s.View.content)
		if first == [2]string{} {
			first = k
		} else if k != first {
			return false
		}
	}
	return len(c.StorageVersions) == 0
}

// ConsistencyOption configures CheckConsistency.
type ConsistencyOption func(*consistencyOptions) error

type consistencyOptions struct {
	samples    int
	throughURL bool
}

// DefaultConsistencySamples is how many requests through the client's URL
// CheckConsistency sends at most.
const DefaultConsistencySamples = 16

// WithSamples bounds the requests (each on a new connection) sent through
// the client's URL to reach servers that cannot be asked directly.
// Default: DefaultConsistencySamples (16).
func WithSamples(n int) ConsistencyOption {
	return func(o *consistencyOptions) error {
		if n < 1 {
			return fmt.Errorf("discovery: CheckConsistency needs at least one sample, got %d", n)
		}
		o.samples = n
		return nil
	}
}

// ThroughURLOnly asks only through the client's URL, as from outside the
// cluster's network where the servers' own addresses cannot be reached.
// Default: each server is asked directly where its address is known.
func ThroughURLOnly() ConsistencyOption {
	return func(o *consistencyOptions) error { o.throughURL = true; return nil }
}

// CheckConsistency tells whether the API servers of the client's cluster
// serve the same discovery, as coordinated discovery was proposed to
// (during an upgrade they do not), from what the cluster tells about
// itself:
//   - its identity leases say how many API servers there are and which
//     are alive, and where each can be reached (the peer-advertise
//     address); the kubernetes EndpointSlice gives addresses where leases
//     give none;
//   - each server reached directly is asked for its /version, its own
//     view (/api and /apis with profile=nopeer, KEP-4020) and its merged
//     /apis, which, where it differs, names what only a peer serves;
//   - servers that cannot be reached directly (no address, an address not
//     routable from here, a client built without a rest.Config, or
//     ThroughURLOnly) are sampled through the client's URL on new
//     connections, /version and discovery on one connection, and told
//     apart by version and views, up to WithSamples requests;
//   - where the StorageVersion API is served, whether the servers encode
//     each resource in one version.
//
// Direct requests carry the client's credentials to the leases' addresses
// (the cluster's own API servers), verifying their certificates for the
// client's host name. It needs aggregated discovery (1.26+); a server
// without it is an error.
func (c *Client) CheckConsistency(ctx context.Context, opts ...ConsistencyOption) (*Consistency, error) {
	o := consistencyOptions{samples: DefaultConsistencySamples}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	servers, leasesErr := c.identityLeases(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	out := &Consistency{Servers: servers}
	// Servers are asked at their own addresses only with the client's
	// rest.Config and no path prefix (a fleet proxy's URL).
	direct := !o.throughURL && c.config != nil && c.http.Base.Path == ""
	if leasesErr == nil && direct {
		c.addEndpointSliceAddresses(ctx, out)
	}

	// The merged /apis through the URL, which every server answers alike
	// when peer aggregation is on.
	merged, err := c.getAggregated(ctx, c.http, "/apis", false)
	if err != nil {
		return nil, err
	}
	out.MergedETag = merged.etag

	// Each server with an address, directly.
	reached := 0
	live := 0
	for i := range out.Servers {
		s := &out.Servers[i]
		if s.Alive {
			live++
		}
		if !s.Alive || !direct || s.Address == "" {
			s.Address = ""
			continue
		}
		if err := c.askDirectly(ctx, s); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.Err, s.Address = err, ""
			continue
		}
		reached++
	}

	// The rest through the URL.
	if reached < live || leasesErr != nil {
		c.sampleThroughURL(ctx, out, o.samples, live-reached)
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
	c.storageVersions(ctx, out)

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
	default:
		out.Certainty = NotEveryServerSeen
	}
	return out, nil
}

var (
	errLeaseExpired = errors.New("its identity lease has expired: the server is gone, or cannot renew it")
	errNotTold      = errors.New("not reached directly, and not told apart from the servers seen through the URL")
)

// directTimeout bounds asking one server directly: an address that is not
// routable from here must not hold the check for a TCP timeout.
const directTimeout = 10 * time.Second

// identityLeases lists the API servers' identity leases, as what each
// says of its server. The types are written out here, not imported
// (k8s.io/api/coordination/v1 would do), because a few fields are all that
// is read.
func (c *Client) identityLeases(ctx context.Context) ([]ServerReport, error) {
	resp, err := c.get(ctx, httpx.Request{Ref: "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=" + url.QueryEscape("apiserver.kubernetes.io/identity=kube-apiserver"), Accept: "application/json"})
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name        string            `json:"name"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				RenewTime            *time.Time `json:"renewTime"`
				LeaseDurationSeconds *int32     `json:"leaseDurationSeconds"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		return nil, fmt.Errorf("discovery: identity leases: %w", err)
	}
	now := c.opts.clock.Now()
	var out []ServerReport
	for _, it := range list.Items {
		s := ServerReport{Identity: it.Metadata.Name, Hostname: it.Metadata.Labels["kubernetes.io/hostname"], Address: it.Metadata.Annotations["kubernetes.io/peer-advertise-address"]}
		if r, d := it.Spec.RenewTime, it.Spec.LeaseDurationSeconds; r != nil && d != nil {
			s.Alive = now.Before(r.Add(time.Duration(*d) * time.Second))
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ServerReport) int { return strings.Compare(a.Hostname+a.Identity, b.Hostname+b.Identity) })
	return out, nil
}

// addEndpointSliceAddresses gives servers without an address one of the
// kubernetes Service's EndpointSlice, when exactly one server lacks one and
// exactly one address is not some lease's (an EndpointSlice does not say
// which server an address is).
func (c *Client) addEndpointSliceAddresses(ctx context.Context, out *Consistency) {
	var without []int
	known := map[string]bool{}
	for i, s := range out.Servers {
		if s.Address == "" {
			without = append(without, i)
		} else {
			known[s.Address] = true
		}
	}
	if len(without) != 1 {
		return
	}
	resp, err := c.get(ctx, httpx.Request{Ref: "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=" + url.QueryEscape("kubernetes.io/service-name=kubernetes"), Accept: "application/json"})
	if err != nil {
		return
	}
	var list struct {
		Items []struct {
			Endpoints []struct {
				Addresses []string `json:"addresses"`
			} `json:"endpoints"`
			Ports []struct {
				Name string `json:"name"`
				Port int    `json:"port"`
			} `json:"ports"`
		} `json:"items"`
	}
	if json.Unmarshal(resp.Body, &list) != nil {
		return
	}
	var unknown []string
	for _, it := range list.Items {
		for _, p := range it.Ports {
			if p.Name != "https" {
				continue
			}
			for _, e := range it.Endpoints {
				for _, a := range e.Addresses {
					if addr := net.JoinHostPort(a, fmt.Sprint(p.Port)); !known[addr] {
						unknown = append(unknown, addr)
					}
				}
			}
		}
	}
	if len(unknown) == 1 {
		out.Servers[without[0]].Address = unknown[0]
	}
}

// askDirectly reads a server's own view and version at its address.
func (c *Client) askDirectly(ctx context.Context, s *ServerReport) error {
	ctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	cfg := rest.CopyConfig(c.config)
	host := c.http.Base.Hostname()
	cfg.Host = c.http.Base.Scheme + "://" + s.Address
	if cfg.TLSClientConfig.ServerName == "" && net.ParseIP(host) == nil {
		// The server's certificate is checked for the name the client
		// knows the cluster by.
		cfg.TLSClientConfig.ServerName = host
	}
	_, hc, _, err := httpx.FromConfig(cfg)
	if err != nil {
		return err
	}
	defer utilnet.CloseIdleConnectionsFor(hc.Transport)
	base, err := httpx.ParseBase(cfg.Host)
	if err != nil {
		return err
	}
	hc.Transport = countingTransport{next: hc.Transport, n: &c.stats.requests}
	direct := httpx.NewClient(hc, base, DefaultMaxRedirects)
	direct.Body, direct.MaxRetries = c.http.Body, c.http.MaxRetries
	return c.askOn(ctx, direct, s)
}

// askOn reads a server's version and own view through hc, one request
// after the other (so that on a new connection through a balancer, all
// reach one server).
func (c *Client) askOn(ctx context.Context, hc *httpx.Client, s *ServerReport) error {
	resp, err := hc.Get(ctx, httpx.Request{Ref: "/version", Accept: "application/json"})
	if err != nil {
		return fmt.Errorf("discovery: GET /version: %w", err)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		return &ResponseError{Path: "/version", ContentType: resp.Header.Get("Content-Type"), Err: err}
	}
	view, err := c.viewThrough(ctx, hc)
	if err != nil {
		return err
	}
	// Its merged view names what it serves through its peers.
	merged, err := c.getAggregated(ctx, hc, "/apis", false)
	if err != nil {
		return err
	}
	var fromPeers []schema.GroupVersionResource
	if merged.etag != view.named.etag {
		fromPeers = missingFrom(&Snapshot{content: newContent(view.core, *merged)}, view)
	}
	s.Version, s.View, s.ETag, s.FromPeers = v.GitVersion, view, view.named.etag, fromPeers
	return nil
}

// viewThrough reads a server's own view through hc: /apis then /api with
// profile=nopeer.
func (c *Client) viewThrough(ctx context.Context, hc *httpx.Client) (*Snapshot, error) {
	named, err := c.getAggregated(ctx, hc, "/apis", true)
	if err != nil {
		return nil, err
	}
	core, err := c.getAggregated(ctx, hc, "/api", true)
	if err != nil {
		return nil, err
	}
	return &Snapshot{content: newContent(*core, *named), fetched: c.opts.clock.Now()}, nil
}

// getAggregated reads one aggregated discovery document through hc: the
// server's own (profile=nopeer) or the merged one. Anything else (legacy
// discovery) is an error.
func (c *Client) getAggregated(ctx context.Context, hc *httpx.Client, path string, own bool) (*part, error) {
	profile := ""
	if own {
		profile = "nopeer"
	}
	resp, err := hc.Get(ctx, httpx.Request{Ref: path, Accept: mediatype.Aggregated("v2", false, profile)})
	if resp != nil {
		c.stats.bytes.Add(resp.Wire)
	}
	if err != nil {
		return nil, fmt.Errorf("discovery: consistency: GET %s: %w", path, err)
	}
	ct := resp.Header.Get("Content-Type")
	mt, err := mediatype.ParseDiscovery(ct)
	if err == nil && !mt.Aggregated {
		err = errors.New("not aggregated discovery: the server is older than 1.26, or it is off")
	}
	if err != nil {
		return nil, &ResponseError{Path: path, ContentType: ct, Err: err}
	}
	p, err := aggregatedPart(resp.Body, mt, resp.Header.Get("ETag"), false)
	if err != nil {
		return nil, &ResponseError{Path: path, ContentType: ct, Err: err}
	}
	return p, nil
}

// sampleThroughURL asks through the client's URL, each sample on a new
// connection, until as many more servers as want were told apart (or
// samples ran out; with want <= 0, the cluster named none, and every
// sample is spent). A sample matches a server of the same version and
// views; one that matches none is a server of its own, given the
// identity of the only lease left unreached, if there is exactly one.
func (c *Client) sampleThroughURL(ctx context.Context, out *Consistency, samples, want int) {
	found := 0
	for range samples {
		if want > 0 && found >= want {
			break
		}
		hc := c.sampleClient()
		var s ServerReport
		err := c.askOn(ctx, hc, &s)
		out.Samples++
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		if i := slices.IndexFunc(out.Servers, func(r ServerReport) bool {
			return r.View != nil && r.Version == s.Version && viewKey(r.View.content) == viewKey(s.View.content)
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

// sampleClient is an HTTP client whose next request opens a new
// connection: with a rest.Config, a transport of its own for this sample
// (a config with a Dial is never shared by client-go's transport cache);
// otherwise the client's own, its idle connections closed first.
func (c *Client) sampleClient() *httpx.Client {
	if c.config != nil {
		if own, err := c.ownTransportClient(); err == nil {
			return own
		}
	}
	utilnet.CloseIdleConnectionsFor(c.http.HC.Transport)
	return c.http
}

// missingFrom lists the resources all serves that own does not.
func missingFrom(all, own *Snapshot) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, g := range all.groups {
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			ov, _ := own.Version(gv)
			for _, r := range v.Resources {
				if ov == nil || !slices.ContainsFunc(ov.Resources, func(x Resource) bool { return x.Name == r.Name }) {
					out = append(out, gv.WithResource(r.Name))
				}
			}
		}
	}
	return out
}

// differences lists what not every reached server serves.
func differences(servers []ServerReport) []Difference {
	var views []*ServerReport
	for i := range servers {
		if servers[i].View != nil {
			views = append(views, &servers[i])
		}
	}
	if len(views) < 2 {
		return nil
	}
	var contents []*content
	for _, s := range views {
		contents = append(contents, s.View.content)
	}
	u := unionContent(contents, nil)
	var out []Difference
	split := func(gv schema.GroupVersion, resource string) Difference {
		d := Difference{GroupVersion: gv, Resource: resource}
		for _, s := range views {
			v, ok := s.View.Version(gv)
			serves := ok && (resource == "" || slices.ContainsFunc(v.Resources, func(r Resource) bool { return r.Name == resource }))
			if serves {
				d.ServedBy = append(d.ServedBy, s.Name())
			} else {
				d.MissingFrom = append(d.MissingFrom, s.Name())
			}
		}
		return d
	}
	for _, g := range u.groups {
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			if u.partialVersions[gv] {
				out = append(out, split(gv, ""))
			}
			for _, r := range v.Resources {
				if u.partialResources[gv.WithResource(r.Name)] {
					out = append(out, split(gv, r.Name))
				}
			}
		}
	}
	return out
}

// storageVersions reads the StorageVersion API, where it is served, and
// lists the resources whose servers encode them in different versions.
func (c *Client) storageVersions(ctx context.Context, out *Consistency) {
	resp, err := c.get(ctx, httpx.Request{Ref: "/apis/internal.apiserver.k8s.io/v1alpha1/storageversions", Accept: "application/json"})
	if err != nil {
		return // 404: not served (a feature gate); 403: not ours to read
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"` // group.resource ("apps.deployments", "pods" for core)
			} `json:"metadata"`
			Status struct {
				StorageVersions []struct {
					APIServerID     string `json:"apiServerID"`
					EncodingVersion string `json:"encodingVersion"`
				} `json:"storageVersions"`
			} `json:"status"`
		} `json:"items"`
	}
	if json.Unmarshal(resp.Body, &list) != nil {
		return
	}
	out.StorageVersionAPI = true
	names := map[string]string{}
	for _, s := range out.Servers {
		if s.Identity != "" {
			names[s.Identity] = s.Name()
		}
	}
	for _, it := range list.Items {
		enc := map[string]string{}
		distinct := map[string]bool{}
		for _, sv := range it.Status.StorageVersions {
			name := names[sv.APIServerID]
			if name == "" {
				name = sv.APIServerID
			}
			enc[name] = sv.EncodingVersion
			distinct[sv.EncodingVersion] = true
		}
		if len(distinct) > 1 {
			out.StorageVersions = append(out.StorageVersions, StorageVersionDisagreement{Resource: storageVersionResource(it.Metadata.Name), Encodings: enc})
		}
	}
}

// storageVersionResource reads a StorageVersion's name, the group and
// the resource joined by a dot, the core group written "core"
// ("apps.deployments", "core.pods").
func storageVersionResource(name string) schema.GroupResource {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return schema.GroupResource{Resource: name}
	}
	group := name[:i]
	if group == "core" {
		group = ""
	}
	return schema.GroupResource{Group: group, Resource: name[i+1:]}
}
