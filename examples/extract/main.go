// Command extract prints what a field manager owns of an object: the
// configuration it applied (server-side apply), extracted from the
// object's managedFields with the types of its group-version's OpenAPI v3
// document alone (openapi3/typed), where client-go's extractor parses the
// whole OpenAPI v2 document first.
//
//	go run ./examples/extract deployments web                   # an embedded cluster, in process, when there is no kubeconfig
//	go run ./examples/extract deployments web --field-manager sidecar-injector
//	go run ./examples/extract --kubeconfig ~/.kube/config -n kube-system deployment.apps/coredns --field-manager kubectl --subresource status
//
// With no --field-manager, every manager that applied to the object is
// extracted in turn. The embedded cluster serves the discovery and the
// OpenAPI v3 documents (descriptions removed) of a real v1.36.3 server and
// one Deployment, default/web, to which two managers applied. The OpenAPI
// documents are kept in $KUBECACHEDIR, else the user cache directory: a
// second run reads no unchanged document.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

func main() {
	os.Exit(cli.Status(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) error {
	var conn cli.Connection
	var namespace, manager, subresource string
	fs := cli.NewFlagSet("extract")
	conn.StartEmbedded = startEmbedded
	conn.Register(fs)
	fs.StringVarP(&namespace, "namespace", "n", "default", "the object's namespace (ignored for cluster-scoped kinds)")
	fs.StringVar(&manager, "field-manager", "", "the field manager whose applied configuration to print (default: every manager that applied)")
	fs.StringVar(&subresource, "subresource", "", `"status" to extract what was applied to the status subresource`)
	if err := cli.Parse(fs, args, stderr); err != nil {
		return err
	}
	resource, name, err := objectArgs(fs.Args())
	if err != nil {
		return err
	}
	if subresource != "" && subresource != "status" {
		return fmt.Errorf("--subresource %q: only status is extracted", subresource)
	}
	cfg, stop, embedded, err := conn.Config(stderr)
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dc, err := discovery.New(cfg)
	if err != nil {
		return err
	}
	mapper, err := restmapper.New(dc)
	if err != nil {
		return err
	}
	gvr, err := mapper.ResourceFor(schema.ParseGroupResource(resource).WithVersion(""))
	if meta.IsNoMatchError(err) { // kubectl's words, where the mapper's are "no matches for /, Resource=widgets"
		return fmt.Errorf("the server doesn't have a resource type %q", resource)
	}
	if err != nil {
		return err
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return err
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if mapping.Scope.Name() == "namespace" {
		ri = dyn.Resource(gvr).Namespace(namespace)
	}
	obj, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}

	oc, err := openapi3.New(cfg, openapi3.WithDiskCache(cli.OpenCache(cli.CacheName(cfg, embedded), stderr)))
	if err != nil {
		return err
	}
	conv, err := typed.New(oc)
	if err != nil {
		return err
	}
	ex := conv.Extractor()
	managers := []string{manager}
	if manager == "" {
		managers = appliers(obj.GetManagedFields(), subresource)
		if len(managers) == 0 {
			return fmt.Errorf("no field manager applied to %s %s", resource, name)
		}
	}
	for i, m := range managers {
		extract := ex.Extract
		if subresource == "status" {
			extract = ex.ExtractStatus
		}
		out, err := extract(obj, m)
		if err != nil {
			return err
		}
		b, err := yaml.Marshal(out.Object)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(stdout, "---")
		}
		fmt.Fprintf(stdout, "# applied by %s\n%s", m, b)
	}
	return nil
}

// objectArgs reads "RESOURCE NAME" or "RESOURCE/NAME", as kubectl get does.
func objectArgs(args []string) (resource, name string, err error) {
	switch {
	case len(args) == 1 && strings.Count(args[0], "/") == 1:
		resource, name, _ = strings.Cut(args[0], "/")
	case len(args) == 2:
		resource, name = args[0], args[1]
	default:
		return "", "", errors.New("name one object: RESOURCE NAME or RESOURCE/NAME (deployments web, deployment.apps/web)")
	}
	if resource == "" || name == "" {
		return "", "", fmt.Errorf("name one object: got %q", strings.Join(args, " "))
	}
	return resource, name, nil
}

// appliers are the managers of Apply entries (of the subresource), in order.
func appliers(entries []metav1.ManagedFieldsEntry, subresource string) []string {
	var out []string
	for _, e := range entries {
		if e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource {
			out = append(out, e.Manager)
		}
	}
	return out
}
