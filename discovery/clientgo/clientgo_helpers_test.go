package clientgo_test

import (
	"testing"

	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/clientgo"
)

// adapter is this package's Discovery over a kubeatlas client of base.
// internal/withfake/discovery/clientgo keeps a copy.
func adapter(t testing.TB, base string, opts ...discovery.Option) *clientgo.Discovery {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := clientgo.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// clientGo is client-go's discovery client of base, the reference answers
// are compared with. internal/withfake/discovery/clientgo (the tests that
// need the fake server, a module of their own) keeps a copy.
func clientGo(t testing.TB, base string) *cgdiscovery.DiscoveryClient {
	t.Helper()
	d, err := cgdiscovery.NewDiscoveryClientForConfig(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
