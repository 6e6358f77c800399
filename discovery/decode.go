package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// protobufMagic starts every Kubernetes protobuf body: "k8s\x00", then a
// runtime.Unknown carrying the type and the object's bytes.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// unwrapProtobuf checks the envelope and that it holds the expected type.
func unwrapProtobuf(body []byte, apiVersion, kind string) ([]byte, error) {
	if !bytes.HasPrefix(body, protobufMagic) {
		return nil, fmt.Errorf("body is not Kubernetes protobuf (no magic prefix)")
	}
	var u runtime.Unknown
	if err := u.Unmarshal(body[len(protobufMagic):]); err != nil {
		return nil, fmt.Errorf("protobuf envelope: %w", err)
	}
	// Legacy discovery types are written unversioned by some endpoints
	// (the core group's), with an empty apiVersion.
	if (u.APIVersion != apiVersion && !(apiVersion == "v1" && u.APIVersion == "")) || u.Kind != kind {
		return nil, fmt.Errorf("body holds %s %s, want %s %s", u.APIVersion, u.Kind, apiVersion, kind)
	}
	return u.Raw, nil
}

// typeMeta is read first from a JSON body, so that a document of another
// kind is an error instead of an empty result.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func checkJSONType(body []byte, apiVersion, kind string) error {
	var tm typeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	// Legacy /api and /apis are written without apiVersion by some servers.
	if tm.Kind != kind || (tm.APIVersion != apiVersion && !(apiVersion == "v1" && tm.APIVersion == "")) {
		return fmt.Errorf("body holds %q %q, want %s %s", tm.APIVersion, tm.Kind, apiVersion, kind)
	}
	return nil
}

// decodeAggregated decodes an APIGroupDiscoveryList of either version. The
// v2beta1 and v2 types are field for field the same, in JSON and protobuf,
// so both decode into the v2 Go type.
func decodeAggregated(body []byte, mt mediatype.Discovery) (*apidiscoveryv2.APIGroupDiscoveryList, error) {
	apiVersion := "apidiscovery.k8s.io/" + mt.Version
	const kind = "APIGroupDiscoveryList"
	list := &apidiscoveryv2.APIGroupDiscoveryList{}
	if mt.Protobuf {
		raw, err := unwrapProtobuf(body, apiVersion, kind)
		if err != nil {
			return nil, err
		}
		if err := list.Unmarshal(raw); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", kind, err)
		}
		return list, nil
	}
	if err := checkJSONType(body, apiVersion, kind); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, list); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kind, err)
	}
	return list, nil
}

// decodeLegacy decodes one of the legacy discovery types (APIVersions,
// APIGroupList, APIResourceList) as JSON or protobuf.
func decodeLegacy(body []byte, mt mediatype.Discovery, kind string, into interface {
	Unmarshal([]byte) error
}) error {
	if mt.Protobuf {
		raw, err := unwrapProtobuf(body, "v1", kind)
		if err != nil {
			return err
		}
		return into.Unmarshal(raw)
	}
	if err := checkJSONType(body, "v1", kind); err != nil {
		return err
	}
	return json.Unmarshal(body, into)
}

// fromAggregated converts the server's groups into the snapshot's model,
// dropping duplicate groups, versions and resources (the first wins) and
// resources without a kind, and noting every Stale group-version.
func fromAggregated(items []apidiscoveryv2.APIGroupDiscovery) ([]Group, []*GroupVersionError) {
	groups := make([]Group, 0, len(items))
	var failed []*GroupVersionError
	seenGroup := make(map[string]bool, len(items))
	for i := range items {
		in := &items[i]
		if seenGroup[in.Name] {
			continue
		}
		seenGroup[in.Name] = true
		g := Group{Name: in.Name, Versions: make([]Version, 0, len(in.Versions))}
		for j := range in.Versions {
			iv := &in.Versions[j]
			if iv.Version == "" || hasVersion(g.Versions, iv.Version) {
				continue
			}
			gv := schema.GroupVersion{Group: in.Name, Version: iv.Version}
			v := Version{Version: iv.Version, Resources: fromAggregatedResources(gv, iv.Resources)}
			if iv.Freshness == apidiscoveryv2.DiscoveryFreshnessStale {
				v.Freshness = FreshnessStale
				failed = append(failed, &GroupVersionError{GroupVersion: gv, Err: ErrStale})
			}
			g.Versions = append(g.Versions, v)
		}
		groups = append(groups, g)
	}
	return groups, failed
}

