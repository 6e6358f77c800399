package surface

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// protobufMagic starts every Kubernetes protobuf body: "k8s\x00", then a
// runtime.Unknown carrying the type and the object's bytes.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// DecodeAggregated decodes an aggregated discovery document (KEP-3352): an
// APIGroupDiscoveryList of apidiscovery.k8s.io/v2 or v2beta1, in JSON or
// protobuf, as contentType says (a Content-Type or an Accept type of
// either). The two versions are field for field the same, in JSON and
// protobuf, so one decoder serves both. Duplicate groups, versions and
// resources are dropped (the first wins), and so are resources without a
// kind that have no subresources, as client-go drops them. A body of
// another kind is an error, never an empty result.
//
// With an etag, verified reports whether the body is the document it names:
// kube-apiserver's ETag is the SHA-512 of the JSON of the list without its
// apiVersion and kind, so a JSON body is checked by encoding it again; a
// protobuf one cannot be (its ETag is of the JSON too), nor a JSON one of
// fields these types do not know.
func DecodeAggregated(body []byte, contentType, etag string) (groups []Group, src Source, verified bool, err error) {
	src, err = SourceOf(contentType)
	if err != nil {
		return nil, Source{}, false, err
	}
	apiVersion := src.apiVersion()
	if src.Protobuf {
		groups, err := decodeAggregatedProtobuf(body, apiVersion)
		return groups, src, false, err
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, src, false, fmt.Errorf("decoding APIGroupDiscoveryList: %w", err)
	}
	// A body without apiVersion and kind is read as the type negotiated,
	// as client-go reads it: hand-written servers and test fakes omit
	// them. One that names another type is an error.
	if (list.APIVersion != "" || list.Kind != "") && (list.APIVersion != apiVersion || list.Kind != "APIGroupDiscoveryList") {
		return nil, src, false, fmt.Errorf("body holds %q %q, want %s APIGroupDiscoveryList", list.APIVersion, list.Kind, apiVersion)
	}
	if etag != "" {
		_, verified = canonicalOf(&list, etag)
	}
	return fromAggregated(list.Items), src, verified, nil
}

// ErrNotTheETags is the cause of VerifyAggregated's error for a body that
// is not the document its ETag names.
var ErrNotTheETags = errors.New("not the document its ETag names")

// VerifyAggregated decodes an aggregated discovery document only if it is
// the one etag names (see DecodeAggregated), in JSON or protobuf, and
// returns what was verified: groups built from the very list whose JSON
// encoding hashes to etag, and canonical, that encoding (the list without
// apiVersion and kind, as kube-apiserver hashes it), which is what a store
// shared by others may keep under etag: no duplicate keys, unknown fields
// or whitespace that another JSON decoder could read otherwise. A
// protobuf body is decoded with the generated types (k8s.io/api) and its
// groups come from that decoding, so no two decoders need agree. A body
// that decodes but is not etag's is an error wrapping ErrNotTheETags.
func VerifyAggregated(body []byte, contentType, etag string) (groups []Group, src Source, canonical []byte, err error) {
	src, err = SourceOf(contentType)
	if err != nil {
		return nil, Source{}, nil, err
	}
	apiVersion := src.apiVersion()
	var list apidiscoveryv2.APIGroupDiscoveryList
	var gotVersion, gotKind string
	if src.Protobuf {
		if !bytes.HasPrefix(body, protobufMagic) {
			return nil, src, nil, errors.New("body is not Kubernetes protobuf (no magic prefix)")
		}
		var u runtime.Unknown
		if err := u.Unmarshal(body[len(protobufMagic):]); err != nil {
			return nil, src, nil, fmt.Errorf("protobuf envelope: %w", err)
		}
		if err := list.Unmarshal(u.Raw); err != nil {
			return nil, src, nil, fmt.Errorf("decoding APIGroupDiscoveryList: %w", err)
		}
		gotVersion, gotKind = u.APIVersion, u.Kind
	} else {
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, src, nil, fmt.Errorf("decoding APIGroupDiscoveryList: %w", err)
		}
		gotVersion, gotKind = list.APIVersion, list.Kind
	}
	if (gotVersion != "" || gotKind != "") && (gotVersion != apiVersion || gotKind != "APIGroupDiscoveryList") {
		return nil, src, nil, fmt.Errorf("body holds %q %q, want %s APIGroupDiscoveryList", gotVersion, gotKind, apiVersion)
	}
	canonical, ok := canonicalOf(&list, etag)
	if !ok {
		return nil, src, nil, ErrNotTheETags
	}
	return fromAggregated(list.Items), src, canonical, nil
}

