// Command kubectl-atlas is a kubectl plugin: kubectl api-resources and
// kubectl explain on kubeatlas, with kubectl's connection flags (cli-runtime's
// ConfigFlags) and output.
//
//	(cd examples/kubectl-atlas && go install .)   # kubectl finds kubectl-atlas on the PATH
//	kubectl atlas api-resources --api-group apps -o wide
//	kubectl atlas explain deploy.spec.template.spec.containers
//
// Discovery, the REST mapper and OpenAPI v3 come through
// integrations/cliruntime's Getter over the ConfigFlags, cached in the
// kubeatlas directory of kubectl's cache directory (--cache-dir, else
// $KUBECACHEDIR, else ~/.kube/cache). The selection and printing are those
// of examples/api-resources and examples/explain
// (examples/internal/apiresources and examples/internal/explain).
//
// Unlike those commands it starts no embedded fake cluster: without a
// kubeconfig it does what kubectl does (ConfigFlags' default server,
// localhost:8080, and its error).
//
// It is a module of its own so that cli-runtime stays out of the core
// module's requirements.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/apiresources"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/examples/internal/explain"
	"github.com/kubeatlas/kubeatlas/integrations/cliruntime"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

const usage = `kubectl atlas: kubectl api-resources and kubectl explain on kubeatlas.

Usage:
  kubectl atlas api-resources [flags]
  kubectl atlas explain [flags] RESOURCE[.FIELD.PATH]

Flags are kubectl's (kubectl atlas SUBCOMMAND --help lists them). There is no
embedded fake cluster: without a kubeconfig or --server, the plugin
does what kubectl does and tries localhost:8080.
`

// noEmbedded is said in each subcommand's --help, where users of
// examples/api-resources and examples/explain would look for it.
const noEmbedded = "Without a kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) or --server, it does what kubectl does\n" +
	"and tries localhost:8080: there is no embedded fake cluster, as examples/api-resources has.\n"

// run dispatches to a subcommand with a pflag flag set of its own, as
// examples/api-resources and examples/explain parse theirs (cli.NewFlagSet),
// rather than with cobra: two subcommands need no command tree, and cobra's
// own printing of errors and usage would have to be silenced to keep
// kubectl's. (cobra is linked either way, by genericclioptions, so neither
// choice changes the binary's size.)
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a subcommand is required: api-resources or explain")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "api-resources":
		return apiResources(args, stdout, stderr)
	case "explain":
		return explainCmd(args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown subcommand %q for \"kubectl atlas\": api-resources or explain", sub)
}

// parse parses args into fs, to which kubectl's connection flags are added
// first. With --help it prints the usage to stdout and returns done.
func parse(fs *pflag.FlagSet, flags *genericclioptions.ConfigFlags, line string, args []string, stdout io.Writer) (done bool, err error) {
	flags.AddFlags(fs)
	err = fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(stdout, "Usage:\n  kubectl atlas %s\n\n%s\nFlags:\n%s", line, noEmbedded, fs.FlagUsages())
		return true, nil
	}
	return false, err
}

// maxAge: every run revalidates (two 304s when nothing changed), as
// kubectl does, so the cached discovery never expires on its own.
var maxAge = discovery.WithMaxAge(100 * 365 * 24 * time.Hour)

func apiResources(args []string, stdout, stderr io.Writer) error {
	flags := genericclioptions.NewConfigFlags(true)
	var o apiresources.Options
	fs := cli.NewFlagSet("api-resources")
	o.AddFlags(fs)
	if done, err := parse(fs, flags, "api-resources [flags]", args, stdout); done || err != nil {
		return err
	}
	if err := o.Complete(fs); err != nil {
		return err
	}
	start := time.Now()
	client, err := cliruntime.NewGetter(flags, cliruntime.WithDiscoveryOptions(maxAge)).Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return apiresources.Run(ctx, client, &o, start, stdout, stderr)
}

func explainCmd(args []string, stdout, stderr io.Writer) error {
	flags := genericclioptions.NewConfigFlags(true)
	var o explain.Options
	fs := cli.NewFlagSet("explain")
	o.AddFlags(fs)
	if done, err := parse(fs, flags, explain.Usage, args, stdout); done || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: kubectl atlas %s", explain.Usage)
	}
	getter := cliruntime.NewGetter(flags, cliruntime.WithDiscoveryOptions(maxAge),
		cliruntime.WithWarningHandler(func(msg string) {
			fmt.Fprintf(stderr, "Warning: %s\n", msg) // as kubectl's warning handler prints it
		}))
	dc, err := getter.Client()
	if err != nil {
		return err
	}
	mapper, err := getter.ToRESTMapper()
	if err != nil {
		return err
	}
	oc, err := getter.OpenAPIV3()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return explain.Run(ctx, dc, mapper, oc, fs.Arg(0), o, stdout, stderr)
}
