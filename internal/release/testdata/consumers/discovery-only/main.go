// A program that imports only discovery: its module graph is what every
// kubeatlas user inherits (the test logs it).
package main

import (
	"context"
	"fmt"
	"log"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeatlas/kubeatlas/discovery"
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
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(snap.Groups()), "groups")
}