// canonicalOf is list's JSON as kube-apiserver hashes it for its ETag
// (without apiVersion and kind, which it clears), and whether etag names
// it.
func canonicalOf(list *apidiscoveryv2.APIGroupDiscoveryList, etag string) ([]byte, bool) {
	list.TypeMeta = metav1.TypeMeta{}
	again, err := json.Marshal(list)
	if err != nil || etag == "" {
		return nil, false
	}
	return again, strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(again))) == etag
}

// SourceOf is the Source of an aggregated discovery document of the given
// content type, as DecodeAggregated reports it, without decoding anything;
// any other type is an error.
func SourceOf(contentType string) (Source, error) {
	src, err := ParseMediaType(contentType)
	if err == nil && src.Format == FormatLegacy {
		err = errors.New("not aggregated discovery: the server is older than 1.26, or it is off")
	}
	return src, err
}

// legacyObject is one of the legacy discovery types (APIVersions,
// APIGroupList, APIResourceList).
type legacyObject interface {
	runtime.Object
	Unmarshal([]byte) error
}

// decodeLegacy decodes a legacy discovery document as JSON or protobuf and
// checks its kind. Some endpoints (the core group's) write it without an
// apiVersion; hand-written servers and test fakes without either, and it
// is then read as the document asked for, as client-go reads it. A body
// that names another type (a Status, a list of another kind) is an error.
func decodeLegacy(body []byte, mt Source, kind string, into legacyObject) error {
	gotVersion, gotKind := "", ""
	if mt.Protobuf {
		if !bytes.HasPrefix(body, protobufMagic) {
			return fmt.Errorf("body is not Kubernetes protobuf (no magic prefix)")
		}
		var u runtime.Unknown
		if err := u.Unmarshal(body[len(protobufMagic):]); err != nil {
			return fmt.Errorf("protobuf envelope: %w", err)
		}
		gotVersion, gotKind = u.APIVersion, u.Kind
		if gotVersion == "v1" || gotVersion == "" {
			if err := into.Unmarshal(u.Raw); err != nil {
				return fmt.Errorf("decoding %s: %w", kind, err)
			}
		}
	} else {
		if err := json.Unmarshal(body, into); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		gvk := into.GetObjectKind().GroupVersionKind()
		gotVersion, gotKind = gvk.GroupVersion().String(), gvk.Kind
	}
	if gotKind == "" && gotVersion == "" {
		return nil
	}
	if gotKind != kind || (gotVersion != "v1" && gotVersion != "") {
		return fmt.Errorf("body holds %q %q, want v1 %s", gotVersion, gotKind, kind)
	}
	return nil
}

// fromAggregated converts the server's groups into the snapshot's model,
// dropping duplicate groups, versions and resources (the first wins) and
// resources without a kind (fromAggregatedResources), and marking every
// Stale group-version.
func fromAggregated(items []apidiscoveryv2.APIGroupDiscovery) []Group {
	groups := make([]Group, 0, len(items))
	seenGroup := make(map[string]bool, len(items))
	for i := range items {
		in := &items[i]
		if seenGroup[in.Name] {
			continue
		}
		seenGroup[in.Name] = true
		g := Group{Name: in.Name, Versions: make([]Version, 0, len(in.Versions))}
		var seenVersion seenSet
		for j := range in.Versions {
			iv := &in.Versions[j]
			if iv.Version == "" || !seenVersion.add(iv.Version) {
				continue
			}
			gv := schema.GroupVersion{Group: in.Name, Version: iv.Version}
			v := Version{Version: iv.Version, Resources: fromAggregatedResources(gv, iv.Resources)}
			if iv.Freshness == apidiscoveryv2.DiscoveryFreshnessStale {
				v.Freshness = FreshnessStale
			}
			g.Versions = append(g.Versions, v)
		}
		groups = append(groups, g)
	}
	return groups
}

