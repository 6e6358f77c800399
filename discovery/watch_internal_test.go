package discovery

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAPIServiceChurnCostsNothing: an APIService update that changes
// neither its spec nor its availability (a label, a condition's message,
// only a new resourceVersion) asks for no refresh; a flip of Available
// does.
func TestAPIServiceChurnCostsNothing(t *testing.T) {
	c := &Client{}
	w := &watcher{c: c, o: watchOptions{settle: DefaultSettle}, wake: make(chan struct{}, 1)}
	apiService := func(rv, available, message string, labels map[string]string) any {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"spec":   map[string]any{"group": "metrics.k8s.io", "version": "v1beta1", "service": map[string]any{"namespace": "kube-system", "name": "metrics-server"}},
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": available, "message": message}}},
		}}
		u.SetName("v1beta1.metrics.k8s.io")
		u.SetResourceVersion(rv)
		u.SetLabels(labels)
		out, err := slim(u)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	w.apiServiceEvent(apiService("1", "True", "", nil), apiService("2", "True", "all checks passed", map[string]string{"team": "a"}), false)
	if n := c.stats.watchTriggers.Load(); n != 0 {
		t.Errorf("label, message and resourceVersion churn asked for %d refreshes", n)
	}
	w.apiServiceEvent(apiService("2", "True", "", nil), apiService("3", "False", "unreachable", nil), false)
	if n := c.stats.watchTriggers.Load(); n != 1 {
		t.Errorf("an availability flip asked for %d refreshes, want 1", n)
	}
}
