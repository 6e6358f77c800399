package restmapper

// What the kubeatlas side of a case is built from: the fakes of upstream's
// tests served over HTTP (sides.Serve), read by kubeatlas's discovery, and
// kubeatlas's restmapper.New over it. Not part of upstream's files.

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/conformance/clientgo/sides"
)

// serveLists serves what a fakeDiscoveryClient's ServerGroupsAndResources
// returns, asked anew on each request.
func serveLists(t *testing.T, ds *fakeDiscoveryClient) *httptest.Server {
	t.Helper()
	return sides.Serve(t, sides.Lists{Resources: func() []*metav1.APIResourceList {
		if ds.serverResourcesHandler == nil {
			return nil
		}
		rs, err := ds.serverResourcesHandler()
		if err != nil {
			t.Errorf("fake discovery: %v", err)
		}
		return rs
	}})
}

// newDiscoveryCategoryExpander is client-go's NewDiscoveryCategoryExpander
// on client-go's side, kubeatlas's mapper over ds's data on kubeatlas's.
func newDiscoveryCategoryExpander(t *testing.T, side sides.Side, ds *fakeDiscoveryClient) cgrestmapper.CategoryExpander {
	t.Helper()
	if !side.Kubeatlas {
		return cgrestmapper.NewDiscoveryCategoryExpander(ds)
	}
	return sides.NewMapper(t, serveLists(t, ds))
}

// unexpanded is client-go's discovery REST mapper, without short-name
// expansion, over what srv serves: what the delegate of client-go's
// shortcut expander answers for an input already expanded. kubeatlas's
// mapper expands, then asks its copy of that mapper: its answer for a
// short name must be this mapper's for upstream's expected expansion.
func unexpanded(t *testing.T, srv *httptest.Server) meta.RESTMapper {
	t.Helper()
	d, err := cgdiscovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	grs, err := cgrestmapper.GetAPIGroupResources(d)
	if err != nil {
		t.Fatal(err)
	}
	return cgrestmapper.NewDiscoveryRESTMapper(grs)
}

// errString is err's message, "" for nil, so that two mappers' errors can
// be compared.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// groupResourcesDiscovery serves APIGroupResources as a discovery fake
// would, for sides.Serve.
type groupResourcesDiscovery struct {
	cgdiscovery.DiscoveryInterface
	resources []*cgrestmapper.APIGroupResources
}

func (d groupResourcesDiscovery) ServerGroups() (*metav1.APIGroupList, error) {
	list := &metav1.APIGroupList{}
	for _, g := range d.resources {
		list.Groups = append(list.Groups, g.Group)
	}
	return list, nil
}

func (d groupResourcesDiscovery) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	gv, err := schema.ParseGroupVersion(groupVersion)
	if err != nil {
		return nil, err
	}
	for _, g := range d.resources {
		if rs, ok := g.VersionedResources[gv.Version]; ok && g.Group.Name == gv.Group {
			return &metav1.APIResourceList{GroupVersion: groupVersion, APIResources: rs}, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: "groupversion"}, groupVersion)
}

// countingServer counts the requests for /apis, the first request of
// every read of discovery, before h answers. It answers one request at a
// time: upstream's fakes are not safe for concurrent use, and discovery
// reads /api and /apis in parallel.
type countingServer struct {
	serve sync.Mutex
	mu    sync.Mutex
	apis  int
	h     http.Handler
}

func (c *countingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.serve.Lock()
	defer c.serve.Unlock()
	if r.URL.Path == "/apis" {
		c.mu.Lock()
		c.apis++
		c.mu.Unlock()
	}
	c.h.ServeHTTP(w, r)
}

func (c *countingServer) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apis
}
