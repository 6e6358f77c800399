package discoverytest

import (
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// legacyCodecs serialises the unversioned discovery types (APIGroupList,
// APIGroup, APIResourceList, APIVersions) the way a generic API server does.
func legacyCodecs() runtime.NegotiatedSerializer {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(scheme)
}

// legacyView is the pre-aggregation discovery of one content value, served by
// the real k8s.io/apiserver discovery handlers. It is rebuilt whole on every
// change and swapped in atomically, so requests never see half an update.
type legacyView struct {
	root     http.Handler            // /apis
	core     http.Handler            // /api
	groups   map[string]http.Handler // /apis/<group>
	versions map[string]http.Handler // /api/v1 and /apis/<group>/<version>
	codecs   runtime.NegotiatedSerializer
}

func newLegacyView(c *content, codecs runtime.NegotiatedSerializer, addresses discovery.Addresses) *legacyView {
	groups := &metav1.APIGroupList{}
	view := &legacyView{
		root:     rootAPIsHandler(codecs, groups),
		core:     discovery.NewLegacyRootAPIHandler(addresses, codecs, "/api"),
		groups:   map[string]http.Handler{},
		versions: map[string]http.Handler{},
		codecs:   codecs,
	}
	for _, v := range c.core.Versions {
		view.versions["/api/"+v.Version] = legacyVersionHandler(codecs, schema.GroupVersion{Version: v.Version}, v)
	}
	for _, g := range c.groups {
		group := legacyGroup(g)
		groups.Groups = append(groups.Groups, group)
		view.groups["/apis/"+g.Name] = discovery.NewAPIGroupHandler(codecs, group)
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			view.versions["/apis/"+gv.String()] = legacyVersionHandler(codecs, gv, v)
		}
	}
	return view
}

// ServeHTTP routes legacy discovery paths. Trailing slashes are accepted as
// the real server accepts them.
func (v *legacyView) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/api":
		v.core.ServeHTTP(w, r)
	case path == "/apis":
		v.root.ServeHTTP(w, r)
	case v.groups[path] != nil:
		v.groups[path].ServeHTTP(w, r)
	case v.versions[path] != nil:
		v.versions[path].ServeHTTP(w, r)
	case strings.Count(path, "/") >= 3 && v.groups[groupPrefix(path)] != nil:
		// A known group with an unknown version: the real server answers
		// with a JSON Status, while an unknown group gets a plain 404.
		responsewriters.ErrorNegotiated(notFound(), v.codecs, schema.GroupVersion{}, w, r)
	default:
		http.NotFound(w, r)
	}
}

func groupPrefix(path string) string {
	parts := strings.SplitN(path, "/", 4) // "", "apis", group, rest
	return "/" + parts[1] + "/" + parts[2]
}

func notFound() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Details: &metav1.StatusDetails{},
		Message: "the server could not find the requested resource",
	}}
}

// rootAPIsHandler serves /apis as a kube-apiserver does: there the
// kube-aggregator owns /apis and writes the list with its full codecs (so the
// document keeps "apiVersion": "v1", unlike the generic server's handler).
func rootAPIsHandler(codecs runtime.NegotiatedSerializer, groups *metav1.APIGroupList) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		responsewriters.WriteObjectNegotiated(codecs, negotiation.DefaultEndpointRestrictions, schema.GroupVersion{}, w, r, http.StatusOK, groups, false)
	})
}

func legacyGroup(g apidiscoveryv2.APIGroupDiscovery) metav1.APIGroup {
	group := metav1.APIGroup{Name: g.Name}
	for _, v := range g.Versions {
		group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{
			GroupVersion: schema.GroupVersion{Group: g.Name, Version: v.Version}.String(),
			Version:      v.Version,
		})
	}
	if len(group.Versions) > 0 {
		group.PreferredVersion = group.Versions[0]
	}
	return group
}

// legacyVersionHandler serves /apis/<group>/<version>. A group-version whose
// aggregated API server is unreachable (Stale) answers 503, as the
// aggregator's proxy does when its backend is down.
func legacyVersionHandler(codecs runtime.NegotiatedSerializer, gv schema.GroupVersion, v apidiscoveryv2.APIVersionDiscovery) http.Handler {
	if v.Freshness == apidiscoveryv2.DiscoveryFreshnessStale {
		err := apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			responsewriters.ErrorNegotiated(err, codecs, schema.GroupVersion{}, w, r)
		})
	}
	resources := legacyResources(gv, v)
	return discovery.NewAPIVersionHandler(codecs, gv, discovery.APIResourceListerFunc(func() []metav1.APIResource { return resources }))
}

// legacyResources flattens an aggregated version entry into the legacy
// resource list: subresources become "<resource>/<subresource>" entries, and
// group and version appear only where the kind lives elsewhere.
func legacyResources(gv schema.GroupVersion, v apidiscoveryv2.APIVersionDiscovery) []metav1.APIResource {
	out := make([]metav1.APIResource, 0, len(v.Resources))
	for _, r := range v.Resources {
		res := metav1.APIResource{
			Name:         r.Resource,
			SingularName: r.SingularResource,
			Namespaced:   r.Scope == apidiscoveryv2.ScopeNamespace,
			Verbs:        r.Verbs,
			ShortNames:   r.ShortNames,
			Categories:   r.Categories,
		}
		setKind(&res, gv, r.ResponseKind)
		if res.Kind != "" {
			res.StorageVersionHash = discovery.StorageVersionHash(gv.Group, gv.Version, res.Kind)
		}
		out = append(out, res)
		for _, s := range r.Subresources {
			sub := metav1.APIResource{
				Name:       r.Resource + "/" + s.Subresource,
				Namespaced: res.Namespaced,
				Verbs:      s.Verbs,
			}
			setKind(&sub, gv, s.ResponseKind)
			out = append(out, sub)
		}
	}
	return out
}

func setKind(res *metav1.APIResource, gv schema.GroupVersion, kind *metav1.GroupVersionKind) {
	if kind == nil {
		return
	}
	res.Kind = kind.Kind
	if (kind.Group != "" || kind.Version != "") && (kind.Group != gv.Group || kind.Version != gv.Version) {
		res.Group, res.Version = kind.Group, kind.Version
	}
}
