package apiserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
)

// Labels on Group objects (apigroups), for label selectors: each is "true" or
// "false" on every object.
const (
	// LabelStale: some version of the group is Stale (its aggregated API
	// server could not be reached).
	LabelStale = v1alpha1.GroupName + "/stale"
	// LabelServedEverywhere: every API server the last consistency check
	// reached serves the group alike ("true" before the first check).
	LabelServedEverywhere = v1alpha1.GroupName + "/served-everywhere"
)

// groupObjectName is the object name of an API group: its name, "core" for
// the core group, and "group:core" for a group named core (an APIService's
// may be), which no group's name can be (':' is not in DNS names).
func groupObjectName(group string) string {
	switch group {
	case "":
		return v1alpha1.CoreGroupName
	case v1alpha1.CoreGroupName:
		return "group:" + group
	}
	return group
}

// groupCheck is what the last consistency check tells of a group that no
// difference names.
type groupCheck int

const (
	notChecked   groupCheck = iota // no check yet: no condition
	everySeen                      // every live server seen: served alike
	notEverySeen                   // some not seen: cannot tell
)

// groupCheckOf is what r tells of a group that no difference names.
func groupCheckOf(r *consistency.Report) groupCheck {
	switch {
	case r == nil:
		return notChecked
	case (r.Certainty == consistency.EveryServerAsked || r.Certainty == consistency.EveryServerSampled) &&
		slices.ContainsFunc(r.Servers, func(s consistency.Server) bool { return s.View != nil }):
		return everySeen
	}
	return notEverySeen
}

// apiGroups turns a snapshot into one Group per API group, in the snapshot's
// order. differences are the last check's, by group (nil before the first
// check), check what it tells of the others, and prior the stored objects,
// whose condition transition times are kept while the verdict holds.
func apiGroups(s *discovery.Snapshot, differences map[string][]consistency.Difference, check groupCheck, prior func(name string) *v1alpha1.Group) []*v1alpha1.Group {
	out := make([]*v1alpha1.Group, 0, len(s.Groups()))
	for _, g := range s.Groups() {
		obj := &v1alpha1.Group{
			ObjectMeta: metav1.ObjectMeta{Name: groupObjectName(g.Name)},
			Status:     v1alpha1.GroupStatus{Group: g.Name},
		}
		if p := g.PreferredVersion(); p != nil {
			obj.Status.PreferredVersion = p.Version
		}
		stale := false
		for _, v := range g.Versions {
			gv := v1alpha1.GroupVersion{Version: v.Version, Freshness: v1alpha1.FreshnessCurrent, Resources: []v1alpha1.APIResource{}}
			if v.Freshness != surface.FreshnessCurrent {
				gv.Freshness = v1alpha1.FreshnessStale
				stale = true
			}
			for _, r := range v.Resources {
				gv.Resources = append(gv.Resources, apiResource(schema.GroupVersion{Group: g.Name, Version: v.Version}, r))
			}
			obj.Status.Versions = append(obj.Status.Versions, gv)
		}
		diffs := differences[g.Name]
		obj.Labels = map[string]string{
			LabelStale:            fmt.Sprint(stale),
			LabelServedEverywhere: fmt.Sprint(len(diffs) == 0),
		}
		if check != notChecked {
			if p := prior(obj.Name); p != nil {
				obj.Status.Conditions = slices.Clone(p.Status.Conditions)
			}
			meta.SetStatusCondition(&obj.Status.Conditions, groupCondition(diffs, check))
		}
		out = append(out, obj)
	}
	return out
}

