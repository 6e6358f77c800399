// Package sides runs a test ported from client-go twice, once against
// client-go's own client and once against kubeatlas's through its client-go
// adapters, and serves a client-go discovery fake over HTTP so that tests
// written against a fake reach kubeatlas, which reads discovery only over
// HTTP.
//
// # Files
//
//   - sides.go: [Run], [Side] and its constructors, [Serve] and its
//     [Handler], [Lists] (a fake over resource lists) and [NewMapper].
package sides

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/clientgo"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Side is one of the two implementations a ported test runs against.
type Side struct {
	// Kubeatlas is false for client-go's own client.
	Kubeatlas bool
}

// Client is what the ported tests call on a discovery client: client-go's
// *DiscoveryClient and kubeatlas's *clientgo.Discovery both are one.
type Client interface {
	cgdiscovery.DiscoveryInterface
	cgdiscovery.AggregatedDiscoveryInterface
}

// Run runs test as two subtests, "client-go" and "kubeatlas".
func Run(t *testing.T, test func(t *testing.T, side Side)) {
	t.Helper()
	t.Run("client-go", func(t *testing.T) { test(t, Side{}) })
	t.Run("kubeatlas", func(t *testing.T) { test(t, Side{Kubeatlas: true}) })
}

// SkipKubeatlas skips the kubeatlas side of a case whose only cause of
// failure is a difference the adapter documents; reason names it.
func (s Side) SkipKubeatlas(t *testing.T, reason string) {
	t.Helper()
	if s.Kubeatlas {
		t.Skip("documented difference: " + reason)
	}
}

// NewDiscoveryClientForConfigOrDie is client-go's constructor of that name
// on client-go's side, clientgo.New(discovery.New(cfg)) on kubeatlas's.
func (s Side) NewDiscoveryClientForConfigOrDie(cfg *rest.Config, opts ...discovery.Option) Client {
	if !s.Kubeatlas {
		return cgdiscovery.NewDiscoveryClientForConfigOrDie(cfg)
	}
	c, err := discovery.New(cfg, opts...)
	if err != nil {
		panic(err)
	}
	a, err := clientgo.New(c)
	if err != nil {
		panic(err)
	}
	return a
}

// NewDiscoveryClientForHTTPClient is what upstream builds by replacing a
// client-go client's RESTClient's HTTP client with hc.
func (s Side) NewDiscoveryClientForHTTPClient(cfg *rest.Config, hc *http.Client) Client {
	if !s.Kubeatlas {
		c := cgdiscovery.NewDiscoveryClientForConfigOrDie(cfg)
		c.RESTClient().(*rest.RESTClient).Client = hc
		return c
	}
	c, err := discovery.NewForConfigAndClient(cfg, hc)
	if err != nil {
		panic(err)
	}
	a, err := clientgo.New(c)
	if err != nil {
		panic(err)
	}
	return a
}

// NewCached is, on client-go's side, d itself (a client-go cached
// discovery fake or memory cache); on kubeatlas's, the adapter over a
// server that serves d (Serve).
func (s Side) NewCached(t *testing.T, d cgdiscovery.DiscoveryInterface, cached func(cgdiscovery.DiscoveryInterface) cgdiscovery.CachedDiscoveryInterface) cgdiscovery.CachedDiscoveryInterface {
	t.Helper()
	if !s.Kubeatlas {
		return cached(d)
	}
	srv := Serve(t, d)
	return s.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL}).(cgdiscovery.CachedDiscoveryInterface)
}

// Serve serves d as legacy discovery JSON, the format every server
// speaks: /api and /apis from d.ServerGroups, each group-version's document
// from d.ServerResourcesForGroupVersion. An error answers with its
// apimachinery status (400, which is not retried, for any other error).
// The server closes when the test ends.
func Serve(t *testing.T, d cgdiscovery.DiscoveryInterface) *httptest.Server {
	srv := httptest.NewServer(Handler(d))
	t.Cleanup(srv.Close)
	return srv
}

// Handler is Serve's handler, for a test that wraps it.
func Handler(d cgdiscovery.DiscoveryInterface) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var obj any
		var err error
		switch p := strings.Trim(r.URL.Path, "/"); {
		case p == "api" || p == "apis":
			var groups *metav1.APIGroupList
			groups, err = serverGroups(r, d)
			if err != nil {
				break
			}
			if p == "api" {
				versions := &metav1.APIVersions{}
				for _, g := range groups.Groups {
					if g.Name == "" {
						for _, v := range g.Versions {
							versions.Versions = append(versions.Versions, v.Version)
						}
					}
				}
				obj = versions
				break
			}
			named := &metav1.APIGroupList{}
			for _, g := range groups.Groups {
				if g.Name != "" {
					named.Groups = append(named.Groups, g)
				}
			}
			obj = named
		case strings.HasPrefix(p, "api/"):
			obj, err = serverResources(r, d, strings.TrimPrefix(p, "api/"))
		case strings.HasPrefix(p, "apis/"):
			obj, err = serverResources(r, d, strings.TrimPrefix(p, "apis/"))
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				// An error without a status is one client-go's memory
				// cache does not retry (upstream's fakes call it "some
				// permanent error"): a 5xx would be retried, by
				// client-go over HTTP too.
				status = apierrors.NewBadRequest(err.Error())
			}
			st := status.Status()
			w.WriteHeader(int(st.Code))
			_ = json.NewEncoder(w).Encode(st)
			return
		}
		_ = json.NewEncoder(w).Encode(obj)
	})
}

