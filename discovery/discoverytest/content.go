package discoverytest

import (
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// The discovery documents of a real kube-apiserver v1.36.3 with no CRDs,
// byte for byte as it served them (see ../../shared/fixtures).
//
//go:embed fixture/k8s-v1.36.3/api.v2.json fixture/k8s-v1.36.3/apis.v2.json fixture/k8s-v1.36.3/version.json
var fixtureFS embed.FS

const fixtureDir = "fixture/k8s-v1.36.3/"

// content is one API server's view of the cluster: the core group and the
// named groups in the order the server lists them (most preferred first),
// plus a revision per group-version that feeds its OpenAPI schema.
//
// content is a plain value; a backend guards it with its own mutex.
type content struct {
	core   apidiscoveryv2.APIGroupDiscovery
	groups []apidiscoveryv2.APIGroupDiscovery
	// schemaRevision changes the OpenAPI document of a group-version (and so
	// its ?hash=) without changing discovery.
	schemaRevision map[schema.GroupVersion]int
	// openAPIExtras are the OpenAPI v3 paths a real server lists besides
	// its group-versions: "api", "apis", "version", the OIDC documents, and
	// "apis/<group>" for each built-in group (never for CRD groups).
	openAPIExtras []string
	// crds are the CustomResourceDefinitions installed, keyed
	// "<plural>.<group>" as their object names are, for the objects the
	// server lists and watches (see objects.go).
	crds map[string]CRD
}

func loadFixtureContent(builtins bool) (*content, error) {
	c := &content{schemaRevision: map[schema.GroupVersion]int{}, crds: map[string]CRD{}}
	var core apidiscoveryv2.APIGroupDiscoveryList
	if err := readFixture("api.v2.json", &core); err != nil {
		return nil, err
	}
	if len(core.Items) != 1 {
		return nil, fmt.Errorf("discoverytest: fixture api.v2.json has %d groups, want 1", len(core.Items))
	}
	c.core = core.Items[0]
	if !builtins {
		return c, nil
	}
	var apis apidiscoveryv2.APIGroupDiscoveryList
	if err := readFixture("apis.v2.json", &apis); err != nil {
		return nil, err
	}
	c.groups = apis.Items
	c.openAPIExtras = []string{".well-known/openid-configuration", "api", "apis", "openid/v1/jwks", "version"}
	for _, g := range c.groups {
		c.openAPIExtras = append(c.openAPIExtras, "apis/"+g.Name)
	}
	return c, nil
}

func readFixture(name string, into any) error {
	b, err := fixtureFS.ReadFile(fixtureDir + name)
	if err != nil {
		return fmt.Errorf("discoverytest: reading fixture %s: %w", name, err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("discoverytest: decoding fixture %s: %w", name, err)
	}
	return nil
}

func (c *content) clone() *content {
	out := &content{
		core:           *c.core.DeepCopy(),
		groups:         make([]apidiscoveryv2.APIGroupDiscovery, len(c.groups)),
		schemaRevision: make(map[schema.GroupVersion]int, len(c.schemaRevision)),
		crds:           make(map[string]CRD, len(c.crds)),
	}
	for k, crd := range c.crds {
		out.crds[k] = crd.clone()
	}
	for i := range c.groups {
		c.groups[i].DeepCopyInto(&out.groups[i])
	}
	for k, v := range c.schemaRevision {
		out.schemaRevision[k] = v
	}
	out.openAPIExtras = slices.Clone(c.openAPIExtras)
	return out
}

// group returns the index of the named group, or -1. The core group "" is not
// in c.groups.
func (c *content) group(name string) int {
	return slices.IndexFunc(c.groups, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == name })
}

// version returns the group-version's discovery entry, or nil.
func (c *content) version(gv schema.GroupVersion) *apidiscoveryv2.APIVersionDiscovery {
	var g *apidiscoveryv2.APIGroupDiscovery
	if gv.Group == "" {
		g = &c.core
	} else if i := c.group(gv.Group); i >= 0 {
		g = &c.groups[i]
	} else {
		return nil
	}
	for i := range g.Versions {
		if g.Versions[i].Version == gv.Version {
			return &g.Versions[i]
		}
	}
	return nil
}

// setVersion adds or replaces a group-version. A new group goes last; a new
// version goes last in its group (least preferred), as a CRD's newly added
// version would only if it sorted lowest; callers that care about order pass
// versions in preference order.
func (c *content) setVersion(group string, v apidiscoveryv2.APIVersionDiscovery) error {
	if group == "" {
		if v.Version != "v1" {
			return fmt.Errorf("discoverytest: the core group only serves v1, not %q", v.Version)
		}
		c.core.Versions = []apidiscoveryv2.APIVersionDiscovery{v}
		return nil
	}
	if old := c.version(schema.GroupVersion{Group: group, Version: v.Version}); old != nil {
		*old = v
		return nil
	}
	i := c.group(group)
	if i < 0 {
		c.groups = append(c.groups, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: group}})
		i = len(c.groups) - 1
	}
	// A version joins its group in kube-aware priority order (v2 before
	// v1 before v1beta1), as kube-apiserver lists a CRD's versions: the
	// first is the preferred one.
	vs := c.groups[i].Versions
	at := slices.IndexFunc(vs, func(x apidiscoveryv2.APIVersionDiscovery) bool {
		return version.CompareKubeAwareVersionStrings(v.Version, x.Version) > 0
	})
	if at < 0 {
		at = len(vs)
	}
	c.groups[i].Versions = slices.Insert(vs, at, v)
	return nil
}

