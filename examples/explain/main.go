// Command explain is kubectl explain on kubeatlas: the documentation of a
// kind or of a field path, from the cluster's OpenAPI v3.
//
//	go run ./examples/explain deployments.spec.template.spec.containers
//	go run ./examples/explain --recursive deploy.spec
//
// The resource is resolved like kubectl resolves it (plural, singular,
// short name, resource.group); documents are read through a persistent
// cache ($KUBECACHEDIR, else the user cache directory), so a second run asks
// the server for the OpenAPI root and nothing else.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	var conn cli.Connection
	var recursive bool
	var apiVersion string
	fs := cli.NewFlagSet("explain")
	conn.Register(fs)
	fs.BoolVar(&recursive, "recursive", false, "print the names of all fields below, recursively")
	fs.StringVar(&apiVersion, "api-version", "", "the group/version to explain (default: the preferred one)")
	if err := cli.Parse(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: explain [flags] RESOURCE[.FIELD.PATH]")
	}

	cfg, stop, embedded, err := conn.Config(stderr)
	if err != nil {
		return err
	}
	defer stop()
	disk := cli.OpenCache(cli.CacheName(cfg, embedded), stderr)
	// Revalidated once, now (two 304s when nothing changed), as kubectl
	// does on every run; then answered from without asking again.
	dc, err := discovery.New(cfg, discovery.WithDiskCache(disk), discovery.WithMaxAge(100*365*24*time.Hour))
	if err != nil {
		return err
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	if snap, err := dc.Refresh(rctx); snap == nil {
		return err
	} else if rerr := snap.RefreshError(); rerr != nil {
		fmt.Fprintf(stderr, "warning: could not revalidate the cached discovery (%s old): %v\n", time.Since(snap.Validated()).Round(time.Second), rerr)
	}
	mapper, err := restmapper.New(dc, restmapper.WithWarningHandler(func(msg string) {
		fmt.Fprintf(stderr, "Warning: %s\n", msg) // as kubectl's warning handler prints it
	}))
	if err != nil {
		return err
	}
	oc, err := openapi3.New(cfg, openapi3.WithDiskCache(disk))
	if err != nil {
		return err
	}

	gvk, fields, err := resolve(mapper, fs.Arg(0), apiVersion)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kind, err := oc.Kind(ctx, gvk)
	if err != nil {
		return err
	}
	// The header comes first, as in kubectl, also before a field error.
	if gvk.Group != "" {
		fmt.Fprintf(stdout, "GROUP:      %s\n", gvk.Group)
	}
	fmt.Fprintf(stdout, "KIND:       %s\nVERSION:    %s\n\n", gvk.Kind, gvk.Version)
	field, description, err := kind.Field(fields...)
	if errors.Is(err, openapi3.ErrNotFound) {
		// kubectl names the last field of the path, whichever is missing.
		return fmt.Errorf("field %q does not exist", fields[len(fields)-1])
	}
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		raw, err := rawField(kind, fields)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "FIELD: %s <%s>\n\n", fields[len(fields)-1], typeName(kind, raw))
	}
	// A list is explained by its items: their description and fields.
	for field.Items != nil && field.Items.Schema != nil {
		if field, err = kind.Resolve(field.Items.Schema); err != nil {
			return err
		}
		if field.Description != "" && field.Description != description {
			description += "\n" + field.Description
		}
	}
	fmt.Fprintf(stdout, "DESCRIPTION:\n%s\n\n", indent(description, "    "))
	if len(field.Properties) == 0 {
		return nil
	}
	fmt.Fprintln(stdout, "FIELDS:")
	printFields(stdout, kind, field, "  ", recursive, map[string]bool{})
	return nil
}

// resolve splits "resource[.group][.field.path]" as kubectl explain does
// and maps the resource (plural, singular or short name, in the
// group-version given by --api-version if any) to its kind: the first of
// the resource's candidates whose "resource.group" starts the input names
// it with its group, else the first candidate, and the rest is the field
// path.
func resolve(m *restmapper.Mapper, in, apiVersion string) (schema.GroupVersionKind, []string, error) {
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
		return schema.GroupVersionKind{}, nil, fmt.Errorf("the server doesn't have a resource type %q in %s: %w", gvr.Resource, apiVersion, err)
	}
	return gvk, fields, nil
}