// SplitGroupsAndResources is client-go's function of that name on
// client-go's side; on kubeatlas's, agg served as aggregated discovery (the
// core group at /api, the others at /apis) and read back through the
// adapter's GroupsAndMaybeResources.
func (s Side) SplitGroupsAndResources(t *testing.T, agg apidiscoveryv2.APIGroupDiscoveryList) (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error) {
	t.Helper()
	if !s.Kubeatlas {
		return cgdiscovery.SplitGroupsAndResources(agg)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list := apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{APIVersion: "apidiscovery.k8s.io/v2", Kind: "APIGroupDiscoveryList"}}
		for _, g := range agg.Items {
			if (g.Name == "") == (r.URL.Path == "/api") {
				list.Items = append(list.Items, g)
			}
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		_ = json.NewEncoder(w).Encode(list)
	}))
	defer srv.Close()
	groups, resources, failed, err := s.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL}).GroupsAndMaybeResources()
	if err != nil {
		t.Fatalf("kubeatlas: %v", err)
	}
	return groups, resources, failed
}

// StaleGroupVersionError is client-go's error for a Stale gv, which only
// client-go's package can build (its field is unexported): upstream's tests
// write it as a literal.
func StaleGroupVersionError(gv schema.GroupVersion) error {
	_, _, failed := cgdiscovery.SplitGroupsAndResources(apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{{
		ObjectMeta: metav1.ObjectMeta{Name: gv.Group},
		Versions:   []apidiscoveryv2.APIVersionDiscovery{{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}},
	}}})
	return failed[gv]
}

// StaleKeepsResources is the documented difference of the adapter
// (discovery/clientgo's doc) behind the cases SkipStale skips.
const StaleKeepsResources = "a Stale group-version keeps the resources its document lists (client-go drops them and the version)"

// LegacyResources is the documented difference of the adapter
// (discovery/clientgo's doc) behind assertions that client-go's
// GroupsAndMaybeResources answers a legacy server with groups alone.
const LegacyResources = "GroupsAndMaybeResources returns resources and failures from legacy servers too (client-go's ServerGroupsAndResources answers the same)"

// Upstream reports whether to make an assertion of upstream's that, on
// kubeatlas's side, only a documented difference (reason) fails: always
// on client-go's side; never on kubeatlas's, where it logs the skip and
// the case's other assertions still run.
func (s Side) Upstream(t *testing.T, reason string) bool {
	t.Helper()
	if s.Kubeatlas {
		t.Logf("SKIP assertion: documented difference: %s", reason)
	}
	return !s.Kubeatlas
}

// OpenAPIUncached is the documented difference of the adapter
// (discovery/clientgo's doc) behind the memory cache's OpenAPI tests, which
// hold client-go's memory cache to returning the same objects until
// Invalidate: the adapter's OpenAPIV3 is client-go's uncached client unless
// WithOpenAPIV3 gives another.
const OpenAPIUncached = "OpenAPI v3 through the adapter is client-go's uncached client (WithOpenAPIV3 gives another)"

// SkipStale reports, on kubeatlas's side, whether a table case serves a
// Stale group-version that lists resources, whose only cause of failure is
// then StaleKeepsResources; it logs the skip. Upstream's loops continue on
// true.
func (s Side) SkipStale(t *testing.T, name string, lists ...*apidiscoveryv2.APIGroupDiscoveryList) bool {
	t.Helper()
	if !s.Kubeatlas {
		return false
	}
	for _, l := range lists {
		if l == nil {
			continue
		}
		for _, g := range l.Items {
			for _, v := range g.Versions {
				if v.Freshness == apidiscoveryv2.DiscoveryFreshnessStale && len(v.Resources) > 0 {
					t.Logf("SKIP case %q: documented difference: %s", name, StaleKeepsResources)
					return true
				}
			}
		}
	}
	return false
}

// NewMemCacheClient is client-go's memory.NewMemCacheClientWithContext(d)
// on client-go's side; on kubeatlas's, the adapter over d's server: the
// server d is a client of, or, for a fake, a server that serves it
// (Serve).
func (s Side) NewMemCacheClient(t *testing.T, d cgdiscovery.DiscoveryInterface) CachedClient {
	t.Helper()
	if !s.Kubeatlas {
		if dc, ok := d.(cgdiscovery.DiscoveryInterfaceWithContext); ok {
			return memory.NewMemCacheClientWithContext(dc).(CachedClient)
		}
		return memory.NewMemCacheClient(d).(CachedClient)
	}
	host := ""
	if dc, ok := d.(*cgdiscovery.DiscoveryClient); ok {
		u := dc.RESTClient().(*rest.RESTClient).Get().URL()
		host = u.Scheme + "://" + u.Host
	} else {
		host = Serve(t, d).URL
	}
	return s.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: host}).(CachedClient)
}