func hasVersion(vs []Version, v string) bool {
	for i := range vs {
		if vs[i].Version == v {
			return true
		}
	}
	return false
}

func fromAggregatedResources(gv schema.GroupVersion, in []apidiscoveryv2.APIResourceDiscovery) []Resource {
	out := make([]Resource, 0, len(in))
	for i := range in {
		r := &in[i]
		if r.ResponseKind == nil || r.ResponseKind.Kind == "" || r.Resource == "" || hasResource(out, r.Resource) {
			continue
		}
		res := Resource{
			Name:         r.Resource,
			SingularName: r.SingularResource,
			Namespaced:   r.Scope == apidiscoveryv2.ScopeNamespace,
			Kind:         kindIn(gv, r.ResponseKind),
			Verbs:        r.Verbs,
			ShortNames:   r.ShortNames,
			Categories:   r.Categories,
			explicitKind: r.ResponseKind.Group != "" || r.ResponseKind.Version != "",
		}
		if len(r.Subresources) > 0 {
			res.Subresources = make([]Subresource, 0, len(r.Subresources))
			for j := range r.Subresources {
				s := &r.Subresources[j]
				// Like client-go, a subresource without a kind is dropped.
				if s.Subresource == "" || s.ResponseKind == nil || s.ResponseKind.Kind == "" {
					continue
				}
				res.Subresources = append(res.Subresources, Subresource{
					Name:         s.Subresource,
					Kind:         kindIn(gv, s.ResponseKind),
					Verbs:        s.Verbs,
					explicitKind: s.ResponseKind.Group != "" || s.ResponseKind.Version != "",
				})
			}
		}
		out = append(out, res)
	}
	return out
}

func hasResource(rs []Resource, name string) bool {
	// Duplicates are rare and lists short enough that a scan beats a map.
	for i := range rs {
		if rs[i].Name == name {
			return true
		}
	}
	return false
}

// kindIn resolves a response kind whose group and version may be left
// empty to mean "this group-version", as built-in resources do.
func kindIn(gv schema.GroupVersion, k *metav1.GroupVersionKind) schema.GroupVersionKind {
	out := schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
	if out.Group == "" && out.Version == "" {
		out.Group, out.Version = gv.Group, gv.Version
	}
	return out
}

// fromLegacyResources folds "<resource>/<subresource>" entries into their
// resource, as aggregated discovery lists them.
func fromLegacyResources(gv schema.GroupVersion, in []metav1.APIResource) []Resource {
	out := make([]Resource, 0, len(in))
	index := make(map[string]int, len(in))
	for i := range in {
		r := &in[i]
		kind := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		explicit := kind.Group != "" || kind.Version != ""
		if !explicit {
			kind.Group, kind.Version = gv.Group, gv.Version
		}
		if parent, sub, ok := strings.Cut(r.Name, "/"); ok {
			if p, found := index[parent]; found && sub != "" {
				out[p].Subresources = append(out[p].Subresources, Subresource{
					Name: sub, Kind: kind, Verbs: r.Verbs, explicitKind: explicit, singularName: r.SingularName,
				})
			}
			continue
		}
		if _, dup := index[r.Name]; dup || r.Name == "" || r.Kind == "" {
			continue
		}
		index[r.Name] = len(out)
		out = append(out, Resource{
			Name:         r.Name,
			SingularName: r.SingularName,
			Namespaced:   r.Namespaced,
			Kind:         kind,
			Verbs:        r.Verbs,
			ShortNames:   r.ShortNames,
			Categories:   r.Categories,

			StorageVersionHash: r.StorageVersionHash,
			explicitKind:       explicit,
		})
	}
	return out
}
