package controllerruntime

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// Kind is controller-runtime's source.Kind for a kind that may not be
// served yet (its CRD not installed, or not in this version): it starts
// source.Kind as soon as discovery serves the kind, told by the Provider's
// Watch, instead of source.Kind's own wait, which retries every 10 s and
// logs an error each time. Until then the controller runs with nothing to
// sync: a missing kind neither fails its start nor the manager.
//
//	ctrl.NewControllerManagedBy(mgr).Named("widgets").
//		WatchesRawSource(controllerruntime.Kind(p, mgr, widget, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
//		Complete(r)
//
// cl is the manager (or cluster) whose mapper p made; its scheme names the
// object's kind.
func Kind[T client.Object](p *Provider, cl cluster.Cluster, obj T, h handler.TypedEventHandler[T, reconcile.Request], preds ...predicate.TypedPredicate[T]) source.SyncingSource {
	return &waitingKind[T]{p: p, cl: cl, obj: obj, h: h, preds: preds, ready: make(chan struct{})}
}

// retryEvery is how often a waiting Kind looks again without a change from
// discovery (when the Provider is not watching, a lookup's miss refreshes).
const retryEvery = 10 * time.Second

type waitingKind[T client.Object] struct {
	p     *Provider
	cl    cluster.Cluster
	obj   T
	h     handler.TypedEventHandler[T, reconcile.Request]
	preds []predicate.TypedPredicate[T]

	ready    chan struct{} // closed once inner has started, or failed to
	inner    source.SyncingSource
	startErr error
}

func (k *waitingKind[T]) String() string { return "kubeatlas.Kind(" + k.kindName() + ")" }

func (k *waitingKind[T]) kindName() string {
	gvk, err := apiutil.GVKForObject(k.obj, k.cl.GetScheme())
	if err != nil {
		return "?"
	}
	return gvk.String()
}

// Start returns at once; the kind's source starts when discovery serves it.
func (k *waitingKind[T]) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	gvk, err := apiutil.GVKForObject(k.obj, k.cl.GetScheme())
	if err != nil {
		return err
	}
	mapper := k.cl.GetRESTMapper()
	served := func() bool {
		_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		return err == nil || !meta.IsNoMatchError(err)
	}
	changed := make(chan struct{}, 1)
	unsubscribe := func() {}
	if dc := k.p.clientFor(mapper); dc != nil {
		unsubscribe = dc.Subscribe(func(discovery.Change) {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
	}
	go func() {
		defer unsubscribe()
		for !served() {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-time.After(retryEvery):
			}
		}
		inner := source.Kind(k.cl.GetCache(), k.obj, k.h, k.preds...)
		k.inner, k.startErr = inner, inner.Start(ctx, queue)
		close(k.ready)
	}()
	return nil
}

// WaitForSync waits for the kind's cache to sync once it is served; before
// that there is nothing to sync.
func (k *waitingKind[T]) WaitForSync(ctx context.Context) error {
	select {
	case <-k.ready:
		if k.startErr != nil {
			return k.startErr
		}
		return k.inner.WaitForSync(ctx)
	default:
		return nil
	}
}
