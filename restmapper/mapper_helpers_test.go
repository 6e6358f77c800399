package restmapper_test

import (
	"testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// newMapper is a mapper over a discovery client of base.
// internal/withfake/restmapper (the tests that need the fake server, a
// module of their own) keeps a copy.
func newMapper(t testing.TB, base string, opts ...restmapper.Option) (*restmapper.Mapper, *discovery.Client) {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}
