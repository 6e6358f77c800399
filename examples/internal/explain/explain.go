// Package explain is kubectl explain on kubeatlas, shared by
// examples/explain and the kubectl-atlas plugin: its flags, the resolution
// of "resource[.group][.field.path]" as kubectl resolves it, and kubectl's
// plaintext output, byte for byte, from the cluster's OpenAPI v3. The
// commands bring the connection.
package explain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mitchellh/go-wordwrap"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// Options are kubectl explain's flags.
type Options struct {
	Recursive  bool
	APIVersion string
}

// AddFlags adds the flags as kubectl spells them.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Recursive, "recursive", false, "print the names of all fields below, recursively")
	fs.StringVar(&o.APIVersion, "api-version", "", "the group/version to explain (default: the preferred one)")
}

// Usage is the command line kubectl explain takes, for errors.
const Usage = "explain [flags] RESOURCE[.FIELD.PATH]"

// Run explains in ("resource[.group][.field.path]") as kubectl does. It
// revalidates dc first, once (two 304s when nothing changed), as kubectl
// does on every run; mapper (over dc) then answers without asking again,
// and oc reads the kind's document (from its cache, when it has one).
// Where the server cannot be reached it goes on with the cached discovery
// and, when oc keeps its root (openapi3.WithStaleRootOnError), the cached
// documents, and says so on stderr. A field path the kind's held schema
// lacks reads oc's root again, at most once a second (openapi3.Client.Kind
// with the path): an oc kept across runs explains a field a CRD gained
// since it read the kind's document, with no watch to tell it.
func Run(ctx context.Context, dc *discovery.Client, mapper meta.RESTMapper, oc *openapi3.Client, in string, o Options, stdout, stderr io.Writer) error {
	if snap, err := dc.Refresh(ctx); snap == nil {
		return err
	} else if rerr := snap.RefreshError(); rerr != nil {
		fmt.Fprintf(stderr, "warning: could not revalidate the cached discovery (%s old): %v\n", time.Since(snap.Validated()).Round(time.Second), rerr)
	}
	gvk, fields, err := resolve(mapper, in, o.APIVersion)
	if err != nil {
		return err
	}
	// With the field path, so that a field the held schema lacks (a CRD
	// changed since oc read it, when oc is long-lived) reads the root
	// again (at most once a second) before it is said not to exist.
	kind, err := oc.Kind(ctx, gvk, fields...)
	if err != nil {
		return err
	}
	if serr := oc.StaleRoot(); serr != nil {
		fmt.Fprintf(stderr, "warning: could not read the OpenAPI root: %v: explaining from the documents cached before\n", serr)
	}
	// The header comes first, as in kubectl, also before a field error.
	if gvk.Group != "" {
		fmt.Fprintf(stdout, "GROUP:      %s\n", gvk.Group)
	}
	fmt.Fprintf(stdout, "KIND:       %s\nVERSION:    %s\n\n", gvk.Kind, gvk.Version)
	// What is explained: the kind's schema, or the field's as its parent
	// lists it (before references are followed), as kubectl's template
	// walks them.
	target := kind.Schema
	if len(fields) > 0 {
		if target, err = rawField(kind, fields); errors.Is(err, openapi3.ErrNotFound) {
			// kubectl names the last field of the path, whichever is missing.
			return fmt.Errorf("field %q does not exist", fields[len(fields)-1])
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "FIELD: %s <%s>\n%s\n\n", fields[len(fields)-1], typeName(kind, target), enumBlock(target.Enum))
	}
	description := descriptions(kind, target)
	if description == "" {
		description = "<empty>"
	}
	fmt.Fprintf(stdout, "DESCRIPTION:\n%s\n", indent(wrap(description, 76), 4))
	var list strings.Builder
	printFields(&list, kind, target, 1, o.Recursive, map[string]bool{})
	if list.Len() > 0 {
		fmt.Fprintf(stdout, "FIELDS:\n%s", list.String())
	}
	fmt.Fprintln(stdout) // kubectl ends with a blank line
	return nil
}

// descriptions is kubectl's "description" template: the schema's (or its
// reference's) description, then those of its allOf alternatives, array
// items and map values, each ending in a newline.
func descriptions(kind *openapi3.Schema, s *spec.Schema) string {
	if s.Ref.String() != "" {
		target, err := kind.Resolve(&spec.Schema{SchemaProps: spec.SchemaProps{Ref: s.Ref}})
		if err != nil {
			return ""
		}
		s = target
	}
	out := ""
	if s.Description != "" {
		out = s.Description + "\n"
	}
	for i := range s.AllOf {
		out += descriptions(kind, &s.AllOf[i])
	}
	if s.Items != nil && s.Items.Schema != nil {
		out += descriptions(kind, s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		out += descriptions(kind, s.AdditionalProperties.Schema)
	}
	return out
}

// wrap and indent are kubectl explain's template functions: word wrapping
// by the library kubectl uses, and a pad after every newline.
func wrap(s string, width int) string { return wordwrap.WrapString(s, uint(width)) }

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// enumBlock is kubectl's long view of an enum, under a FIELD line.
func enumBlock(enum []any) string {
	if len(enum) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("ENUM:")
	for _, v := range enum {
		if v == "" {
			v = `""`
		}
		fmt.Fprintf(&b, "\n    %v", v)
	}
	return b.String()
}

// resolve splits "resource[.group][.field.path]" as kubectl explain does
// and maps the resource (plural, singular or short name, in the
// group-version given by --api-version if any) to its kind: the first of
// the resource's candidates whose "resource.group" starts the input names
// it with its group, else the first candidate, and the rest is the field
// path.
func resolve(m meta.RESTMapper, in, apiVersion string) (schema.GroupVersionKind, []string, error) {
	resource, rest, _ := strings.Cut(in, ".")
	gvrs, err := m.ResourcesFor(schema.GroupVersionResource{Resource: resource})
	if err != nil || len(gvrs) == 0 {
		return schema.GroupVersionKind{}, nil, fmt.Errorf("the server doesn't have a resource type %q", resource)
	}
	gvr := gvrs[0]
	for _, c := range gvrs {
		if gr := c.GroupResource().String(); strings.HasPrefix(in, gr) {
			gvr, rest = c, strings.TrimPrefix(in[len(gr):], ".")
			break
		}
	}
	var fields []string
	if rest != "" {
		fields = strings.Split(rest, ".")
	}
	gvr.Version = ""
	if apiVersion != "" {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return schema.GroupVersionKind{}, nil, err
		}
		gvr.Group, gvr.Version = gv.Group, gv.Version
	}
	gvk, err := m.KindFor(gvr)
	if err != nil {
		where := ""
		if apiVersion != "" {
			where = " in " + apiVersion
		}
		return schema.GroupVersionKind{}, nil, fmt.Errorf("the server doesn't have a resource type %q%s: %w", gvr.Resource, where, err)
	}
	return gvk, fields, nil
}

