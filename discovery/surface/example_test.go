package surface_test

import (
	"fmt"
	"os"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// A discovery document read elsewhere (here: /apis of a kube-apiserver
// v1.36.3, as it sent it in protobuf) decodes as the client decodes it.
func ExampleDecodeAggregated() {
	body, err := os.ReadFile("testdata/k8s-v1.36.3/apis.v2.pb")
	if err != nil {
		panic(err)
	}
	contentType := "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	groups, src, _, err := surface.DecodeAggregated(body, contentType, "")
	if err != nil {
		panic(err)
	}
	for _, g := range groups {
		if g.Name == "apps" {
			v := g.PreferredVersion()
			fmt.Printf("%s: %d groups; apps/%s has %d resources, %s\n", src, len(groups), v.Version, len(v.Resources), v.Freshness)
		}
	}
	// Output:
	// aggregated/v2+protobuf: 20 groups; apps/v1 has 5 resources, Current
}
