package openapi3_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// Find a kind's schema and a field's documentation, as kubectl explain does.
func ExampleClient_Kind() {
	ts := newExampleServer() // serves testdata/example
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

// Merge every group-version's document into one, which answers for any
// kind.
func ExampleAggregate() {
	ts := newExampleServer() // serves testdata/example
	defer ts.Close()

	c, _ := openapi3.NewForHTTPClient(nil, ts.URL)
	docs, err := c.FetchAll(context.Background())
	if err != nil {
		panic(err)
	}
	merged, err := openapi3.Aggregate(docs)
	if err != nil {
		panic(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "batch", Version: "v1", Kind: "Job"},
	} {
		s, err := merged.Kind(gvk)
		if err != nil {
			panic(err)
		}
		fmt.Println(s.Name)
	}
	// Output:
	// io.k8s.api.apps.v1.Deployment
	// io.k8s.api.batch.v1.Job
}
