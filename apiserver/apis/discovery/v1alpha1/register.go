package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group served; discovery.k8s.io is EndpointSlices'.
const GroupName = "discovery.kubeatlas.io"

// SchemeGroupVersion is the served group-version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// CoreGroupName is the Group object name of the core group ("").
const CoreGroupName = "core"

// AddToScheme registers the types in v1alpha1 and, because the API is
// read-only and has one version, the same Go types as the internal version
// that k8s.io/apiserver's handlers convert through (a conversion between two
// registrations of one type is a copy).
func AddToScheme(s *runtime.Scheme) error {
	for _, gv := range []schema.GroupVersion{SchemeGroupVersion, {Group: GroupName, Version: runtime.APIVersionInternal}} {
		s.AddKnownTypes(gv,
			&Group{}, &GroupList{},
			&APIServer{}, &APIServerList{},
			&ClusterConsistency{}, &ClusterConsistencyList{},
		)
	}
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
