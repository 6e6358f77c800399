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
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

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
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kubeatlas-apiserver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	o := apiserver.NewOptions()
	fs := pflag.NewFlagSet("kubeatlas-apiserver", pflag.ContinueOnError)
	o.AddFlags(fs)
	// CBOR is served beside JSON and YAML (protobuf would need generated
	// code): k8s.io/apiserver serves it behind an alpha gate, on here unless
	// --feature-gates=CBORServingAndStorage=false.
	if err := utilfeature.DefaultMutableFeatureGate.Set(string(features.CBORServingAndStorage) + "=true"); err != nil {
		return err
	}
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)
	if err := fs.Parse(args); err != nil {
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
