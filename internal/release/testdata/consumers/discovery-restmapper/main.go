// A client-go user's replacement for discovery and the deferred REST mapper.
package main

import (
	"fmt"
	"log"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

func main() {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		log.Fatal(err)
	}
	c, err := discovery.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	m, err := restmapper.New(c)
	if err != nil {
		log.Fatal(err)
	}
	var mapper meta.RESTMapper = m
	mapping, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(mapping.Resource)
}
