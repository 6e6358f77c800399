package restmapper_test

import (
	"context"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestIndexesShared: mappers of clusters that serve one surface (clients
// sharing a discovery.Surfaces) share one index through an Indexes, and
// each still answers for its own cluster when that cluster changes;
// another surface gets an index of its own.
func TestIndexesShared(t *testing.T) {
	surfaces, ix := discovery.NewSurfaces(), restmapper.NewIndexes()
	var mappers []*restmapper.Mapper
	var servers []*discoverytest.Server
	var clients []*discovery.Client
	for _, crds := range []int{20, 20, 20, 30} {
		srv, base := discoverytest.Start(t, discoverytest.WithCRDs(crds, 4))
		c, err := discovery.NewForHTTPClient(nil, base, discovery.WithSurfaces(surfaces), discovery.WithJSONOnly())
		if err != nil {
			t.Fatal(err)
		}
		m, err := restmapper.New(c, restmapper.WithIndexes(ix))
		if err != nil {
			t.Fatal(err)
		}
		mappers, servers, clients = append(mappers, m), append(servers, srv), append(clients, c)
	}
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	for i, m := range mappers {
		if _, err := m.RESTMapping(deploy.GroupKind(), deploy.Version); err != nil {
			t.Fatalf("mapper %d: %v", i, err)
		}
	}
	if got := ix.Len(); got != 2 {
		t.Errorf("%d indexes for 4 clusters of 2 surfaces, want 2", got)
	}

	// One cluster of the shared surface changes: its mapper finds the new
	// kind, the others do not.
	thing := schema.GroupVersionKind{Group: "new.example.com", Version: "v1", Kind: "Thing"}
	if err := servers[1].AddCRD(discoverytest.CRD{Group: thing.Group, Versions: []string{thing.Version}, Kind: thing.Kind}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients[1].Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := mappers[1].RESTMapping(thing.GroupKind(), thing.Version); err != nil {
		t.Errorf("the changed cluster's mapper: %v", err)
	}
	if _, err := mappers[0].RESTMapping(thing.GroupKind(), thing.Version); err == nil {
		t.Errorf("another cluster's mapper maps the changed cluster's new kind")
	}
	if got := ix.Len(); got < 3 {
		t.Errorf("%d indexes after a cluster changed, want its own besides the 2", got)
	}
	// The table holds indexes weakly: the mappers must outlive its counts.
	runtime.KeepAlive(mappers)
}
