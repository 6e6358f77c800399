// Every context of a kubeconfig as one fleet.
package main

import (
	"context"
	"fmt"
	"log"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeatlas/kubeatlas/fleet"
)

func main() {
	f, err := fleet.New()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := f.AddKubeconfig(clientcmd.RecommendedHomeFile, "*"); err != nil {
		log.Fatal(err)
	}
	if err := f.Refresh(context.Background()); err != nil {
		log.Print(err)
	}
	for _, id := range f.IDs() {
		c, _ := f.Cluster(id)
		fmt.Println(id, c.Mapper() != nil, c.Err())
	}
}