// rawField is the field's schema before its reference is followed, which
// names its type ("[]Container", "DeploymentSpec").
func rawField(kind *openapi3.Schema, fields []string) (*spec.Schema, error) {
	parent, _, err := kind.Field(fields[:len(fields)-1]...)
	if err != nil {
		return nil, err
	}
	// A list's fields are its items'.
	for parent.Items != nil && parent.Items.Schema != nil {
		if parent, err = kind.Resolve(parent.Items.Schema); err != nil {
			return nil, err
		}
	}
	p, ok := parent.Properties[fields[len(fields)-1]]
	if !ok {
		return nil, fmt.Errorf("field %q not found", strings.Join(fields, "."))
	}
	return &p, nil
}

// typeName writes a schema's type the way kubectl explain does: a
// reference by its short name, unless it names a plain type (Time is a
// string).
func typeName(kind *openapi3.Schema, s *spec.Schema) string {
	if ref := refName(s); ref != "" {
		if target, err := kind.Resolve(s); err == nil && len(target.Type) > 0 && !target.Type.Contains("object") && !target.Type.Contains("array") {
			return target.Type[0]
		}
		return ref
	}
	switch {
	case s.Type.Contains("array") && s.Items != nil && s.Items.Schema != nil:
		return "[]" + typeName(kind, s.Items.Schema)
	case s.Type.Contains("object") && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeName(kind, s.AdditionalProperties.Schema)
	case len(s.Type) > 0:
		return s.Type[0]
	}
	return "Object"
}

func refName(s *spec.Schema) string {
	ref := s.Ref.String()
	if ref == "" && len(s.AllOf) == 1 {
		ref = s.AllOf[0].Ref.String()
	}
	if ref == "" {
		return ""
	}
	return ref[strings.LastIndex(ref, ".")+1:]
}

// printFields lists a schema's fields, as kubectl's "fieldList" template
// does: with recursive, each field's own fields below it, through
// references, allOf wrappers, array items and map values. As in kubectl, a
// reference is not expanded again below itself (onPath holds the
// references being expanded): that is what ends self-referencing schemas
// (JSONSchemaProps) where kubectl ends them.
func printFields(w io.Writer, kind *openapi3.Schema, s *spec.Schema, prefix string, recursive bool, onPath map[string]bool) {
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
		fmt.Fprintf(w, "%s%s\t<%s>%s%s\n", prefix, name, typeName(kind, &p), required, enumLine(p.Enum, prefix))
		if !recursive {
			fmt.Fprintf(w, "%s\n\n", indent(p.Description+refDescription(kind, &p), prefix+"  "))
			continue
		}
		printFields(w, kind, &p, prefix+"  ", true, onPath)
	}
	if !recursive {
		return
	}
	for i := range s.AllOf {
		printFields(w, kind, &s.AllOf[i], prefix, true, onPath)
	}
	if s.Items != nil && s.Items.Schema != nil {
		printFields(w, kind, s.Items.Schema, prefix, true, onPath)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		printFields(w, kind, s.AdditionalProperties.Schema, prefix, true, onPath)
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

// refDescription is the referenced schema's own description, which kubectl
// prints after the field's.
func refDescription(kind *openapi3.Schema, p *spec.Schema) string {
	if refName(p) == "" || p.Description == "" {
		return ""
	}
	child, err := kind.Resolve(p)
	if err != nil || child.Description == "" {
		return ""
	}
	return "\n" + child.Description
}

// indent wraps text at 80 columns under a prefix.
func indent(text, prefix string) string {
	var out []string
	for _, para := range strings.Split(strings.TrimSpace(text), "\n") {
		line := prefix
		for _, word := range strings.Fields(para) {
			if len(line)+len(word)+1 > 80 && strings.TrimSpace(line) != "" {
				out = append(out, line)
				line = prefix
			}
			if strings.TrimSpace(line) != "" {
				line += " "
			}
			line += word
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