func (c *content) removeVersion(gv schema.GroupVersion) error {
	i := c.group(gv.Group)
	if gv.Group == "" || i < 0 {
		return fmt.Errorf("discoverytest: no group-version %s to remove", gv)
	}
	vs := c.groups[i].Versions
	j := slices.IndexFunc(vs, func(v apidiscoveryv2.APIVersionDiscovery) bool { return v.Version == gv.Version })
	if j < 0 {
		return fmt.Errorf("discoverytest: no group-version %s to remove", gv)
	}
	c.groups[i].Versions = slices.Delete(vs, j, j+1)
	if len(c.groups[i].Versions) == 0 {
		c.groups = slices.Delete(c.groups, i, i+1)
	}
	delete(c.schemaRevision, gv)
	for name, crd := range c.crds {
		if crd.Group != gv.Group {
			continue
		}
		crd = crd.clone()
		crd.Versions = slices.DeleteFunc(crd.Versions, func(v string) bool { return v == gv.Version })
		if len(crd.Versions) == 0 {
			delete(c.crds, name)
		} else {
			c.crds[name] = crd
		}
	}
	return nil
}

func (c *content) removeGroup(name string) error {
	i := c.group(name)
	if i < 0 {
		return fmt.Errorf("discoverytest: no group %q to remove", name)
	}
	for _, v := range c.groups[i].Versions {
		delete(c.schemaRevision, schema.GroupVersion{Group: name, Version: v.Version})
	}
	c.groups = slices.Delete(c.groups, i, i+1)
	c.openAPIExtras = slices.DeleteFunc(c.openAPIExtras, func(p string) bool { return p == "apis/"+name })
	maps.DeleteFunc(c.crds, func(_ string, crd CRD) bool { return crd.Group == name })
	return nil
}

// groupVersions lists every group-version, core first, in server order.
func (c *content) groupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, v := range c.core.Versions {
		out = append(out, schema.GroupVersion{Version: v.Version})
	}
	for _, g := range c.groups {
		for _, v := range g.Versions {
			out = append(out, schema.GroupVersion{Group: g.Name, Version: v.Version})
		}
	}
	return out
}

// CRD describes a custom resource the way a CustomResourceDefinition does,
// reduced to what discovery and OpenAPI show of it.
type CRD struct {
	Group string
	// Versions in preference order (the first is the preferred version).
	Versions   []string
	Kind       string
	Plural     string // defaults to lower(Kind)+"s"
	Singular   string // defaults to lower(Kind)
	Namespaced bool
	ShortNames []string
	Categories []string
	// Status and Scale add the status and scale subresources.
	Status, Scale bool

	// schemaRevision counts ChangeSchema's changes of the CRD's
	// group-versions: the schema in its spec, so its generation changes.
	schemaRevision int
}

// name is the CRD's object name, "<plural>.<group>"; crd has its defaults.
func (crd CRD) name() string { return crd.Plural + "." + crd.Group }

func (crd CRD) clone() CRD {
	crd.Versions = slices.Clone(crd.Versions)
	crd.ShortNames = slices.Clone(crd.ShortNames)
	crd.Categories = slices.Clone(crd.Categories)
	return crd
}

func (crd CRD) withDefaults() (CRD, error) {
	if crd.Group == "" || !strings.Contains(crd.Group, ".") {
		return crd, fmt.Errorf("discoverytest: CRD group %q must be a dotted domain name", crd.Group)
	}
	if crd.Kind == "" || len(crd.Versions) == 0 {
		return crd, fmt.Errorf("discoverytest: CRD in %s needs a kind and at least one version", crd.Group)
	}
	if crd.Singular == "" {
		crd.Singular = strings.ToLower(crd.Kind)
	}
	if crd.Plural == "" {
		crd.Plural = crd.Singular + "s"
	}
	return crd, nil
}

// crdVerbs is the order in which a real kube-apiserver lists a CRD's verbs.
var crdVerbs = []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}