func groupCondition(diffs []consistency.Difference, check groupCheck) metav1.Condition {
	switch {
	case len(diffs) == 0 && check == everySeen:
		return metav1.Condition{Type: v1alpha1.ConditionConsistent, Status: metav1.ConditionTrue, Reason: "ServedAlike",
			Message: "every API server serves this group alike"}
	case len(diffs) == 0:
		return metav1.Condition{Type: v1alpha1.ConditionConsistent, Status: metav1.ConditionUnknown, Reason: "NotEveryServerSeen",
			Message: "the API servers seen serve this group alike, but not every API server was seen"}
	}
	var parts []string
	for _, d := range diffs {
		what := d.GroupVersion.String()
		if d.Resource != "" {
			what += "/" + d.Resource
		}
		parts = append(parts, fmt.Sprintf("%s served by %s, missing from %s", what, strings.Join(d.ServedBy, ","), strings.Join(d.MissingFrom, ",")))
	}
	return metav1.Condition{Type: v1alpha1.ConditionConsistent, Status: metav1.ConditionFalse, Reason: "NotServedByEveryServer",
		Message: strings.Join(parts, "; ")}
}

// apiResource is r, a resource of gv; its kind's group and version are
// told where they are not gv.
func apiResource(gv schema.GroupVersion, r surface.Resource) v1alpha1.APIResource {
	out := v1alpha1.APIResource{
		Name: r.Name, SingularName: r.SingularName, Kind: r.Kind.Kind, Scope: v1alpha1.ScopeCluster,
		Verbs: slices.Clone(r.Verbs), ShortNames: slices.Clone(r.ShortNames), Categories: slices.Clone(r.Categories),
	}
	if kgv := r.Kind.GroupVersion(); kgv != gv && r.Kind.Kind != "" {
		out.Group, out.Version = kgv.Group, kgv.Version
	}
	if r.Namespaced {
		out.Scope = v1alpha1.ScopeNamespaced
	}
	for _, s := range r.Subresources {
		sub := v1alpha1.APISubresource{Name: s.Name, Kind: s.Kind.Kind, Verbs: slices.Clone(s.Verbs)}
		if kgv := s.Kind.GroupVersion(); kgv != gv && s.Kind.Kind != "" {
			sub.Group, sub.Version = kgv.Group, kgv.Version
		}
		out.Subresources = append(out.Subresources, sub)
	}
	return out
}

// differencesByGroup indexes a report's differences by API group.
func differencesByGroup(r *consistency.Report) map[string][]consistency.Difference {
	out := map[string][]consistency.Difference{}
	for _, d := range differences(r) {
		out[d.GroupVersion.Group] = append(out[d.GroupVersion.Group], d)
	}
	return out
}

// differences are the report's, and the resources a server gets from its
// peers that no difference names (they name the server's peers, which the
// check may not have seen, "peers of" it): seen from one server alone,
// they differ all the same.
func differences(r *consistency.Report) []consistency.Difference {
	out := slices.Clone(r.Differences)
	named := map[schema.GroupVersionResource]bool{}
	for _, d := range r.Differences {
		named[d.GroupVersion.WithResource(d.Resource)] = true
	}
	for i := range r.Servers {
		s := &r.Servers[i]
		for _, gvr := range s.FromPeers {
			if named[gvr] {
				continue
			}
			named[gvr] = true
			out = append(out, consistency.Difference{GroupVersion: gvr.GroupVersion(), Resource: gvr.Resource,
				ServedBy: []string{"peers of " + s.Name()}, MissingFrom: []string{s.Name()}})
		}
	}
	return out
}

// invalidName matches what may not be in an object name.
var invalidName = regexp.MustCompile(`[^a-z0-9.-]+`)

// serverObjectName names a server's object: its identity lease's name, or
// what the report calls it, made a valid name.
func serverObjectName(s *consistency.Server) string {
	n := s.Identity
	if n == "" {
		n = s.Name()
	}
	n = strings.Trim(invalidName.ReplaceAllString(strings.ToLower(n), "-"), "-.")
	if len(n) > 253 {
		n = n[:253]
	}
	if n == "" {
		n = "unnamed"
	}
	return n
}

