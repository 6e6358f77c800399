package shared_test

import (
	"fmt"
	"net/http/httptest"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/shared"
)

func ExampleRegistry_Acquire() {
	srv, err := docserver.NewServer() // a kube-apiserver v1.36.3's recorded answers
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	// shared.Default() in a program; a registry of its own here, whose
	// clients stop as soon as they are released.
	r, err := shared.New(shared.WithLinger(0), shared.WithoutWatch())
	if err != nil {
		panic(err)
	}
	reconcile := func() {
		h, err := r.Acquire(&rest.Config{Host: ts.URL}) // as a client built per reconcile would
		if err != nil {
			panic(err)
		}
		defer h.Release()
		m, err := h.Mapper().RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"})
		if err != nil {
			panic(err)
		}
		_ = m
	}
	h, err := r.Acquire(&rest.Config{Host: ts.URL}) // held across the reconciles
	if err != nil {
		panic(err)
	}
	for range 100 {
		reconcile()
	}
	fmt.Println(h.Discovery().Stats().Requests, "discovery requests for 100 reconciles;", r.Len(), "client")
	h.Release()
	fmt.Println(r.Len(), "clients after the last release")
	// Output:
	// 2 discovery requests for 100 reconciles; 1 client
	// 0 clients after the last release
}
