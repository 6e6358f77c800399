package consistency

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// Certainty says how sure a check is that it saw every API server.
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
	// EveryAnsweringServerSeen: some servers the cluster names (live
	// identity leases) could not be asked at their addresses nor told
	// apart through the URL (Server.Err says why: no answer, a
	// certificate not valid for the client's host, an address another
	// lease names too), but at least one server was asked directly, and
	// every sample through the URL (all WithSamples of them) was answered
	// by a server of the version and views of one asked directly, each of
	// those reached at least once. So the servers that serve this URL's
	// clients were seen, as surely as the samples can tell; the others
	// serve nobody through it now: a server that is down with its lease
	// still current (a lease lasts an hour), unreachable from here, or a
	// lease that names no server at all, as anyone who may write Leases in
	// kube-system can make. What it cannot rule out: a balancer that gives
	// every new connection from here to the same few servers. The servers
	// that did not answer were not seen, so the Verdict is Unknown where
	// those seen agree.
	EveryAnsweringServerSeen
	// NotEveryServerSeen: fewer servers were told apart than the cluster
	// names (servers alike in version and discovery cannot be told apart
	// through a balancer), or the cluster names none (its identity leases
	// could not be read), so a server that disagrees may have been missed:
	// the Verdict is Unknown unless what was seen differs.
	NotEveryServerSeen
)

func (c Certainty) String() string {
	switch c {
	case EveryServerAsked:
		return "every server asked directly"
	case EveryServerSampled:
		return "every server reached through the URL"
	case EveryAnsweringServerSeen:
		return "every server that answers seen"
	case NotEveryServerSeen:
		return "not every server seen"
	}
	return fmt.Sprintf("Certainty(%d)", int(c))
}

// Server is one API server as a check saw it.
type Server struct {
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
	// kubernetes EndpointSlice), its certificate valid for the client's
	// host; "" when it was reached only through the client's URL, or not
	// at all (Err then says at which address it was not, and why).
	Address string
	// Vouched: Address is one the kubernetes EndpointSlice in default
	// lists (which only API servers write), so it was asked with the
	// client's credentials; at any other address a lease names, the
	// server was asked without any.
	Vouched bool
	// Version is its /version gitVersion, when it was reached.
	Version string
	// ETag is its own /apis document's (profile=nopeer, KEP-4020); View
	// is its own discovery, /api and /apis. Both are empty when it was not
	// reached.
	ETag string
	View *discovery.Snapshot
	// FromPeers lists what this server's merged view (peer-aggregated
	// discovery, KEP-4020) serves that its own view does not: requests for
	// those reach it and are proxied to a peer, which serves what this
	// server does not (the Verdict is Inconsistent). Empty where its
	// merged view serves nothing more than its own: where peer
	// aggregation is on, no peer serves a resource this server does not,
	// though a peer may serve fewer (or peer aggregation is off, and the
	// two views are one).
	FromPeers []schema.GroupVersionResource
	// Samples counts the requests through the client's URL that reached
	// it (told apart by version and discovery).
	Samples int
	// Err is why it could not be asked.
	Err error
}

// Name is how the report names the server: its hostname, its identity,
// its address, or the version and discovery it was seen with.
func (s *Server) Name() string {
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
	ServedBy     []string // server names (Server.Name)
	MissingFrom  []string
}

// StorageVersionDisagreement is a resource whose API servers encode it in
// different versions (the StorageVersion API): a storage migration must
// wait for them to agree.
type StorageVersionDisagreement struct {
	Resource  schema.GroupResource
	Encodings map[string]string // server name -> encoding version
}

// Report is what Check found; its Verdict says whether the servers agree.
type Report struct {
	Servers     []Server
	Differences []Difference
	// StorageVersionAPI: the cluster serves internal.apiserver.k8s.io
	// StorageVersions (a feature gate), and StorageVersions lists the
	// resources its servers disagree on.
	StorageVersionAPI bool
	StorageVersions   []StorageVersionDisagreement
	// MergedETag is the /apis ETag of the client's URL's merged view (the
	// servers' views joined by peer-aggregated discovery, where it is on).
	MergedETag string
	// Certainty says whether every live server was seen, which a
	// Consistent verdict needs.
	Certainty Certainty
	// Samples counts the requests through the client's URL the check
	// needed to reach the servers it could not ask directly.
	Samples int
	// NotAskedDirectly says why no server was asked at the address the
	// cluster names for it when the check would otherwise have (not
	// WithURLOnly, a client with a rest.Config): it wraps
	// ErrNotAskedDirectly. Nothing verifies who answers there over plain
	// http or with TLS verification off, and the client carries
	// credentials; or its rest.Config's own Transport, or a proxy, would
	// not take requests to those addresses. The servers were sampled
	// through the URL instead.
	NotAskedDirectly error
}

// Verdict is what a check tells of the API servers: that they serve the
// same discovery, that they do not, or that it cannot tell. The zero value
// is Unknown.
type Verdict int

