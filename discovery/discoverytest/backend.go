package discoverytest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	"k8s.io/kube-openapi/pkg/handler3"
)

// Backend is one API server behind the Server's URL. A Server has one
// backend unless it was built WithBackends; mutating one backend of several
// is how a test makes an HA cluster disagree with itself.
//
// Its methods are safe for concurrent use with each other and with requests.
type Backend struct {
	id      string
	gen     Generation
	codecs  runtime.NegotiatedSerializer
	version []byte
	changed func()     // tells the Server, so peer-aggregated views and the objects are rebuilt
	specs   *specCache // OpenAPI documents shared with a fleet's other Servers, or nil
	leases  *leaseStore
	url     atomic.Pointer[string] // set by Start before it serves

	// mu guards content and published. It is held only for in-memory work:
	// updating the real handlers' state, never for a request.
	mu        sync.Mutex
	content   *content
	published map[string]int // OpenAPI path -> revision handed to handler3
	logger    *slog.Logger   // WithLogger's

	api, apis aggregated.ResourceManager
	peer      aggregated.PeerAggregatedResourceManager
	legacy    atomic.Pointer[legacyView]
	openapi   *handler3.OpenAPIService
	handler   http.Handler
}

// newBackend builds backend id; gitVersion, if not empty, is what its
// /version says.
func newBackend(id string, gen Generation, gitVersion string, c *content, peers aggregated.PeerDiscoveryProvider, specs *specCache, logger *slog.Logger) (*Backend, error) {
	b := &Backend{
		id:        id,
		logger:    logger,
		specs:     specs,
		gen:       gen,
		codecs:    legacyCodecs(),
		content:   c,
		published: map[string]int{},
		api:       aggregated.NewResourceManager("api"),
		apis:      aggregated.NewResourceManager("apis"),
		openapi:   handler3.NewOpenAPIService(),
		changed:   func() {},
	}
	var err error
	if b.version, err = versionDocument(gen, gitVersion); err != nil {
		return nil, err
	}
	if peers != nil {
		// A real server's peer handler knows itself by its API server ID.
		b.peer = aggregated.NewPeerAggregatedDiscoveryHandler(identityLeaseName(id), b.apis, peers, "apis")
	}
	b.mu.Lock()
	lines := b.syncLocked()
	b.mu.Unlock()
	lines.to(b.logger)
	b.handler = b.routes()
	return b, nil
}

// ID names the backend in the request log. It is its hostname too, from
// which its identity lease is named (see LeaseName).
func (b *Backend) ID() string { return b.id }

// URL is the base URL of the backend alone: requests there are answered by
// this backend, with the Server's authentication, faults and request log,
// whatever the Server's routing. Start (or Server.ServeBackends) gives
// every backend one, its own listener; it is "" otherwise. Its
// host:port is the peer-advertise-address of the backend's identity lease.
func (b *Backend) URL() string {
	if u := b.url.Load(); u != nil {
		return *u
	}
	return ""
}

func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.handler.ServeHTTP(w, r) }

func (b *Backend) routes() http.Handler {
	legacy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.legacy.Load().ServeHTTP(w, r) })
	var peer http.Handler
	if b.peer != nil {
		peer = b.peer
	}
	api, apis := http.Handler(legacy), http.Handler(legacy)
	switch b.gen {
	case GenerationV2:
		api = aggregated.WrapAggregatedDiscoveryToHandler(legacy, b.api, nil)
		apis = aggregated.WrapAggregatedDiscoveryToHandler(legacy, b.apis, peer)
	case GenerationV2AndV2Beta1, GenerationV2Beta1:
		api = newOlderGeneration(b.gen, aggregated.WrapAggregatedDiscoveryToHandler(legacy, b.api, nil), b.api, legacy)
		apis = newOlderGeneration(b.gen, aggregated.WrapAggregatedDiscoveryToHandler(legacy, b.apis, nil), b.apis, legacy)
	}
	openapi := openAPIFront{svc: b.openapi, known: b.hasOpenAPIPath}

	mux := http.NewServeMux()
	mux.Handle("/api", api)
	mux.Handle("/api/{$}", api) // the real server serves /api/ like /api
	mux.Handle("/apis", apis)
	mux.Handle("/apis/{$}", legacy) // ... but /apis/ only as legacy discovery
	mux.Handle("/api/", legacy)
	mux.Handle("/apis/", legacy)
	mux.Handle("/openapi/v3", openapi)
	mux.Handle("/openapi/v3/", openapi)
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b.version)
	})
	return mux
}

