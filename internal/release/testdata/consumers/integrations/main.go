// A controller-runtime manager and a kubectl-style command over kubeatlas.
package main

import (
	"log"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeatlas/kubeatlas/integrations/cliruntime"
	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
)

func main() {
	flags := genericclioptions.NewConfigFlags(true)
	flags.AddFlags(pflag.CommandLine)
	pflag.Parse()
	getter := cliruntime.NewGetter(flags)
	if _, err := getter.ToRESTMapper(); err != nil {
		log.Fatal(err)
	}

	p := controllerruntime.New()
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{MapperProvider: p.MapperProvider})
	if err != nil {
		log.Fatal(err)
	}
	if err := mgr.Add(p); err != nil {
		log.Fatal(err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Fatal(err)
	}
}