func (crd CRD) resource(version string) apidiscoveryv2.APIResourceDiscovery {
	kind := &metav1.GroupVersionKind{Group: crd.Group, Version: version, Kind: crd.Kind}
	r := apidiscoveryv2.APIResourceDiscovery{
		Resource:         crd.Plural,
		ResponseKind:     kind,
		Scope:            apidiscoveryv2.ScopeCluster,
		SingularResource: crd.Singular,
		Verbs:            slices.Clone(crdVerbs),
		ShortNames:       slices.Clone(crd.ShortNames),
		Categories:       slices.Clone(crd.Categories),
	}
	if crd.Namespaced {
		r.Scope = apidiscoveryv2.ScopeNamespace
	}
	if crd.Scale {
		r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  "scale",
			ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
			Verbs:        []string{"get", "patch", "update"},
		})
	}
	if crd.Status {
		r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  "status",
			ResponseKind: kind.DeepCopy(),
			Verbs:        []string{"get", "patch", "update"},
		})
	}
	return r
}

// addCRD adds the CRD's resource to each of its group-versions (creating
// them as needed) and keeps resources sorted by name, as the server does.
func (c *content) addCRD(crd CRD) error {
	crd, err := crd.withDefaults()
	if err != nil {
		return err
	}
	for _, v := range crd.Versions {
		gv := schema.GroupVersion{Group: crd.Group, Version: v}
		entry := c.version(gv)
		if entry == nil {
			if err := c.setVersion(crd.Group, apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}); err != nil {
				return err
			}
			entry = c.version(gv)
		}
		r := crd.resource(v)
		i, found := slices.BinarySearchFunc(entry.Resources, r.Resource, func(e apidiscoveryv2.APIResourceDiscovery, name string) int {
			return strings.Compare(e.Resource, name)
		})
		if found {
			entry.Resources[i] = r
		} else {
			entry.Resources = slices.Insert(entry.Resources, i, r)
		}
		c.schemaRevision[gv]++
	}
	kept := crd.clone()
	kept.schemaRevision = c.crds[crd.name()].schemaRevision // its schema, which CRD does not carry
	c.crds[crd.name()] = kept
	return nil
}

// removeCRD removes a resource from every version of its group, and any
// group-version (and group) left empty by that, as deleting a CRD does.
func (c *content) removeCRD(group, plural string) error {
	i := c.group(group)
	if i < 0 {
		return fmt.Errorf("discoverytest: no group %q", group)
	}
	removed := false
	var empty []string
	for vi := range c.groups[i].Versions {
		v := &c.groups[i].Versions[vi]
		n := len(v.Resources)
		v.Resources = slices.DeleteFunc(v.Resources, func(r apidiscoveryv2.APIResourceDiscovery) bool { return r.Resource == plural })
		if len(v.Resources) != n {
			removed = true
			c.schemaRevision[schema.GroupVersion{Group: group, Version: v.Version}]++
		}
		if len(v.Resources) == 0 {
			empty = append(empty, v.Version)
		}
	}
	if !removed {
		return fmt.Errorf("discoverytest: no resource %q in group %q", plural, group)
	}
	delete(c.crds, plural+"."+group)
	for _, v := range empty {
		if err := c.removeVersion(schema.GroupVersion{Group: group, Version: v}); err != nil {
			return err
		}
	}
	return nil
}

// SyntheticCRDs returns n CRDs spread over the given number of groups, named
// like the fixtures' stress CRDs (Widget0000 in g000.stress.example.com).
// They mix both scopes, several versions per group, short names, categories
// and the status and scale subresources, so every discovery feature appears.
func SyntheticCRDs(n, groups int) []CRD {
	if groups < 1 {
		groups = 1
	}
	out := make([]CRD, 0, n)
	for i := range n {
		g := i % groups
		crd := CRD{
			Group:      fmt.Sprintf("g%03d.stress.example.com", g),
			Kind:       fmt.Sprintf("Widget%04d", i),
			Namespaced: i%3 != 2,
			Status:     i%2 == 0,
			Scale:      i%4 == 0,
		}
		// Every other group serves a beta version beside v1, and every
		// fifth an alpha too, so groups have one to three versions.
		crd.Versions = []string{"v1"}
		if g%2 == 1 {
			crd.Versions = append(crd.Versions, "v1beta1")
		}
		if g%5 == 4 {
			crd.Versions = append(crd.Versions, "v1alpha1")
		}
		if i%2 == 1 {
			crd.ShortNames = []string{fmt.Sprintf("w%04d", i)}
		}
		if i%3 == 0 {
			crd.Categories = []string{"all", "stress"}
		}
		out = append(out, crd)
	}
	return out
}
