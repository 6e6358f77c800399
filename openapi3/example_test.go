package openapi3_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// Find a kind's schema and a field's documentation, as kubectl explain does.
func ExampleClient_Kind() {
	srv, _ := discoverytest.NewServer()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	c, _ := openapi3.NewForHTTPClient(nil, ts.URL)
	ctx := context.Background()
	deployment, err := c.Kind(ctx, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil {
		panic(err)
	}
	containers, _, err := deployment.Field("spec", "template", "spec", "containers")
	if err != nil {
		panic(err)
	}
	fmt.Println(deployment.Name, containers.Type)
	// Output:
	// io.k8s.api.apps.v1.Deployment [array]
}