func (b *Backend) hasOpenAPIPath(path string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.published[path]
	return ok
}

// syncLocked hands the content to the real handlers. Priorities go in
// before the groups so that the ResourceManager lists groups and versions in
// content order, which for the fixture is the real server's order. It
// returns what the handlers logged, for the caller to send to b.logger
// once it has unlocked b.mu.
func (b *Backend) syncLocked() *logged {
	c := b.content
	lines := handlerLog.collect(func() {
		publishGroups(b.api, []apidiscoveryv2.APIGroupDiscovery{c.core})
		publishGroups(b.apis, c.groups)
	})
	b.legacy.Store(newLegacyView(c, b.codecs, discovery.DefaultAddresses{DefaultAddress: "127.0.0.1:6443"}))

	live := map[string]bool{}
	for _, gv := range c.groupVersions() {
		path, rev := openAPIPath(gv), c.schemaRevision[gv]
		live[path] = true
		if old, ok := b.published[path]; ok && old == rev {
			continue
		}
		registerOpenAPI(b.openapi, gv, *c.version(gv), rev, b.specs)
		b.published[path] = rev
	}
	for _, path := range c.openAPIExtras {
		live[path] = true
		if _, ok := b.published[path]; !ok {
			registerOpenAPIExtra(b.openapi, path)
			b.published[path] = 0
		}
	}
	for path := range b.published {
		if !live[path] {
			b.openapi.DeleteGroupVersion(path)
			delete(b.published, path)
		}
	}
	if b.peer != nil {
		b.peer.InvalidateCache()
	}
	return lines
}

func publishGroups(rm aggregated.ResourceManager, groups []apidiscoveryv2.APIGroupDiscovery) {
	copies := make([]apidiscoveryv2.APIGroupDiscovery, len(groups))
	for i, g := range groups {
		g.DeepCopyInto(&copies[i])
		for j, v := range g.Versions {
			rm.SetGroupVersionPriority(metav1.GroupVersion{Group: g.Name, Version: v.Version}, len(groups)-i, len(g.Versions)-j)
		}
	}
	rm.SetGroups(copies)
}

// mutate applies fn to the content and republishes it. fn works on a copy,
// so a failed mutation leaves the backend as it was.
func (b *Backend) mutate(fn func(c *content) error) error {
	b.mu.Lock()
	next := b.content.clone()
	if err := fn(next); err != nil {
		b.mu.Unlock()
		return err
	}
	b.content = next
	lines := b.syncLocked()
	b.mu.Unlock()
	lines.to(b.logger)
	b.changed()
	return nil
}

// AddCRD serves a custom resource in each of its versions, with an OpenAPI
// schema, as installing its CustomResourceDefinition would.
func (b *Backend) AddCRD(crd CRD) error {
	return b.mutate(func(c *content) error { return c.addCRD(crd) })
}

// RemoveCRD stops serving a custom resource, removing group-versions and
// the group it leaves empty.
func (b *Backend) RemoveCRD(group, plural string) error {
	return b.mutate(func(c *content) error { return c.removeCRD(group, plural) })
}

// SetGroupVersion adds or replaces a whole group-version entry; a new group
// is listed last, a new version last in its group. Its schema changes too.
func (b *Backend) SetGroupVersion(group string, v apidiscoveryv2.APIVersionDiscovery) error {
	return b.mutate(func(c *content) error {
		if v.Freshness == "" {
			v.Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent
		}
		if err := c.setVersion(group, *v.DeepCopy()); err != nil {
			return err
		}
		c.schemaRevision[schema.GroupVersion{Group: group, Version: v.Version}]++
		return nil
	})
}

