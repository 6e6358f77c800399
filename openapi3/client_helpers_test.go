package openapi3_test

import (
	"testing"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// newClient is a client of base. internal/withfake/openapi3 (the tests that
// need the fake server, a module of their own) keeps a copy.
func newClient(t testing.TB, base string, opts ...openapi3.Option) *openapi3.Client {
	t.Helper()
	c, err := openapi3.NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
