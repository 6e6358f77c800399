package apiserver_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"

	"github.com/kubeatlas/kubeatlas/apiserver"
	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
)

// Two API servers, one serving a group the other does not (mid-upgrade):
// apiservers has both, the verdict is Consistent False, and the group's
// object says so too (condition and label); the others are True.
// Round-robin routing, so that the client serves the union of the two
// views and the group only one server serves has an object.
func TestConsistency(t *testing.T) {
	fake, url := startFake(t, discoverytest.WithBackends(2, discoverytest.RoundRobin), discoverytest.WithBackendVersions("v1.36.3", "v1.37.1"))
	if err := fake.Backends()[1].AddCRD(discoverytest.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "New"}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, url, serveOptions{checkInt: 200 * time.Millisecond})
	eventually(t, "the verdict", func() bool { _, ok := s.Stores.Consistency.Peek(v1alpha1.ClusterConsistencyName); return ok })

	o, _ := s.Stores.Consistency.Peek(v1alpha1.ClusterConsistencyName)
	v := o.(*v1alpha1.ClusterConsistency)
	if c := meta.FindStatusCondition(v.Status.Conditions, v1alpha1.ConditionConsistent); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("verdict %+v, want Consistent False", v.Status)
	}
	if v.Status.Servers != 2 || len(v.Status.Differences) == 0 {
		t.Fatalf("verdict %+v, want 2 servers and differences", v.Status)
	}
	versions := map[string]bool{}
	for _, name := range s.Stores.Servers.Names() {
		o, _ := s.Stores.Servers.Peek(name)
		st := o.(*v1alpha1.APIServer).Status
		versions[st.Version] = true
		if !st.Alive || st.BuiltinDiscoveryHash == "" || st.ViewHash == "" || st.LastSeen == nil {
			t.Errorf("apiserver %s: %+v", name, st)
		}
	}
	if !versions["v1.36.3"] || !versions["v1.37.1"] {
		t.Fatalf("apiservers' versions %v", versions)
	}
	eventually(t, "the group's condition", func() bool {
		o, ok := s.Stores.Groups.Peek("new.example.com")
		if !ok {
			return false
		}
		g := o.(*v1alpha1.Group)
		c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionConsistent)
		return c != nil && c.Status == metav1.ConditionFalse && g.Labels[apiserver.LabelServedEverywhere] == "false"
	})
	o, _ = s.Stores.Groups.Peek("apps")
	g := o.(*v1alpha1.Group)
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionConsistent); c == nil || c.Status != metav1.ConditionTrue || g.Labels[apiserver.LabelServedEverywhere] != "true" {
		t.Fatalf("apps: %+v %v", g.Status.Conditions, g.Labels)
	}
	// A check that finds the same keeps the groups' objects: no event.
	rv := s.Stores.Groups.ResourceVersion()
	before := s.Stores.Consistency.ResourceVersion()
	eventually(t, "another check", func() bool { return s.Stores.Consistency.ResourceVersion() > before })
	if got := s.Stores.Groups.ResourceVersion(); got != rv {
		t.Fatalf("apigroups changed (%d to %d) though nothing did", rv, got)
	}
}
