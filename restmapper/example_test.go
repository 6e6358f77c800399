package restmapper_test

import (
	"fmt"
	"net/http/httptest"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

func ExampleMapper() {
	srv, err := docserver.NewServer() // a kube-apiserver v1.36.3's recorded answers
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	c, _ := discovery.NewForHTTPClient(nil, ts.URL)
	m, _ := restmapper.New(c)

	gvk, _ := m.KindFor(schema.GroupVersionResource{Resource: "deploy"})
	mapping, _ := m.RESTMapping(gvk.GroupKind())
	fmt.Println(gvk, "->", mapping.Resource, mapping.Scope.Name())

	all, _ := m.Expand("all")
	fmt.Println(len(all), "resources in category all, first", all[0])
	// Output:
	// apps/v1, Kind=Deployment -> apps/v1, Resource=deployments namespace
	// 10 resources in category all, first pods
}