// seenSet remembers names to drop duplicates. It scans while small, which
// is the common case and allocates nothing, and switches to a map so that a
// server listing thousands of names cannot make decoding quadratic.
type seenSet struct {
	n     int
	small [16]string
	m     map[string]struct{}
}

// add reports whether name is new.
func (s *seenSet) add(name string) bool {
	if s.m != nil {
		if _, ok := s.m[name]; ok {
			return false
		}
		s.m[name] = struct{}{}
		return true
	}
	for _, x := range s.small[:s.n] {
		if x == name {
			return false
		}
	}
	if s.n < len(s.small) {
		s.small[s.n] = name
		s.n++
		return true
	}
	s.m = make(map[string]struct{}, 4*len(s.small))
	for _, x := range s.small {
		s.m[x] = struct{}{}
	}
	s.m[name] = struct{}{}
	return true
}

// fromAggregatedResources converts one group-version's resources. As
// client-go, it drops a resource or subresource only when its kind's group,
// version and kind are all empty; a resource without a kind that has
// subresources is kept for them (SubresourcesOnly), which is how
// kube-aggregator lists custom and external metrics ("pods/http_requests"
// under a kindless "pods").
func fromAggregatedResources(gv schema.GroupVersion, in []apidiscoveryv2.APIResourceDiscovery) []Resource {
	out := make([]Resource, 0, len(in))
	var seen seenSet
	for i := range in {
		r := &in[i]
		if r.Resource == "" {
			continue
		}
		hasKind := kindGiven(r.ResponseKind)
		var subs []Subresource
		for j := range r.Subresources {
			s := &r.Subresources[j]
			if s.Subresource == "" || !kindGiven(s.ResponseKind) {
				continue
			}
			subs = append(subs, Subresource{
				Name:         s.Subresource,
				Kind:         kindIn(gv, s.ResponseKind),
				Verbs:        s.Verbs,
				explicitKind: s.ResponseKind.Group != "" || s.ResponseKind.Version != "",
			})
		}
		if !hasKind && len(subs) == 0 || !seen.add(r.Resource) {
			continue
		}
		res := Resource{
			Name:         r.Resource,
			SingularName: r.SingularResource,
			Namespaced:   r.Scope == apidiscoveryv2.ScopeNamespace,
			Verbs:        r.Verbs,
			ShortNames:   r.ShortNames,
			Categories:   r.Categories,
			Subresources: subs,
		}
		if hasKind {
			res.Kind = kindIn(gv, r.ResponseKind)
			res.explicitKind = r.ResponseKind.Group != "" || r.ResponseKind.Version != ""
		} else {
			res.subresourcesOnly = true
		}
		out = append(out, res)
	}
	return out
}

