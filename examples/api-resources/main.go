// Command api-resources is kubectl api-resources on kubeatlas: the API
// resources a cluster serves, read in two requests (two 304s when nothing
// changed since the last run, none with --cached), from a persistent cache.
//
//	go run ./examples/api-resources                 # an embedded fake cluster, in process, when there is no kubeconfig
//	go run ./examples/api-resources -o name --stats
//	go run ./examples/api-resources --kubeconfig ~/.kube/config --context prod --api-group apps -o wide
//
// The cache lives in $KUBECACHEDIR, else the user cache directory
// (kubeatlas/<server>). The selection and printing are
// examples/internal/apiresources, which the kubectl-atlas plugin shares.
package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/apiresources"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/examples/internal/lightcluster"
)

func main() {
	os.Exit(cli.Status(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) error {
	var conn cli.Connection
	var o apiresources.Options
	fs := cli.NewFlagSet("api-resources")
	// Discovery is all this command reads: its embedded cluster is served
	// in this process (a light build), not by examples/fake-apiserver.
	conn.StartEmbedded = lightcluster.Start
	conn.Register(fs)
	o.AddFlags(fs)
	if err := cli.Parse(fs, args, stderr); err != nil {
		return err
	}
	if err := o.Complete(fs); err != nil {
		return err
	}
	cfg, stop, embedded, err := conn.Config(stderr)
	if err != nil {
		return err
	}
	defer stop()

	start := time.Now() // --stats times discovery, not the embedded cluster's start
	disk := cli.OpenCache(cli.CacheName(cfg, embedded), stderr)
	// Every run revalidates (apiresources.Run), so the cached discovery
	// never expires on its own.
	client, err := discovery.New(cfg, discovery.WithDiskCache(disk), discovery.WithMaxAge(100*365*24*time.Hour))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return apiresources.Run(ctx, client, &o, start, stdout, stderr)
}
