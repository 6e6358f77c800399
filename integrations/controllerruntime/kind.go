package controllerruntime

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// discovery; it refreshes discovery then unless the Provider's watch
// follows it (discovery.Client.Following).
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
	dc := k.p.clientFor(mapper)
	changed := make(chan struct{}, 1)
	unsubscribe := func() {}
	if dc != nil {
		unsubscribe = dc.Subscribe(func(discovery.Change) {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
	}
	go func() {
		defer unsubscribe()
		if !waitServed(ctx, mapper, dc, gvk, changed) {
			return
		}
		inner := source.Kind(k.cl.GetCache(), k.obj, k.h, k.preds...)
		k.inner, k.startErr = inner, inner.Start(ctx, queue)
		close(k.ready)
	}()
	return nil
}

// waitServed waits until gvk is served, and says so; false when ctx ended
// first. Every request it sends is bounded by ctx: with dc, the discovery
// client behind a mapper the Provider made, it reads dc itself and never
// asks the mapper, whose lookups refresh discovery on a miss (and once
// after a warm start) under context.Background(), bounded only by the
// client's refresh timeout (30 s): against a server that hangs, a loop
// that asked the mapper outlived ctx by as much (kubeatlas#34). The source it then
// starts asks the mapper, as controller-runtime's sources do.
//
// Discovery is read as the mapper's first miss of a question would: at
// once when the current snapshot lacks the kind, then on each change
// (free: the change is a new snapshot) and every retryEvery, a refresh
// unless dc is followed (the follower refreshes it on every change).
func waitServed(ctx context.Context, mapper meta.RESTMapper, dc *discovery.Client, gvk schema.GroupVersionKind, changed <-chan struct{}) bool {
	if dc == nil {
		// A mapper that is not ours: its lookups, and whatever they send,
		// are its own, and cannot be given ctx.
		served := func() bool {
			_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			return err == nil || !meta.IsNoMatchError(err)
		}
		for !served() {
			select {
			case <-ctx.Done():
				return false
			case <-changed:
			case <-time.After(retryEvery):
			}
		}
		return true
	}
	// look says whether the kind is served, reading discovery first when
	// there is no snapshot yet or refresh asks; read: it read the server.
	look := func(refresh bool) (served, read bool) {
		snap := dc.Current()
		var err error
		switch {
		case snap == nil:
			snap, err = dc.Snapshot(ctx) // the first read, or a warm start's
			read = true
		case refresh && !dc.Following():
			snap, err = dc.Refresh(ctx)
			read = true
		}
		switch {
		case ctx.Err() != nil:
			return false, read
		case snap == nil:
			// No discovery at all: as the mapper's error (not a
			// NoKindMatch) would, start the source, which reports it.
			return err != nil, read
		}
		return servesKind(snap, gvk), read
	}
	served, read := look(false)
	if !served && !read {
		served, _ = look(true) // the snapshot may predate the kind
	}
	for !served {
		refresh := false
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		case <-time.After(retryEvery):
			refresh = true
		}
		served, _ = look(refresh)
	}
	return ctx.Err() == nil
}

// servesKind says whether snap serves gvk (any version of its group when
// gvk has none) as kubeatlas's mapper, as client-go's discovery mapper
// (restmapper/discoverymapper.go), maps it: a resource of the group-version
// whose kind is gvk's, or its lower case, or its guessed List kind.
func servesKind(snap *discovery.Snapshot, gvk schema.GroupVersionKind) bool {
	g, ok := snap.Group(gvk.Group)
	if !ok {
		return false
	}
	for _, v := range g.Versions {
		if gvk.Version != "" && v.Version != gvk.Version {
			continue
		}
		for i := range v.Resources {
			r := &v.Resources[i]
			if r.SubresourcesOnly() || r.Kind.Kind == "" {
				continue
			}
			if k := r.Kind.Kind; gvk.Kind == k || gvk.Kind == strings.ToLower(k) || gvk.Kind == k+"List" {
				return true
			}
		}
	}
	return false
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