// CachedClient is what the memory cache's tests call: client-go's memory
// cache and kubeatlas's adapter are both one.
type CachedClient interface {
	cgdiscovery.CachedDiscoveryInterface
	cgdiscovery.CachedDiscoveryInterfaceWithContext
	cgdiscovery.AggregatedDiscoveryInterface
}

// serverGroups asks d as a caller would: through its WithContext methods
// when it has them (upstream's fakeDiscoveryWithContext has only those).
func serverGroups(r *http.Request, d cgdiscovery.DiscoveryInterface) (*metav1.APIGroupList, error) {
	if dc, ok := d.(cgdiscovery.DiscoveryInterfaceWithContext); ok {
		return dc.ServerGroupsWithContext(r.Context())
	}
	return d.ServerGroups()
}

func serverResources(r *http.Request, d cgdiscovery.DiscoveryInterface, gv string) (*metav1.APIResourceList, error) {
	if dc, ok := d.(cgdiscovery.DiscoveryInterfaceWithContext); ok {
		return dc.ServerResourcesForGroupVersionWithContext(r.Context(), gv)
	}
	return d.ServerResourcesForGroupVersion(gv)
}

// ClientGoTestdata is client-go's discovery/testdata directory (in the
// module cache: client-go's own OpenAPI v3 documents, Apache-2.0, read in
// place rather than copied), which upstream's discovery tests reach as
// "testdata" and its memory cache tests as "../../testdata". It fails the
// test if the directory holds no document, so that a wrong path cannot
// make an OpenAPI test pass over nothing.
func ClientGoTestdata(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/client-go").Output()
	if err != nil {
		t.Fatalf("finding client-go's module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "discovery", "testdata")
	docs, _ := filepath.Glob(filepath.Join(dir, "apis", "*", "*.json"))
	if len(docs) == 0 {
		t.Fatalf("no OpenAPI documents under %s", dir)
	}
	return dir
}

// Lists is a discovery fake over resource lists, in the shape of the
// fakes of upstream's restmapper tests (whose ServerGroupsAndResources
// returns lists the groups do not name): its groups are the lists' groups
// and versions in order of first appearance, each group's preferred
// version its first; lists naming one group-version are merged, in order.
// Resources is asked on every call, so that a test can change what the
// server serves. Only what Serve calls is implemented.
type Lists struct {
	cgdiscovery.DiscoveryInterface
	Resources func() []*metav1.APIResourceList
}

// ServerGroups lists the groups the lists name.
func (l Lists) ServerGroups() (*metav1.APIGroupList, error) {
	list := &metav1.APIGroupList{}
	index := map[string]int{}
	seen := map[string]bool{}
	for _, rl := range l.Resources() {
		gv, err := schema.ParseGroupVersion(rl.GroupVersion)
		if err != nil {
			return nil, err
		}
		i, ok := index[gv.Group]
		if !ok {
			i = len(list.Groups)
			index[gv.Group] = i
			v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
			list.Groups = append(list.Groups, metav1.APIGroup{Name: gv.Group, PreferredVersion: v})
		}
		if !seen[gv.String()] {
			seen[gv.String()] = true
			list.Groups[i].Versions = append(list.Groups[i].Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version})
		}
	}
	return list, nil
}

// ServerResourcesForGroupVersion merges the lists naming groupVersion.
func (l Lists) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	var out *metav1.APIResourceList
	for _, rl := range l.Resources() {
		if rl.GroupVersion != groupVersion {
			continue
		}
		if out == nil {
			out = &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: groupVersion}
		}
		out.APIResources = append(out.APIResources, rl.APIResources...)
	}
	if out == nil {
		gv, _ := schema.ParseGroupVersion(groupVersion)
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: "groupversion"}, groupVersion)
	}
	return out, nil
}

// NewMapper is kubeatlas's restmapper.New over discovery reading srv.
func NewMapper(t *testing.T, srv *httptest.Server, opts ...restmapper.Option) *restmapper.Mapper {
	t.Helper()
	return newMapper(t, srv, false, opts...)
}

// NewStaleMapper is NewMapper over a client that has read discovery once
// already: what upstream's fakes model as a cached discovery that is not
// fresh ("in real world the discovery client is fronted with a cache"),
// so that a miss reads discovery again. (A mapper whose first lookup
// reads discovery cold does not read it again on a miss: what it read
// began after the lookup did.)
func NewStaleMapper(t *testing.T, srv *httptest.Server, opts ...restmapper.Option) *restmapper.Mapper {
	t.Helper()
	return newMapper(t, srv, true, opts...)
}

func newMapper(t *testing.T, srv *httptest.Server, read bool, opts ...restmapper.Option) *restmapper.Mapper {
	t.Helper()
	c, err := discovery.New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if read {
		if _, err := c.Snapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	m, err := restmapper.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
