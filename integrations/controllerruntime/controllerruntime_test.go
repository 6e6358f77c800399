package controllerruntime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestClusterFollowsNewCRDs: a controller-runtime cluster made with the
// Provider maps a CRD installed after it started, through Watch, without a
// restart; a kind of a group that does not exist is controller-runtime's
// NoKindMatch (what its sources wait and retry on), not a crash.
func TestClusterFollowsNewCRDs(t *testing.T) {
	srv, base := discoverytest.Start(t)
	p := controllerruntime.New(controllerruntime.WithMapperOptions(restmapper.WithMissRefreshInterval(time.Hour)))
	cl, err := cluster.New(&rest.Config{Host: base}, func(o *cluster.Options) { o.MapperProvider = p.MapperProvider })
	if err != nil {
		t.Fatal(err)
	}
	mapper := cl.GetRESTMapper()
	if _, ok := mapper.(*restmapper.Mapper); !ok {
		t.Fatalf("the cluster's mapper is %T, not kubeatlas's", mapper)
	}
	gk := schema.GroupKind{Group: "late.example.com", Kind: "Late"}
	_, err = mapper.RESTMapping(gk)
	var noKind *meta.NoKindMatchError
	if !errors.As(err, &noKind) {
		t.Fatalf("a kind that does not exist yet: %v, want a *meta.NoKindMatchError", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	// The miss refresh is an hour: only Watch can bring the CRD in.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n := srv.Stats().Watches; n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Watch did not start watching")
		}
	}
	if err := srv.AddCRD(discoverytest.CRD{Group: gk.Group, Versions: []string{"v1"}, Kind: gk.Kind, Namespaced: true}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m, err := mapper.RESTMapping(gk)
		if err == nil {
			if m.Resource.Resource != "lates" || m.Scope.Name() != meta.RESTScopeNameNamespace {
				t.Errorf("mapping: %+v", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new CRD was not mapped within 10 s: %v", err)
		}
	}
}