// rawField is the field's schema before its reference is followed, which
// names its type ("[]Container", "DeploymentSpec"); a missing field on the
// path is openapi3.ErrNotFound.
func rawField(kind *openapi3.Schema, fields []string) (*spec.Schema, error) {
	parent, _, err := kind.Field(fields[:len(fields)-1]...)
	if err != nil {
		return nil, err
	}
	// A list's fields are its items', a map's its values'.
	if parent, err = kind.Elements(parent, fields[len(fields)-1]); err != nil {
		return nil, err
	}
	p, ok := parent.Properties[fields[len(fields)-1]]
	if !ok {
		return nil, fmt.Errorf("%w: field %q", openapi3.ErrNotFound, strings.Join(fields, "."))
	}
	return &p, nil
}

// typeName is kubectl's "typeGuess": []T for arrays, map[string]T for
// maps, a single allOf's type, a reference's short name (or its primitive
// type), else the schema's type, "Object" for objects and for none.
func typeName(kind *openapi3.Schema, s *spec.Schema) string {
	switch {
	case s.Items != nil && s.Items.Schema != nil:
		return "[]" + typeName(kind, s.Items.Schema)
	case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeName(kind, s.AdditionalProperties.Schema)
	case len(s.AllOf) == 1 && len(s.Properties) == 0:
		return typeName(kind, &s.AllOf[0])
	case s.Ref.String() != "":
		ref := s.Ref.String()
		target, err := kind.Resolve(&spec.Schema{SchemaProps: spec.SchemaProps{Ref: s.Ref}})
		if err != nil || len(target.Type) == 0 || target.Type[0] == "object" {
			name := ref[strings.LastIndex(ref, "/")+1:]
			if name = name[strings.LastIndex(name, ".")+1:]; name == "" {
				return "Object"
			}
			return name
		}
		return target.Type[0]
	case len(s.Type) == 0 || s.Type[0] == "object":
		return "Object"
	}
	return s.Type[0]
}

// printFields lists a schema's fields at a level of indentation, as
// kubectl's "fieldList" template does: each with its own description
// (none with recursive, where each field's own fields follow below it),
// through references, allOf alternatives, array items and map values. As
// in kubectl, a reference is not expanded again below itself (onPath holds
// the references being expanded): that is what ends self-referencing
// schemas (JSONSchemaProps) where kubectl ends them.
func printFields(w io.Writer, kind *openapi3.Schema, s *spec.Schema, level int, recursive bool, onPath map[string]bool) {
	if ref := s.Ref.String(); ref != "" {
		if onPath[ref] {
			return
		}
		onPath[ref] = true
		defer delete(onPath, ref)
		target, err := kind.Resolve(&spec.Schema{SchemaProps: spec.SchemaProps{Ref: s.Ref}})
		if err != nil {
			return
		}
		s = target
	}
	pad := strings.Repeat("  ", level)
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := s.Properties[name]
		required := ""
		if slices.Contains(s.Required, name) {
			required = " -required-"
		}
		fmt.Fprintf(w, "%s%s\t<%s>%s%s\n", pad, name, typeName(kind, &p), required, enumLine(p.Enum, pad))
		if !recursive {
			description := p.Description
			if description == "" {
				description = "<no description>"
			}
			fmt.Fprintf(w, "%s\n\n", indent(wrap(description, 78-2*level), 2*level+2))
			continue
		}
		printFields(w, kind, &p, level+1, true, onPath)
	}
	for i := range s.AllOf {
		printFields(w, kind, &s.AllOf[i], level, recursive, onPath)
	}
	if s.Items != nil && s.Items.Schema != nil {
		printFields(w, kind, s.Items.Schema, level, recursive, onPath)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		printFields(w, kind, s.AdditionalProperties.Schema, level, recursive, onPath)
	}
}

// enumLine is what kubectl prints under a field with an enum: its first
// four values ("" for the empty string), then ", ....".
func enumLine(enum []any, prefix string) string {
	if len(enum) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n" + prefix + "enum: ")
	for i, v := range enum {
		if i == 4 {
			b.WriteString(", ....")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if v == "" {
			v = `""`
		}
		fmt.Fprint(&b, v)
	}
	return b.String()
}
