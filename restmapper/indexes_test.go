package restmapper_test

import (
	"context"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestIndexesShared: mappers of clusters that serve one surface (clients
// sharing decoded discovery, discovery.WithSurfaces) share one index through an Indexes, and
// each still answers for its own cluster when that cluster changes;
// another surface gets an index of its own.
func TestIndexesShared(t *testing.T) {
	surfaces, ix := discovery.NewSurfaces(), restmapper.NewIndexes()
	var mappers []*restmapper.Mapper
	var servers []*docserver.Server
	var clients []*discovery.Client
	for _, crds := range []int{20, 20, 20, 30} {
		srv, base := docserver.Start(t, docserver.WithCRDs(crds, 4))
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
	if err := servers[1].AddCRD(docserver.CRD{Group: thing.Group, Versions: []string{thing.Version}, Kind: thing.Kind}); err != nil {
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

// TestIndexesWarnOnce: mappers sharing an index hear of an ambiguous short
// name once, through the handler of the mapper that built the index, as
// Indexes' doc says; the other mapper's handler hears nothing and its
// answer is the same.
func TestIndexesWarnOnce(t *testing.T) {
	surfaces, ix := discovery.NewSurfaces(), restmapper.NewIndexes()
	var heard [2][]string
	var mappers []*restmapper.Mapper
	for i := range 2 {
		_, base := docserver.Start(t)
		c, err := discovery.NewForHTTPClient(nil, base, discovery.WithSurfaces(surfaces), discovery.WithJSONOnly())
		if err != nil {
			t.Fatal(err)
		}
		m, err := restmapper.New(c, restmapper.WithIndexes(ix), restmapper.WithWarningHandler(func(w string) { heard[i] = append(heard[i], w) }))
		if err != nil {
			t.Fatal(err)
		}
		mappers = append(mappers, m)
	}
	for _, m := range mappers {
		for range 2 {
			gvr, err := m.ResourceFor(schema.GroupVersionResource{Resource: "ev"})
			if err != nil || gvr != (schema.GroupVersionResource{Version: "v1", Resource: "events"}) {
				t.Fatalf("ev: %v %v", gvr, err)
			}
		}
	}
	if ix.Len() != 1 {
		t.Fatalf("%d indexes for one surface", ix.Len())
	}
	if len(heard[0]) != 1 || len(heard[1]) != 0 {
		t.Errorf("warnings heard: first mapper %q, second %q; want one, by the first", heard[0], heard[1])
	}
	runtime.KeepAlive(mappers)
}