const (
	// Unknown: no server was seen to disagree, but not every live API
	// server the cluster names was seen (Certainty EveryAnsweringServerSeen
	// or NotEveryServerSeen), or none was. A server seen whose merged view
	// is its own (Server.FromPeers empty) shows, where peer-aggregated
	// discovery is on, that no peer serves what it does not; not that its
	// peers serve all it does, so that is no proof that they agree.
	Unknown Verdict = iota
	// Consistent: every live API server the cluster names was seen
	// (Certainty EveryServerAsked or EveryServerSampled), each serves the
	// same discovery and gets nothing from its peers that it does not
	// serve itself, and, where the StorageVersion API is served, every
	// resource is encoded in one version.
	Consistent
	// Inconsistent: servers were seen to disagree: two serve different
	// discovery (Differences), one's merged view serves what its own does
	// not (Server.FromPeers: a peer serves it, which the server's own
	// answers show, whether or not that peer was asked), or, where the
	// StorageVersion API is served, they encode a resource in different
	// versions (StorageVersions). However few servers were seen: what was
	// seen to differ differs.
	Inconsistent
)

func (v Verdict) String() string {
	switch v {
	case Unknown:
		return "unknown"
	case Consistent:
		return "consistent"
	case Inconsistent:
		return "inconsistent"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Verdict tells whether the API servers serve the same discovery, from
// what the check saw: never Consistent unless every live server was seen
// (see Consistent, Inconsistent and Unknown).
func (r *Report) Verdict() Verdict {
	var first [2]string
	seen := false
	for i := range r.Servers {
		s := &r.Servers[i]
		if s.View == nil {
			continue
		}
		if len(s.FromPeers) > 0 {
			return Inconsistent
		}
		k := viewKey(s.View)
		if !seen {
			first, seen = k, true
		} else if k != first {
			return Inconsistent
		}
	}
	switch {
	case len(r.StorageVersions) > 0:
		return Inconsistent
	case seen && (r.Certainty == EveryServerAsked || r.Certainty == EveryServerSampled):
		return Consistent
	}
	return Unknown
}

// Consistent is r.Verdict() == Consistent: every live API server was seen
// and they agree. False does not say that they disagree: the verdict may
// be Unknown.
func (r *Report) Consistent() bool { return r.Verdict() == Consistent }

// viewKey tells views apart by their documents' ETags, as the server's
// own view is told apart from another's: the same ETags, the same
// discovery.
func viewKey(s *discovery.Snapshot) [2]string {
	core, named := s.ETags()
	return [2]string{core, named}
}

// missingFrom lists the resources all serves that own does not.
func missingFrom(all, own *discovery.Snapshot) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, g := range all.Groups() {
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			ov, _ := own.Version(gv)
			for _, r := range v.Resources {
				if ov == nil || !slices.ContainsFunc(ov.Resources, func(x surface.Resource) bool { return x.Name == r.Name }) {
					out = append(out, gv.WithResource(r.Name))
				}
			}
		}
	}
	return out
}

// differences lists what not every reached server serves, in the order of
// the views joined: groups, versions and resources as the first view lists
// them, then those only later ones have (the order discovery's union of
// disagreeing servers' views serves them in).
func differences(servers []Server) []Difference {
	var views []*Server
	for i := range servers {
		if servers[i].View != nil {
			views = append(views, &servers[i])
		}
	}
	if len(views) < 2 {
		return nil
	}
	type version struct {
		name      string
		views     int            // that serve it
		resources []string       // in the order first seen
		servedBy  map[string]int // resource -> views that serve it
	}
	type group struct {
		name     string
		versions []*version
	}
	var groups []*group
	groupAt := map[string]*group{}
	for _, s := range views {
		for _, g := range s.View.Groups() {
			ug := groupAt[g.Name]
			if ug == nil {
				ug = &group{name: g.Name}
				groupAt[g.Name] = ug
				groups = append(groups, ug)
			}
			for _, v := range g.Versions {
				i := slices.IndexFunc(ug.versions, func(x *version) bool { return x.name == v.Version })
				if i < 0 {
					i = len(ug.versions)
					ug.versions = append(ug.versions, &version{name: v.Version, servedBy: map[string]int{}})
				}
				uv := ug.versions[i]
				uv.views++
				for _, r := range v.Resources {
					if _, seen := uv.servedBy[r.Name]; !seen {
						uv.resources = append(uv.resources, r.Name)
					}
					uv.servedBy[r.Name]++
				}
			}
		}
	}
	split := func(gv schema.GroupVersion, resource string) Difference {
		d := Difference{GroupVersion: gv, Resource: resource}
		for _, s := range views {
			v, ok := s.View.Version(gv)
			serves := ok && (resource == "" || slices.ContainsFunc(v.Resources, func(r surface.Resource) bool { return r.Name == resource }))
			if serves {
				d.ServedBy = append(d.ServedBy, s.Name())
			} else {
				d.MissingFrom = append(d.MissingFrom, s.Name())
			}
		}
		return d
	}
	var out []Difference
	for _, g := range groups {
		for _, v := range g.versions {
			gv := schema.GroupVersion{Group: g.name, Version: v.name}
			if v.views < len(views) {
				out = append(out, split(gv, ""))
			}
			for _, r := range v.resources {
				if v.servedBy[r] < len(views) {
					out = append(out, split(gv, r))
				}
			}
		}
	}
	return out
}
