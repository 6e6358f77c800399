// Package clientgo adapts an [openapi3.Client] to client-go's
// openapi.Client (and openapi.ClientWithContext), so that client-go's
// openapi3.NewRoot, kubectl-style code and discovery/clientgo.WithOpenAPIV3
// read kubeatlas's documents: one root read, the disk cache, documents
// parsed once.
//
// It is a package of its own so that openapi3 does not carry client-go's
// interfaces for programs that do not need them.
//
// # Files
//
// clientgo.go: [New] and the adapter.
package clientgo

import (
	"context"

	"k8s.io/client-go/openapi"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// New adapts c to client-go's openapi.Client; the value is also an
// openapi.ClientWithContext.
func New(c *openapi3.Client) openapi.Client { return clientGo{c} }

type clientGo struct{ c *openapi3.Client }

var _ openapi.ClientWithContext = clientGo{}

func (a clientGo) Paths() (map[string]openapi.GroupVersion, error) {
	root, err := a.c.Paths(context.Background())
	if err != nil {
		return nil, err
	}
	out := make(map[string]openapi.GroupVersion, len(root))
	for p, u := range root {
		out[p] = groupVersion{c: a.c, path: p, url: u}
	}
	return out, nil
}

func (a clientGo) PathsWithContext(ctx context.Context) (map[string]openapi.GroupVersionWithContext, error) {
	root, err := a.c.Paths(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]openapi.GroupVersionWithContext, len(root))
	for p, u := range root {
		out[p] = groupVersion{c: a.c, path: p, url: u}
	}
	return out, nil
}

type groupVersion struct {
	c         *openapi3.Client
	path, url string
}

func (g groupVersion) ServerRelativeURL() string { return g.url }

// Schema returns the document at ServerRelativeURL in the content type
// asked for (JSON, or protobuf as
// "application/com.github.proto-openapi.spec.v3@v1.0+protobuf").
func (g groupVersion) Schema(contentType string) ([]byte, error) {
	return g.SchemaWithContext(context.Background(), contentType)
}

func (g groupVersion) SchemaWithContext(ctx context.Context, contentType string) ([]byte, error) {
	if contentType == "application/json" {
		d, err := g.c.DocumentAt(ctx, g.path, g.url)
		if err != nil {
			return nil, err
		}
		return d.JSON, nil
	}
	return g.c.Raw(ctx, g.url, contentType)
}
