package discovery_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

func ExampleClient_Snapshot() {
	srv, err := docserver.NewServer() // a kube-apiserver v1.36.3's recorded answers
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	// With a kubeconfig: discovery.New(restConfig).
	c, err := discovery.NewForHTTPClient(nil, ts.URL)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	snap, err := c.Snapshot(ctx)
	if err != nil {
		panic(err)
	}
	apps, _ := snap.Group("apps")
	_, source := snap.Sources()
	fmt.Println(source, len(snap.Groups()), "groups; apps prefers", apps.PreferredVersion().Version)

	// Nothing changed: two 304s, and the same parsed content.
	if _, err := c.Refresh(ctx); err != nil {
		panic(err)
	}
	st := c.Stats()
	fmt.Println(st.Requests, "requests,", st.NotModified, "not modified")
	// Output:
	// aggregated/v2+protobuf 21 groups; apps prefers v1
	// 4 requests, 2 not modified
}
