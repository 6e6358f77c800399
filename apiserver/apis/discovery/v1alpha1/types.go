package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group is one API group the upstream cluster serves; its name is the
// group's name, or CoreGroupName for the core group ("" is not a valid
// object name). No CRD group can be "core" (theirs need a dot), but an
// APIService's can: such a group's object is named "group:core", a name no
// group can have.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Group struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status GroupStatus `json:"status"`
}

// GroupStatus is what discovery says of the group.
type GroupStatus struct {
	// Group is the group's name as the API uses it: "" for the core group.
	Group string `json:"group"`
	// PreferredVersion is the version clients should use.
	PreferredVersion string `json:"preferredVersion"`
	// Versions in the server's order of preference.
	Versions []GroupVersion `json:"versions"`
	// Conditions: Consistent is False when not every API server of the
	// cluster serves this group alike (the consistency check's
	// differences), True when they do, absent before the first check.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Freshness values of a GroupVersion.
const (
	FreshnessCurrent = "Current"
	FreshnessStale   = "Stale"
)

// GroupVersion is one version of a group.
type GroupVersion struct {
	Version string `json:"version"`
	// Freshness is Current, or Stale when the aggregated API server
	// serving it could not be reached (its resources are the last known).
	Freshness string        `json:"freshness"`
	Resources []APIResource `json:"resources"`
}

// Scope values of an APIResource.
const (
	ScopeCluster    = "Cluster"
	ScopeNamespaced = "Namespaced"
)

// APIResource is one resource of a group-version.
type APIResource struct {
	Name         string `json:"name"`
	SingularName string `json:"singularName,omitempty"`
	Kind         string `json:"kind"`
	// Group and Version are the kind's where they are not the resource's
	// own group-version (autoscaling/v1 Scale for a scale subresource, a
	// resource answering in another version); empty otherwise.
	Group        string           `json:"group,omitempty"`
	Version      string           `json:"version,omitempty"`
	Scope        string           `json:"scope"`
	Verbs        []string         `json:"verbs,omitempty"`
	ShortNames   []string         `json:"shortNames,omitempty"`
	Categories   []string         `json:"categories,omitempty"`
	Subresources []APISubresource `json:"subresources,omitempty"`
}

// APISubresource is a subresource of an APIResource (status, scale).
type APISubresource struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
	// Group and Version: as APIResource's.
	Group   string   `json:"group,omitempty"`
	Version string   `json:"version,omitempty"`
	Verbs   []string `json:"verbs,omitempty"`
}

// GroupList is a list of Groups.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type GroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Group `json:"items"`
}

// APIServer is one API server of the upstream cluster, named by its identity
// lease (or, for a server seen without one, by how the check named it).
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type APIServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status APIServerStatus `json:"status"`
}

// APIServerStatus is what the last consistency check saw of the server.
type APIServerStatus struct {
	Identity string `json:"identity,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	// Address is where it was asked directly; "" when it was reached
	// through the cluster's URL only.
	Address string `json:"address,omitempty"`
	// Version is its /version gitVersion.
	Version string `json:"version,omitempty"`
	// BuiltinDiscoveryHash is the ETag of its own /apis document
	// (profile=nopeer): equal on servers that serve the same built-in API.
	BuiltinDiscoveryHash string `json:"builtinDiscoveryHash,omitempty"`
	// ViewHash is a hash of its whole own view (/api and /apis).
	ViewHash string `json:"viewHash,omitempty"`
	// FromPeers lists the resources (group/version/resource) its merged view
	// serves that its own does not: requests for them reach a peer.
	FromPeers []string `json:"fromPeers,omitempty"`
	// LastSeen is when a check last reached it.
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	Alive    bool         `json:"alive"`
	// Error is why the last check could not ask it.
	Error string `json:"error,omitempty"`
}

// APIServerList is a list of APIServers.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type APIServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []APIServer `json:"items"`
}

// ClusterConsistencyName is the name of the one ClusterConsistency object.
const ClusterConsistencyName = "cluster"

// ConditionConsistent is the condition type of the cluster's verdict, on the
// ClusterConsistency object and on each Group.
const ConditionConsistent = "Consistent"

// ClusterConsistency is the cluster's verdict, where the coordinated
// discovery proposal put it: one object, named "cluster", whose Consistent
// condition says whether every API server serves the same discovery: True
// only where every API server was seen and they agree, False where servers
// were seen to differ, Unknown where the check could not tell.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type ClusterConsistency struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status ClusterConsistencyStatus `json:"status"`
}

// ClusterConsistencyStatus is the last consistency check's report.
type ClusterConsistencyStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Certainty is how sure the check is that it saw every API server
	// (consistency.Certainty's name).
	Certainty string `json:"certainty,omitempty"`
	// Servers counts the API servers the check knows of.
	Servers int `json:"servers"`
	// Differences lists what not every server serves.
	Differences []Difference `json:"differences,omitempty"`
	// LastChecked is when the check ended.
	LastChecked *metav1.Time `json:"lastChecked,omitempty"`
}

// Difference is a group-version, or one of its resources, that not every
// reached API server serves.
type Difference struct {
	Group       string   `json:"group"`
	Version     string   `json:"version"`
	Resource    string   `json:"resource,omitempty"`
	ServedBy    []string `json:"servedBy,omitempty"`
	MissingFrom []string `json:"missingFrom,omitempty"`
}

// ClusterConsistencyList is a list of ClusterConsistency objects (one).
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type ClusterConsistencyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterConsistency `json:"items"`
}
