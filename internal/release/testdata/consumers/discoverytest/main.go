// A program that imports the fake API server, as a user's tests do:
// discoverytest is a module of its own (it needs k8s.io/apiserver, which
// stays out of the core's module graph), without the apiserver module
// (see the servedtest consumer).
package main

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

func main() {
	srv, err := discoverytest.NewServer(discoverytest.WithCRDs(10, 2))
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, err := discovery.NewForHTTPClient(nil, ts.URL)
	if err != nil {
		log.Fatal(err)
	}
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(snap.Groups()), "groups")
}