// RemoveGroupVersion stops serving one group-version (and its group, if it
// was the last version).
func (b *Backend) RemoveGroupVersion(gv schema.GroupVersion) error {
	return b.mutate(func(c *content) error { return c.removeVersion(gv) })
}

// RemoveGroup stops serving every version of a group.
func (b *Backend) RemoveGroup(group string) error {
	return b.mutate(func(c *content) error { return c.removeGroup(group) })
}

// SetStale marks a group-version as an aggregated API server that cannot be
// reached: aggregated discovery keeps its last known resources with
// freshness Stale, and its legacy endpoint answers 503.
func (b *Backend) SetStale(gv schema.GroupVersion, stale bool) error {
	return b.mutate(func(c *content) error {
		v := c.version(gv)
		if v == nil {
			return fmt.Errorf("discoverytest: no group-version %s", gv)
		}
		v.Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent
		if stale {
			v.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
		}
		return nil
	})
}

// ChangeSchema changes a group-version's OpenAPI document, and so its
// ?hash=, without changing discovery. A CRD that serves gv changes its
// spec (the version's schema) with it, and so its generation, as
// editing a CRD's schema on a real server does: a watch of CRDs sees it.
func (b *Backend) ChangeSchema(gv schema.GroupVersion) error {
	return b.mutate(func(c *content) error {
		if c.version(gv) == nil {
			return fmt.Errorf("discoverytest: no group-version %s", gv)
		}
		c.schemaRevision[gv]++
		for name, crd := range c.crds {
			if crd.Group == gv.Group && slices.Contains(crd.Versions, gv.Version) {
				crd.schemaRevision++
				c.crds[name] = crd
			}
		}
		return nil
	})
}

// GroupVersions lists what the backend serves, core first, in server order.
func (b *Backend) GroupVersions() []schema.GroupVersion {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.content.groupVersions()
}

// Resources lists the resources (not subresources) the backend serves in
// one group-version, as "<resource>" names in server order.
func (b *Backend) Resources(gv schema.GroupVersion) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.content.version(gv)
	if v == nil {
		return nil
	}
	out := make([]string, 0, len(v.Resources))
	for _, r := range v.Resources {
		out = append(out, r.Resource)
	}
	return out
}

// localDiscovery reads the backend's own aggregated /apis document through
// its real handler, as a peer API server would fetch it.
func (b *Backend) localDiscovery() ([]apidiscoveryv2.APIGroupDiscovery, error) {
	req := httptest.NewRequest(http.MethodGet, "/apis", nil)
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer")
	rec := httptest.NewRecorder()
	b.apis.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("discoverytest: backend %s answered %d for its own discovery", b.id, rec.Code)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// versionDocument is what /version answers: the generation's version, or
// gitVersion if not empty.
func versionDocument(gen Generation, gitVersion string) ([]byte, error) {
	var info version.Info
	if err := readFixture("version.json", &info); err != nil {
		return nil, err
	}
	info.Major, info.Minor, info.GitVersion = gen.gitVersion()
	info.EmulationMajor, info.EmulationMinor = info.Major, info.Minor
	if gitVersion != "" {
		v, err := parseGitVersion(gitVersion)
		if err != nil {
			return nil, err
		}
		info.GitVersion = gitVersion
		info.Major, info.Minor = strconv.Itoa(int(v.Major())), strconv.Itoa(int(v.Minor()))
		info.EmulationMajor, info.EmulationMinor = info.Major, info.Minor
		info.MinCompatibilityMajor, info.MinCompatibilityMinor = info.Major, strconv.Itoa(max(int(v.Minor())-1, 0))
	}
	return json.Marshal(info)
}

// parseGitVersion reads a kube-apiserver gitVersion: "v", then
// major.minor.patch, then perhaps a pre-release or build suffix.
func parseGitVersion(s string) (*utilversion.Version, error) {
	v, err := utilversion.ParseSemantic(s)
	if err != nil || !strings.HasPrefix(s, "v") {
		return nil, fmt.Errorf("discoverytest: %q is not a gitVersion such as v1.37.1", s)
	}
	return v, nil
}