// kindGiven reports whether the server gave any of a kind's group, version
// and kind, as client-go requires to list a resource.
func kindGiven(k *metav1.GroupVersionKind) bool {
	return k != nil && *k != (metav1.GroupVersionKind{})
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
// resource, as aggregated discovery lists them. Like client-go, it keeps
// resources without a kind; a subresource whose resource is not listed
// (legacy custom and external metrics APIs list only "pods/<metric>") gets a
// SubresourcesOnly parent, so that it is still listed.
func fromLegacyResources(gv schema.GroupVersion, in []metav1.APIResource) []Resource {
	out := make([]Resource, 0, len(in))
	index := make(map[string]int, len(in))
	kindOf := func(r *metav1.APIResource) (schema.GroupVersionKind, bool) {
		kind := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		explicit := kind.Group != "" || kind.Version != ""
		if !explicit {
			kind.Group, kind.Version = gv.Group, gv.Version
		}
		return kind, explicit
	}
	for i := range in {
		r := &in[i]
		if r.Name == "" || strings.Contains(r.Name, "/") {
			continue
		}
		if _, dup := index[r.Name]; dup {
			continue
		}
		kind, explicit := kindOf(r)
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
	for i := range in {
		r := &in[i]
		parent, sub, ok := strings.Cut(r.Name, "/")
		if !ok || parent == "" || sub == "" {
			continue
		}
		p, found := index[parent]
		if !found {
			p = len(out)
			index[parent] = p
			out = append(out, Resource{Name: parent, Namespaced: r.Namespaced, subresourcesOnly: true})
		}
		kind, explicit := kindOf(r)
		out[p].Subresources = append(out[p].Subresources, Subresource{
			Name: sub, Kind: kind, Verbs: r.Verbs, explicitKind: explicit, singularName: r.SingularName,
		})
	}
	return out
}

// DecodeLegacyGroups decodes the root document of legacy discovery, which
// lists group-versions but not their resources: /api's APIVersions (core)
// or /apis's APIGroupList, in JSON or protobuf as contentType says. Each
// version's resources are in a document of its own (DecodeLegacyVersion).
// As client-go reads it, a version may be given by its groupVersion alone
// and a group named only by its versions'; a group listed twice is one
// group with the versions of both, in the server's order, the preferred
// one named apart (Group.LegacyPreferred).
func DecodeLegacyGroups(body []byte, contentType string, core bool) ([]Group, error) {
	mt, err := legacyType(contentType)
	if err != nil {
		return nil, err
	}
	if core {
		var versions metav1.APIVersions
		if err := decodeLegacy(body, mt, "APIVersions", &versions); err != nil {
			return nil, err
		}
		g := Group{}
		var seen seenSet
		for _, v := range versions.Versions {
			if v != "" && seen.add(v) {
				g.Versions = append(g.Versions, Version{Version: v})
			}
		}
		return []Group{g}, nil
	}
	var list metav1.APIGroupList
	if err := decodeLegacy(body, mt, "APIGroupList", &list); err != nil {
		return nil, err
	}
	var groups []Group
	index := map[string]int{}
	for _, lg := range list.Groups {
		name := lg.Name
		for _, v := range lg.Versions {
			if name != "" {
				break
			}
			if gv, err := schema.ParseGroupVersion(v.GroupVersion); err == nil {
				name = gv.Group
			}
		}
		if name == "" {
			continue
		}
		gi, again := index[name]
		if !again {
			gi = len(groups)
			index[name] = gi
			groups = append(groups, Group{Name: name})
		}
		g := &groups[gi]
		var seenVersion seenSet
		for _, v := range g.Versions {
			seenVersion.add(v.Version)
		}
		for _, v := range lg.Versions {
			if version := legacyVersion(name, v); version != "" && seenVersion.add(version) {
				g.Versions = append(g.Versions, Version{Version: version})
			}
		}
		if preferred := legacyVersion(name, lg.PreferredVersion); preferred != "" && g.preferred == "" {
			if seenVersion.add(preferred) {
				g.Versions = append(g.Versions, Version{Version: preferred})
			}
			g.preferred = preferred
		}
	}
	return groups, nil
}

// legacyVersion is the version v names in group: its version field, or
// else the version of its groupVersion when that is in group.
func legacyVersion(group string, v metav1.GroupVersionForDiscovery) string {
	if v.Version != "" {
		return v.Version
	}
	if gv, err := schema.ParseGroupVersion(v.GroupVersion); err == nil && gv.Group == group {
		return gv.Version
	}
	return ""
}

// DecodeLegacyVersion decodes the legacy discovery document of group-version
// gv (an APIResourceList, in JSON or protobuf as contentType says) into its
// version, Current. "<resource>/<subresource>" entries are folded into
// their resource, as aggregated discovery lists them. A document for
// another group-version is an error.
func DecodeLegacyVersion(gv schema.GroupVersion, body []byte, contentType string) (Version, error) {
	mt, err := legacyType(contentType)
	if err != nil {
		return Version{}, err
	}
	var list metav1.APIResourceList
	if err := decodeLegacy(body, mt, "APIResourceList", &list); err != nil {
		return Version{}, err
	}
	if list.GroupVersion != gv.String() {
		return Version{}, fmt.Errorf("document is for %q", list.GroupVersion)
	}
	typ := list.TypeMeta
	if mt.Protobuf {
		// What the JSON document would have said (metaview).
		typ = metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}
		if gv.Group == "" || gv.Group == "extensions" {
			typ.APIVersion = ""
		}
	}
	return Version{Version: gv.Version, Resources: fromLegacyResources(gv, list.APIResources), legacyType: typ}, nil
}

// legacyType parses the media type of a legacy document.
func legacyType(contentType string) (Source, error) {
	mt, err := ParseMediaType(contentType)
	if err == nil && mt.Format != FormatLegacy {
		err = fmt.Errorf("an aggregated type answered a legacy request")
	}
	return mt, err
}
