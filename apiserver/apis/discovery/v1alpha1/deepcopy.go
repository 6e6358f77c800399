package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written: deepcopy-gen is not available offline. deepcopy_test.go
// compares each copy with its fuzzed original and checks that no slice or
// pointer is shared, so a field added without its copy fails.

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// DeepCopyInto copies r into out.
func (r *APIResource) DeepCopyInto(out *APIResource) {
	*out = *r
	out.Verbs = slices.Clone(r.Verbs)
	out.ShortNames = slices.Clone(r.ShortNames)
	out.Categories = slices.Clone(r.Categories)
	if r.Subresources != nil {
		out.Subresources = make([]APISubresource, len(r.Subresources))
		for i, s := range r.Subresources {
			out.Subresources[i] = APISubresource{Name: s.Name, Kind: s.Kind, Verbs: slices.Clone(s.Verbs)}
		}
	}
}

// DeepCopyInto copies s into out.
func (s *APIGroupStatus) DeepCopyInto(out *APIGroupStatus) {
	*out = *s
	out.Conditions = copyConditions(s.Conditions)
	if s.Versions != nil {
		out.Versions = make([]GroupVersion, len(s.Versions))
		for i, v := range s.Versions {
			out.Versions[i] = GroupVersion{Version: v.Version, Freshness: v.Freshness}
			if v.Resources != nil {
				out.Versions[i].Resources = make([]APIResource, len(v.Resources))
				for j := range v.Resources {
					v.Resources[j].DeepCopyInto(&out.Versions[i].Resources[j])
				}
			}
		}
	}
}

// DeepCopyInto copies g into out.
func (g *APIGroup) DeepCopyInto(out *APIGroup) {
	*out = *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	g.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of g.
func (g *APIGroup) DeepCopy() *APIGroup {
	if g == nil {
		return nil
	}
	out := new(APIGroup)
	g.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (g *APIGroup) DeepCopyObject() runtime.Object { return g.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *APIGroupList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &APIGroupList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]APIGroup, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyInto copies s into out.
func (s *APIServerStatus) DeepCopyInto(out *APIServerStatus) {
	*out = *s
	out.FromPeers = slices.Clone(s.FromPeers)
	out.LastSeen = s.LastSeen.DeepCopy()
}

// DeepCopyInto copies a into out.
func (a *APIServer) DeepCopyInto(out *APIServer) {
	*out = *a
	a.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	a.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of a.
func (a *APIServer) DeepCopy() *APIServer {
	if a == nil {
		return nil
	}
	out := new(APIServer)
	a.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (a *APIServer) DeepCopyObject() runtime.Object { return a.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *APIServerList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &APIServerList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]APIServer, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyInto copies s into out.
func (s *ClusterConsistencyStatus) DeepCopyInto(out *ClusterConsistencyStatus) {
	*out = *s
	out.Conditions = copyConditions(s.Conditions)
	out.LastChecked = s.LastChecked.DeepCopy()
	if s.Differences != nil {
		out.Differences = make([]Difference, len(s.Differences))
		for i, d := range s.Differences {
			out.Differences[i] = d
			out.Differences[i].ServedBy = slices.Clone(d.ServedBy)
			out.Differences[i].MissingFrom = slices.Clone(d.MissingFrom)
		}
	}
}

// DeepCopyInto copies c into out.
func (c *ClusterConsistency) DeepCopyInto(out *ClusterConsistency) {
	*out = *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	c.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of c.
func (c *ClusterConsistency) DeepCopy() *ClusterConsistency {
	if c == nil {
		return nil
	}
	out := new(ClusterConsistency)
	c.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (c *ClusterConsistency) DeepCopyObject() runtime.Object { return c.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *ClusterConsistencyList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &ClusterConsistencyList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]ClusterConsistency, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
