// Command kubeatlas-apiserver serves discovery.kubeatlas.io/v1alpha1, what
// a cluster's API servers serve (apigroups) and whether they agree
// (apiservers, clusterconsistencies), as an aggregated API server that
// every client can list and watch. deploy/ at the repository's root installs
// it in a cluster; --local serves it on loopback for development:
//
//	kubeatlas-apiserver --local --kubeconfig ~/.kube/config --secure-port 8443 --local-kubeconfig /tmp/atlas.kubeconfig
//	kubectl --kubeconfig /tmp/atlas.kubeconfig get apigroups -w
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/kubeatlas/kubeatlas/consistency"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/kubeatlas/kubeatlas/discovery"

	"github.com/kubeatlas/kubeatlas/apiserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "kubeatlas-apiserver:", err)
		os.Exit(1)
	}
}

// commonFlags are the flags --help shows, in this order: what running it
// on loopback and in a cluster needs. The generic server's ~90 others
// (authentication, authorization, audit, TLS, tracing, feature
// gates ...) are
// --help-all's.
var commonFlags = []string{"local", "kubeconfig", "local-kubeconfig", "secure-port", "bind-address", "cert-dir", "consistency-check-interval", "help-all"}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o := apiserver.NewOptions()
	fs := pflag.NewFlagSet("kubeatlas-apiserver", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; --help is printed below
	fs.Usage = func() {}
	o.AddFlags(fs)
	helpAll := fs.Bool("help-all", false, "print every flag, the generic API server's too")
	// CBOR is served beside JSON and YAML (protobuf would need generated
	// code): k8s.io/apiserver serves it behind an alpha gate, on here unless
	// --feature-gates=CBORServingAndStorage=false.
	if err := utilfeature.DefaultMutableFeatureGate.Set(string(features.CBORServingAndStorage) + "=true"); err != nil {
		return err
	}
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) || *helpAll {
		printHelp(stdout, fs, *helpAll)
		return pflag.ErrHelp
	}
	if err != nil {
		return err
	}
	upstream, err := o.Upstream()
	if err != nil {
		return fmt.Errorf("the upstream cluster: %w", err)
	}
	scheme := apiserver.NewScheme()
	codecs := serializer.NewCodecFactory(scheme)
	cfg, err := o.Config(scheme, codecs)
	if err != nil {
		return err
	}
	client, err := discovery.New(upstream, discovery.WithLogger(slog.Default()))
	if err != nil {
		return err
	}
	feed := &apiserver.Feed{Client: client, Stores: apiserver.NewStores(nil), CheckInterval: o.CheckInterval}
	if len(o.APIServers) > 0 {
		feed.CheckOptions = append(feed.CheckOptions, consistency.WithAPIServers(o.APIServers...))
	}
	srv, err := apiserver.New(cfg, scheme, codecs, feed)
	if err != nil {
		return err
	}
	if o.Local {
		url := "https://" + cfg.SecureServing.Listener.Addr().String()
		path := o.LocalKubeconfig
		if path == "" {
			path = filepath.Join(o.Recommended.SecureServing.ServerCert.CertDirectory, "kubeconfig")
		}
		if err := apiserver.WriteLocalKubeconfig(path, url, o.Recommended.SecureServing.ServerCert.CertKey.CertFile); err != nil {
			return err
		}
		fmt.Printf("serving %s\nkubectl --kubeconfig %s get apigroups\n", url, path)
	}
	return srv.Run(ctx)
}

// printHelp prints the common flags first, then, with all, every other.
func printHelp(w io.Writer, fs *pflag.FlagSet, all bool) {
	common := pflag.NewFlagSet("common", pflag.ContinueOnError)
	common.SortFlags = false
	for _, name := range commonFlags {
		common.AddFlag(fs.Lookup(name))
	}
	fmt.Fprintf(w, "Usage: kubeatlas-apiserver [flags]\n\nServes discovery.kubeatlas.io/v1alpha1 (apigroups, apiservers, clusterconsistencies) as an aggregated API server; --local serves it on loopback for development:\n  kubeatlas-apiserver --local --kubeconfig ~/.kube/config\n\nFlags:\n%s", common.FlagUsages())
	rest := pflag.NewFlagSet("rest", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if common.Lookup(f.Name) == nil {
			rest.AddFlag(f)
		}
	})
	if !all {
		fmt.Fprintf(w, "\nand %d flags of k8s.io/apiserver's generic server (authentication, authorization, audit, TLS, tracing, feature gates, ...): --help-all\n", countFlags(rest))
		return
	}
	fmt.Fprintf(w, "\nThe generic API server's flags (k8s.io/apiserver):\n%s", rest.FlagUsages())
}

func countFlags(fs *pflag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	return n
}
