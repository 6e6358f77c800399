package controllerruntime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
)

// TestStuckRegistryHoldsUpNoStart pins that the Provider registers its
// collector in controller-runtime's registry (which a program may
// replace: not our code) under no lock: while a mapper's registration is
// stuck in it, Start returns once its context ends. Before, Start waited
// for the Provider's lock, which the registration held.
func TestStuckRegistryHoldsUpNoStart(t *testing.T) {
	reg := &stuckRegistry{Registry: prom.NewRegistry(), entered: make(chan struct{}), release: make(chan struct{})}
	old := crmetrics.Registry
	crmetrics.Registry = reg
	t.Cleanup(func() { crmetrics.Registry = old })

	p := controllerruntime.New()
	made := make(chan error, 1)
	go func() {
		_, err := p.MapperProvider(&rest.Config{Host: "https://stuck.invalid"}, nil)
		made <- err
	}()
	select {
	case <-reg.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the mapper did not register the collector")
	}
	defer func() {
		close(reg.release)
		if err := <-made; err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	started := make(chan struct{})
	go func() { defer close(started); _ = p.Start(ctx) }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("Start did not return after its context ended: it waits for a registration stuck in the registry")
	}
}

// stuckRegistry is a registry whose first Register blocks until release
// is closed (telling entered).
type stuckRegistry struct {
	*prom.Registry
	calls   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func (r *stuckRegistry) Register(c prom.Collector) error {
	if r.calls.Add(1) == 1 {
		close(r.entered)
		<-r.release
	}
	return r.Registry.Register(c)
}
