package tests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
)

// TestManagerReconcilesANewCRD: a controller-runtime manager on kubeatlas
// (Provider as its MapperProvider and a runnable) runs a controller for a
// kind whose CRD does not exist yet, one for a version of it the CRD does
// not serve yet, and one for a group that never will exist. The CRD is
// created after the manager started and an object of it is reconciled
// without a restart (the reconciler reads it through the manager's client,
// through kubeatlas's mapper); once the CRD serves the new version, the
// object is reconciled in that version too; the missing group neither
// fails the manager nor blocks the other controllers.
func TestManagerReconcilesANewCRD(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := controllerruntime.New()
	mgr, err := manager.New(c.config, manager.Options{
		MapperProvider:         p.MapperProvider,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(p); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reconciled := map[string]time.Time{}
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Thing"}
	watch := func(name string, gvk schema.GroupVersionKind) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		err := ctrl.NewControllerManagedBy(mgr).Named(name).
			WatchesRawSource(controllerruntime.Kind(p, mgr, u, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				obj := &unstructured.Unstructured{}
				obj.SetGroupVersionKind(gvk)
				if err := mgr.GetClient().Get(ctx, req.NamespacedName, obj); err != nil {
					return reconcile.Result{}, err
				}
				mu.Lock()
				if _, seen := reconciled[gvk.Version+"/"+req.Name]; !seen {
					reconciled[gvk.Version+"/"+req.Name] = time.Now()
				}
				mu.Unlock()
				return reconcile.Result{}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
	}
	watch("things", gvk)
	watch("things-v2", schema.GroupVersionKind{Group: group, Version: "v2", Kind: "Thing"})
	watch("never", schema.GroupVersionKind{Group: "never.kubeatlas.test", Version: "v1", Kind: "Never"})
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("the manager stopped: %v", err)
	}

	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	crdCreated := time.Now()
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd("Namespaced", "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	things := dyn.Resource(gvk.GroupVersion().WithResource("things")).Namespace("default")
	thing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
		"metadata": map[string]any{"name": "t1"}, "spec": map[string]any{"size": int64(1)},
	}}
	var objectCreated time.Time
	eventually(t, "an object of the new CRD created", 30*time.Second, func() (bool, string) {
		_, err := things.Create(ctx, thing, metav1.CreateOptions{})
		objectCreated = time.Now()
		return err == nil, "not yet"
	})
	eventually(t, "the object reconciled", 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		_, ok := reconciled["v1/t1"]
		return ok, "not yet"
	})
	select {
	case err := <-done:
		t.Fatalf("the manager stopped: %v", err)
	default:
	}
	mu.Lock()
	at := reconciled["v1/t1"]
	mu.Unlock()
	t.Logf("CRD created -> object reconciled: %v (object created -> reconciled: %v)",
		at.Sub(crdCreated).Round(time.Millisecond), at.Sub(objectCreated).Round(time.Millisecond))

	// A new version of the group, served: its controller starts.
	mu.Lock()
	_, early := reconciled["v2/t1"]
	mu.Unlock()
	if early {
		t.Fatalf("reconciled in v2 before the CRD served v2")
	}
	crds := dyn.Resource(crdGVR)
	eventually(t, "the CRD updated to serve v2", 30*time.Second, func() (bool, string) {
		cur, err := crds.Get(ctx, "things."+group, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cur.Object["spec"].(map[string]any)["versions"] = crd("Namespaced", "v1", "v2").Object["spec"].(map[string]any)["versions"]
		_, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	eventually(t, "the object reconciled in v2", 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		_, ok := reconciled["v2/t1"]
		return ok, "not yet"
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the manager's Start: %v", err)
	}
}
