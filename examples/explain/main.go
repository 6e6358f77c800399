// Command explain is kubectl explain on kubeatlas: the documentation of a
// kind or of a field path, from the cluster's OpenAPI v3.
//
//	go run ./examples/explain deployments.spec.template.spec.containers
//	go run ./examples/explain --recursive deploy.spec
//
// The resource is resolved like kubectl resolves it (plural, singular,
// short name, resource.group); documents are read through a persistent
// cache ($KUBECACHEDIR, else the user cache directory), so a second run asks
// the server for the OpenAPI root and nothing else. The resolution and
// printing are examples/internal/explain, which the kubectl-atlas plugin
// shares.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/examples/internal/explain"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

func main() {
	os.Exit(cli.Status(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) error {
	var conn cli.Connection
	var o explain.Options
	fs := cli.NewFlagSet("explain")
	conn.Register(fs)
	o.AddFlags(fs)
	if err := cli.ParseUsage(fs, explain.Usage, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: %s", explain.Usage)
	}

	cfg, stop, embedded, err := conn.Config(stderr)
	if err != nil {
		return err
	}
	defer stop()
	disk := cli.OpenCache(cli.CacheName(cfg, embedded), stderr)
	// explain.Run revalidates once, so the cached discovery never expires
	// on its own.
	dc, err := discovery.New(cfg, discovery.WithDiskCache(disk), discovery.WithMaxAge(100*365*24*time.Hour))
	if err != nil {
		return err
	}
	mapper, err := restmapper.New(dc, restmapper.WithWarningHandler(func(msg string) {
		fmt.Fprintf(stderr, "Warning: %s\n", msg) // as kubectl's warning handler prints it
	}))
	if err != nil {
		return err
	}
	ocOpts := []openapi3.Option{openapi3.WithDiskCache(disk)}
	if disk != nil {
		// With the server down, explain from the cached documents and say
		// so, as the cached discovery does.
		ocOpts = append(ocOpts, openapi3.WithStaleRootOnError())
	}
	oc, err := openapi3.New(cfg, ocOpts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return explain.Run(ctx, dc, mapper, oc, fs.Arg(0), o, stdout, stderr)
}
