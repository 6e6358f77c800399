package consistency_test

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
)

func ExampleCheck() {
	// Two API servers behind one URL, the second upgraded first: it
	// serves a group the first does not. Each has an address of its own,
	// which its identity lease names.
	front, stop := newExampleCluster()
	defer stop()

	// With a kubeconfig: discovery.New(restConfig).
	c, err := discovery.New(&rest.Config{Host: front})
	if err != nil {
		panic(err)
	}
	r, err := consistency.Check(context.Background(), c)
	if err != nil {
		panic(err)
	}
	// Consistent only when every server was seen and they agree;
	// Inconsistent when servers were seen to differ; Unknown otherwise.
	fmt.Printf("%v (%s)\n", r.Verdict(), r.Certainty)
	for _, s := range r.Servers {
		fmt.Println(s.Name(), s.Version)
	}
	for _, d := range r.Differences {
		fmt.Println(d.GroupVersion, d.Resource, "served by", d.ServedBy, "not by", d.MissingFrom)
	}
	// Output:
	// inconsistent (every server asked directly)
	// apiserver-0 v1.36.3
	// apiserver-1 v1.37.1
	// upgraded.example.com/v1  served by [apiserver-1] not by [apiserver-0]
	// upgraded.example.com/v1 upgrades served by [apiserver-1] not by [apiserver-0]
}
