package apiserver

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/apiserver/registry"
)

// Stores are the served resources' stores.
type Stores struct {
	Groups, Servers, Consistency *registry.Store
}

// closeWatches ends every open watch of the three stores.
func (s Stores) closeWatches() {
	for _, st := range []*registry.Store{s.Groups, s.Servers, s.Consistency} {
		st.Destroy()
	}
}

// NewStores makes the three stores; tune adjusts each Config (tests shrink
// windows and buffers) and may be nil.
func NewStores(tune func(*registry.Config)) Stores {
	mk := func(c registry.Config) *registry.Store {
		c.Unready = true // until the feed has filled it (Feed.Run)
		if tune != nil {
			tune(&c)
		}
		return registry.NewStore(c)
	}
	return Stores{
		Groups: mk(registry.Config{
			Resource: v1alpha1.SchemeGroupVersion.WithResource("apigroups").GroupResource(), SingularName: "apigroup",
			New: func() registry.Object { return &v1alpha1.Group{} }, NewList: func() runtime.Object { return &v1alpha1.GroupList{} },
			Columns: []metav1.TableColumnDefinition{
				{Name: "Name", Type: "string", Format: "name"},
				{Name: "Preferred", Type: "string", Description: "the preferred version"},
				{Name: "Versions", Type: "string", Description: "versions in preference order"},
				{Name: "Resources", Type: "integer", Description: "resources of the preferred version"},
				{Name: "Freshness", Type: "string", Description: "Current, or Stale when a version's aggregated API server could not be reached"},
				{Name: "Consistent", Type: "string", Priority: 1, Description: "whether every API server serves the group alike"},
				{Name: "Age", Type: "string"},
			},
			Cells: func(o registry.Object) []any {
				g := o.(*v1alpha1.Group)
				var versions []string
				resources, freshness := 0, v1alpha1.FreshnessCurrent
				for _, v := range g.Status.Versions {
					versions = append(versions, v.Version)
					if v.Version == g.Status.PreferredVersion {
						resources = len(v.Resources)
					}
					if v.Freshness != v1alpha1.FreshnessCurrent {
						freshness = v.Freshness
					}
				}
				consistent := "Unknown"
				if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionConsistent); c != nil {
					consistent = string(c.Status)
				}
				return []any{g.Name, g.Status.PreferredVersion, strings.Join(versions, ","), resources, freshness, consistent, age(g.CreationTimestamp)}
			},
		}),
		Servers: mk(registry.Config{
			Resource: v1alpha1.SchemeGroupVersion.WithResource("apiservers").GroupResource(), SingularName: "apiserver",
			New: func() registry.Object { return &v1alpha1.APIServer{} }, NewList: func() runtime.Object { return &v1alpha1.APIServerList{} },
			Columns: []metav1.TableColumnDefinition{
				{Name: "Name", Type: "string", Format: "name"},
				{Name: "Version", Type: "string"},
				{Name: "Alive", Type: "boolean"},
				{Name: "Discovery", Type: "string", Description: "ETag of its own built-in discovery"},
				{Name: "From Peers", Type: "integer", Description: "resources served through a peer"},
				{Name: "Last Seen", Type: "string"},
				{Name: "Address", Type: "string", Priority: 1},
				{Name: "Error", Type: "string", Priority: 1},
			},
			Cells: func(o registry.Object) []any {
				s := o.(*v1alpha1.APIServer)
				seen := "<never>"
				if s.Status.LastSeen != nil {
					seen = age(*s.Status.LastSeen)
				}
				return []any{s.Name, s.Status.Version, s.Status.Alive, s.Status.BuiltinDiscoveryHash, len(s.Status.FromPeers), seen, s.Status.Address, s.Status.Error}
			},
		}),
		Consistency: mk(registry.Config{
			Resource: v1alpha1.SchemeGroupVersion.WithResource("clusterconsistencies").GroupResource(), SingularName: "clusterconsistency",
			New: func() registry.Object { return &v1alpha1.ClusterConsistency{} }, NewList: func() runtime.Object { return &v1alpha1.ClusterConsistencyList{} },
			Columns: []metav1.TableColumnDefinition{
				{Name: "Name", Type: "string", Format: "name"},
				{Name: "Consistent", Type: "string"},
				{Name: "Servers", Type: "integer"},
				{Name: "Differences", Type: "integer"},
				{Name: "Certainty", Type: "string"},
				{Name: "Checked", Type: "string"},
			},
			Cells: func(o registry.Object) []any {
				c := o.(*v1alpha1.ClusterConsistency)
				consistent := "Unknown"
				if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionConsistent); cond != nil {
					consistent = string(cond.Status)
				}
				checked := "<never>"
				if c.Status.LastChecked != nil {
					checked = age(*c.Status.LastChecked)
				}
				return []any{c.Name, consistent, c.Status.Servers, len(c.Status.Differences), c.Status.Certainty, checked}
			},
		}),
	}
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