// apiServers turns a report into one APIServer per server; a server not
// reached keeps the LastSeen of its prior object.
func apiServers(r *consistency.Report, at time.Time, prior func(name string) *v1alpha1.APIServer) []*v1alpha1.APIServer {
	var out []*v1alpha1.APIServer
	seen := map[string]bool{}
	for i := range r.Servers {
		s := &r.Servers[i]
		name := serverObjectName(s)
		if seen[name] {
			continue // two unnamed servers alike: the report told them apart by what we cannot name
		}
		seen[name] = true
		obj := &v1alpha1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1alpha1.APIServerStatus{
			Identity: s.Identity, Hostname: s.Hostname, Address: s.Address, Version: s.Version,
			BuiltinDiscoveryHash: s.ETag, Alive: s.Alive,
		}}
		if s.View != nil {
			api, apis := s.View.ETags()
			sum := sha256.Sum256([]byte(api + "\x00" + apis))
			obj.Status.ViewHash = hex.EncodeToString(sum[:8])
		}
		for _, gvr := range s.FromPeers {
			obj.Status.FromPeers = append(obj.Status.FromPeers, gvr.GroupVersion().String()+"/"+gvr.Resource)
		}
		if s.Err != nil {
			obj.Status.Error = s.Err.Error()
		}
		if s.Version != "" {
			t := metav1.NewTime(at)
			obj.Status.LastSeen = &t
		} else if p := prior(name); p != nil {
			obj.Status.LastSeen = p.Status.LastSeen.DeepCopy()
		}
		out = append(out, obj)
	}
	return out
}

// verdictCondition is the report's verdict as the Consistent condition:
// True only where every API server was seen to agree, False where servers
// were seen to differ, Unknown where the check could not tell.
func verdictCondition(r *consistency.Report) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionConsistent}
	switch r.Verdict() {
	case consistency.Consistent:
		c.Status, c.Reason = metav1.ConditionTrue, "SameDiscovery"
		c.Message = "every API server serves the same discovery"
	case consistency.Inconsistent:
		c.Status, c.Reason = metav1.ConditionFalse, "Differ"
		var fromPeers []string
		for i := range r.Servers {
			if s := &r.Servers[i]; len(s.FromPeers) > 0 {
				fromPeers = append(fromPeers, fmt.Sprintf("%s gets %d resources from its peers that it does not serve", s.Name(), len(s.FromPeers)))
			}
		}
		switch {
		case len(r.Differences) > 0:
			c.Message = fmt.Sprintf("%d differences between the API servers' discovery", len(r.Differences))
		case len(fromPeers) > 0:
			c.Message = strings.Join(fromPeers, "; ")
		default:
			c.Message = "the API servers' storage versions differ"
		}
	default:
		c.Status, c.Reason = metav1.ConditionUnknown, "NotEveryServerSeen"
		c.Message = fmt.Sprintf("the API servers seen do not differ, but not every API server was seen (%s)", r.Certainty)
		if !slices.ContainsFunc(r.Servers, func(s consistency.Server) bool { return s.View != nil }) {
			c.Message = "no API server was seen"
		}
	}
	return c
}

// verdict is the cluster's ClusterConsistency object from a report.
func verdict(r *consistency.Report, at time.Time, prior *v1alpha1.ClusterConsistency) *v1alpha1.ClusterConsistency {
	obj := &v1alpha1.ClusterConsistency{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ClusterConsistencyName}}
	if prior != nil {
		obj.Status.Conditions = slices.Clone(prior.Status.Conditions)
	}
	meta.SetStatusCondition(&obj.Status.Conditions, verdictCondition(r))
	obj.Status.Certainty = r.Certainty.String()
	obj.Status.Servers = len(r.Servers)
	for _, d := range differences(r) {
		obj.Status.Differences = append(obj.Status.Differences, v1alpha1.Difference{
			Group: d.GroupVersion.Group, Version: d.GroupVersion.Version, Resource: d.Resource,
			ServedBy: slices.Clone(d.ServedBy), MissingFrom: slices.Clone(d.MissingFrom),
		})
	}
	t := metav1.NewTime(at)
	obj.Status.LastChecked = &t
	return obj
}
