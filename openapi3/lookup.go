package openapi3

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// PathFor is the root path of a group-version's document.
func PathFor(gv schema.GroupVersion) string { return mediatype.OpenAPIPath(gv.Group, gv.Version) }

// Schema is a schema found in a document, with the document it resolves
// references in.
type Schema struct {
	Name   string // the components/schemas name, for a kind's schema
	Schema *spec.Schema
	doc    *Document
}

// ErrNotFound is the cause of an error for a kind or field that no
// document describes.
var ErrNotFound = errors.New("openapi3: not found")

// Kind finds the schema that carries gvk in its x-kubernetes-group-version-kind,
// in its group-version's document ([Client.DocumentOf]).
//
// With a field path ("spec", "template"), Kind looks for it below the
// kind's schema, as [Schema.Field] does, and a path the held schema lacks
// is a miss as a kind the held document lacks is: the client reads the
// root again (at most once a second) and, when the root gives the
// group-version a new document, answers with the kind's schema in it. A
// field added to a CRD since the document was read is so found at once
// with no watch to tell the client, and a field that does not exist costs
// at most a root read a second. A path still absent is no error of Kind's
// (the schema is returned; its Field names the missing field), unless the
// root could not be read again: then the error is both the field's
// ErrNotFound and the read's error.
func (c *Client) Kind(ctx context.Context, gvk schema.GroupVersionKind, path ...string) (*Schema, error) {
	d, err := c.DocumentOf(ctx, gvk)
	if err != nil {
		return nil, err
	}
	k, err := d.Kind(gvk)
	if err != nil || len(path) == 0 {
		return k, err
	}
	_, _, ferr := k.Field(path...)
	if !errors.Is(ferr, ErrNotFound) {
		return k, nil
	}
	u, err := c.reread(ctx, d)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, err // the group-version is gone
	case err != nil:
		return nil, fmt.Errorf("%w; reading the OpenAPI root again to look for it: %w", ferr, err)
	case u == "":
		return k, nil
	}
	if d, err = c.DocumentAt(ctx, d.Path, u); err != nil {
		return nil, err
	}
	return d.Kind(gvk)
}

// DocumentOf returns the document of gvk's group-version, as
// [Client.Document] does, if it lists gvk. A kind the document lacks makes
// the client read the root again (at most once a second), in case the
// group-version has gained it since (a CRD installed in a group that
// already had others): a long-lived client finds a new kind at once, not a
// max age later. A kind no document lists is an [ErrNotFound]: one
// without a version or a kind name (an object whose apiVersion is empty or
// does not parse) at once, with no request; a group-version the root no
// longer lists, once the root is read again. When that read fails, the
// error is both the ErrNotFound and the read's error.
func (c *Client) DocumentOf(ctx context.Context, gvk schema.GroupVersionKind) (*Document, error) {
	if gvk.Version == "" || gvk.Kind == "" {
		return nil, fmt.Errorf("%w: %q is no kind: it needs a version and a kind name (is the object's apiVersion or kind empty or malformed?)", ErrNotFound, gvk.String())
	}
	d, err := c.Document(ctx, PathFor(gvk.GroupVersion()))
	if err != nil {
		return nil, err
	}
	_, err = d.kindSchema(gvk)
	if !errors.Is(err, ErrNotFound) {
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	u, rerr := c.reread(ctx, d)
	switch {
	case errors.Is(rerr, ErrNotFound):
		return nil, rerr // the group-version is gone
	case rerr != nil:
		// Both: the kind is not found, and why the root that may list it
		// by now could not be read.
		return nil, fmt.Errorf("%w; reading the OpenAPI root again to look for it: %w", err, rerr)
	case u == "":
		return nil, err
	}
	if d, err = c.DocumentAt(ctx, d.Path, u); err != nil {
		return nil, err
	}
	if _, err = d.kindSchema(gvk); err != nil {
		return nil, err
	}
	return d, nil
}

// reread is the URL of d's group-version's document once the root is
// read again for a miss in d (missRead: not within a second of the last
// read), if it is not d's; "" when the root gives d's, or was not read. A
// group-version the root no longer lists is an ErrNotFound.
func (c *Client) reread(ctx context.Context, d *Document) (string, error) {
	root, read, err := c.missRead(ctx)
	if err != nil || !read {
		return "", err
	}
	u, ok := root[d.Path]
	switch {
	case !ok:
		// The group-version is gone since d was read.
		return "", fmt.Errorf("%w: the server lists no OpenAPI document for %q", ErrNotFound, d.Path)
	case u == d.URL:
		return "", nil
	}
	return u, nil
}

// maxRefDepth bounds reference chains, against cycles in server data.
const maxRefDepth = 32

// resolve follows $ref and the single-element allOf Kubernetes wraps
// references in (to give them a description), returning the schema the
// reference names and the description the wrapper gave.
func (s *Schema) resolve(in *spec.Schema) (*spec.Schema, string, error) {
	description := in.Description
	for range maxRefDepth {
		switch {
		case in.Ref.String() != "":
			ref := in.Ref.String()
			name, local := strings.CutPrefix(ref, "#/components/schemas/")
			if !local {
				return nil, "", fmt.Errorf("%w: reference %s (only #/components/schemas/ ones resolve)", ErrNotFound, ref)
			}
			next, err := s.doc.Schema(name)
			if err != nil {
				return nil, "", err
			}
			in = next
		case len(in.AllOf) == 1 && len(in.Properties) == 0:
			in = &in.AllOf[0]
		default:
			if description == "" {
				description = in.Description
			}
			return in, description, nil
		}
	}
	return nil, "", fmt.Errorf("openapi3: references deeper than %d", maxRefDepth)
}

// Resolve follows a schema's reference (and allOf wrapper) within the
// kind's document.
func (s *Schema) Resolve(in *spec.Schema) (*spec.Schema, error) {
	out, _, err := s.resolve(in)
	return out, err
}

// Field is the schema at a field path below a kind ("spec.template.spec.
// containers"), through references, allOf wrappers, array items and map
// values, as kubectl explain walks a path: a list's fields are its items',
// a map's are its values' ("spec.parts.kind" where parts maps names to
// objects with a kind).
func (s *Schema) Field(path ...string) (*spec.Schema, string, error) {
	cur, description, err := s.resolve(s.Schema)
	if err != nil {
		return nil, "", err
	}
	for i, name := range path {
		if cur, err = s.Elements(cur, name); err != nil {
			return nil, "", err
		}
		prop, ok := cur.Properties[name]
		if !ok {
			return nil, "", fmt.Errorf("%w: field %q in %s", ErrNotFound, strings.Join(path[:i+1], "."), s.Name)
		}
		if cur, description, err = s.resolve(&prop); err != nil {
			return nil, "", err
		}
	}
	return cur, description, nil
}

// Elements is where a field named name of in is looked for: in itself when
// it has that property, else in its array items or map values (resolved),
// as deep as they nest. A schema with neither is returned as it is.
func (s *Schema) Elements(in *spec.Schema, name string) (*spec.Schema, error) {
	cur := in
	for range maxRefDepth {
		if _, ok := cur.Properties[name]; ok {
			return cur, nil
		}
		var next *spec.Schema
		switch {
		case cur.Items != nil && cur.Items.Schema != nil:
			next = cur.Items.Schema
		case cur.AdditionalProperties != nil && cur.AdditionalProperties.Schema != nil:
			next = cur.AdditionalProperties.Schema
		default:
			return cur, nil
		}
		var err error
		if cur, _, err = s.resolve(next); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("openapi3: items or values nested deeper than %d", maxRefDepth)
}
