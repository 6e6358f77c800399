// Command controller is a minimal controller-runtime controller on
// kubeatlas. It reconciles objects of one kind, named by --kind, whose CRD
// need not exist yet: it starts anyway, and when the CRD is installed it
// begins reconciling without a restart. The manager's REST mapper is
// kubeatlas's (one line), which follows the cluster's CRDs as they change;
// controllerruntime.Kind starts watching the kind once the cluster serves
// it, where controller-runtime's own source.Kind would retry every 10 s,
// log an error each time, and fail the controller after its cache sync
// timeout.
//
// Reconciling sets the annotation kubeatlas.example/reconciled-generation
// to the object's metadata.generation, and logs one line.
//
//	go run . --kubeconfig ~/.kube/config --kind Widget.v1.example.com
//
// It needs a real cluster (--kubeconfig, $KUBECONFIG, in-cluster config
// or ~/.kube/config, in that order: controller-runtime's ctrl.GetConfig).
// Unlike the other examples it has no embedded fake cluster, which serves
// discovery but not objects.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
)

// annotation records the generation last reconciled.
const annotation = "kubeatlas.example/reconciled-generation"

func main() {
	kind := flag.String("kind", "Widget.v1.example.com", "the kind to reconcile, as Kind.version.group (Kind.v1. for the core group)")
	leaderElect := flag.Bool("leader-elect", false, "elect a leader among replicas (in a cluster: the lease is in the pod's namespace)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `Usage: controller [flags]

Reconciles objects of --kind, whose CRD may be installed after it starts:
sets the annotation %s and logs a line.
It needs a cluster: --kubeconfig, $KUBECONFIG, in-cluster config or
~/.kube/config, in that order (there is no embedded fake cluster: it serves
discovery, not objects). Stop it with SIGINT or SIGTERM.

`, annotation)
		flag.PrintDefaults() // --kubeconfig is controller-runtime's flag
	}
	flag.Parse()

	logger := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go's logs in the same format
	if err := run(ctrl.SetupSignalHandler(), *kind, *leaderElect); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kind string, leaderElect bool) error {
	gvk, _ := schema.ParseKindArg(kind)
	if gvk == nil {
		return fmt.Errorf("--kind %q: want Kind.version.group, like Widget.v1.example.com", kind)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no cluster to run against (pass --kubeconfig, set KUBECONFIG or run in a cluster): %w", err)
	}

	p := controllerruntime.New()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		MapperProvider:         p.MapperProvider, // kubeatlas's REST mapper
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         leaderElect,
		LeaderElectionID:       "kubeatlas-example-controller",
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(p); err != nil { // follows CRDs as long as the manager runs
		return err
	}

	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(*gvk)
	r := &reconciler{client: mgr.GetClient(), gvk: *gvk}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("kubeatlas-example").
		WatchesRawSource(controllerruntime.Kind(p, mgr, obj, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
		Complete(r)
	if err != nil {
		return err
	}
	ctrl.Log.Info("starting", "kind", gvk.String(), "server", cfg.Host)
	return mgr.Start(ctx) // nil on SIGINT or SIGTERM
}

// reconciler records each object's generation in an annotation: visible
// with kubectl get -o yaml, and idempotent.
type reconciler struct {
	client client.Client
	gvk    schema.GroupVersionKind
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.gvk)
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if ctx.Err() != nil {
			// The manager is stopping (SIGTERM) while this reconcile ran:
			// not an error, and the next process reconciles the object.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err) // deleted: nothing to do
	}
	generation := strconv.FormatInt(obj.GetGeneration(), 10)
	log := ctrl.LoggerFrom(ctx).WithValues("generation", generation)
	if obj.GetAnnotations()[annotation] == generation {
		log.Info("reconciled", "changed", false)
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(obj.DeepCopy())
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[annotation] = generation
	obj.SetAnnotations(annotations)
	if err := r.client.Patch(ctx, obj, patch); err != nil {
		if ctx.Err() != nil {
			return ctrl.Result{}, nil // stopping, as above
		}
		return ctrl.Result{}, err // logged by controller-runtime, and retried
	}
	log.Info("reconciled", "changed", true)
	return ctrl.Result{}, nil
}
