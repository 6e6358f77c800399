// A kubectl-explain-like lookup of a kind's schema.
package main

import (
	"context"
	"fmt"
	"log"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

func main() {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		log.Fatal(err)
	}
	c, err := openapi3.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.Kind(context.Background(), schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", s)
}
