package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	cgrestmapper "k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// versionedCRD is a namespaced CRD of group, kind and plural served at
// versions (the first stored), its schema open.
func versionedCRD(group, kind, plural string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: lower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
		},
	}
	open := true
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: &open,
			}},
		})
	}
	return crd
}

// preferredVersion is the group's preferred version as a fresh client-go
// discovery client reads it, and whether kind is served in it.
func preferredVersion(cfg *rest.Config, group, kind string) (string, bool, error) {
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", false, err
	}
	m := cgrestmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	mp, err := m.RESTMapping(schema.GroupKind{Group: group, Kind: kind})
	if err != nil {
		return "", false, err
	}
	return mp.GroupVersionKind.Version, true, nil
}

// mappingVersions renders a mapper's versionless answers for gk: its
// RESTMapping's version and RESTMappings' versions, or the error.
func mappingVersions(m meta.RESTMapper, gk schema.GroupKind) string {
	mp, err := m.RESTMapping(gk)
	if err != nil {
		return "RESTMapping: " + err.Error()
	}
	mps, err := m.RESTMappings(gk)
	if err != nil {
		return "RESTMappings: " + err.Error()
	}
	vs := make([]string, len(mps))
	for i, x := range mps {
		vs[i] = x.GroupVersionKind.Version
	}
	return fmt.Sprintf("%s %v", mp.GroupVersionKind.Version, vs)
}

// TestVersionlessLookupsOnRealServer is controller-runtime#3542 (which
// blocks fluxcd/kustomize-controller#1680) on a real kube-apiserver: a
// group known at v1alpha1 through a lookup without a version gains a CRD
// served only at v1beta1, then a kind of it gains v1 (preferred). Through
// the controller-runtime Provider (not watching: the mapper alone), the
// new kind is found at its first versionless lookup, and an interval
// after the server serves v1 the versionless answers name v1 first, as
// client-go's deferred mapper does after a Reset. controller-runtime's own
// default mapper, asked the same in the same run, is logged, not
// asserted: its answers are its bug.
func TestVersionlessLookupsOnRealServer(t *testing.T) {
	c := startCluster(t)
	cfg := c.config
	ctx := context.Background()
	ext, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const group = "infrastructure.cluster.x-k8s.io"
	old := schema.GroupKind{Group: group, Kind: "OldMachine"}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, versionedCRD(group, old.Kind, "oldmachines", "v1alpha1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "OldMachine served", 30*time.Second, func() (bool, string) {
		v, ok, err := preferredVersion(cfg, group, old.Kind)
		return ok && v == "v1alpha1", fmt.Sprint(v, err)
	})

	const interval = 200 * time.Millisecond
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := controllerruntime.New(controllerruntime.WithoutMetrics(),
		controllerruntime.WithMapperOptions(restmapper.WithMissRefreshInterval(interval)))
	ours, err := p.MapperProvider(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	hc2, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := apiutil.NewDynamicRESTMapper(cfg, hc2)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]meta.RESTMapper{"kubeatlas": ours, "controller-runtime": theirs} {
		if got := mappingVersions(m, old); got != "v1alpha1 [v1alpha1]" {
			t.Fatalf("%s before: %s", name, got)
		}
	}

	// #3542: a new kind of the group, served only at a new version.
	osc := schema.GroupKind{Group: group, Kind: "OpenStackCluster"}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, versionedCRD(group, osc.Kind, "openstackclusters", "v1beta1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "OpenStackCluster served", 30*time.Second, func() (bool, string) {
		v, ok, err := preferredVersion(cfg, group, osc.Kind)
		return ok && v == "v1beta1", fmt.Sprint(v, err)
	})
	if got := mappingVersions(ours, osc); got != "v1beta1 [v1beta1]" {
		t.Errorf("kubeatlas: the new kind at its first versionless lookup: %s, want v1beta1", got)
	}
	t.Logf("controller-runtime %s's default mapper, the new kind without a version: %s", crVersion(), mappingVersions(theirs, osc))

	// A kind of the group gains v1, which becomes its preferred version.
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "oldmachines."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions = versionedCRD(group, old.Kind, "oldmachines", "v1", "v1alpha1").Spec.Versions
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "OldMachine served at v1", 30*time.Second, func() (bool, string) {
		v, ok, err := preferredVersion(cfg, group, old.Kind)
		return ok && v == "v1", fmt.Sprint(v, err)
	})
	want := mappingVersions(clientGoDeferred(t, cfg), old)
	// The server serves v1: a lookup an interval later is answered from
	// discovery validated after that.
	time.Sleep(interval + 10*time.Millisecond)
	if got := mappingVersions(ours, old); got != want || want != "v1 [v1 v1alpha1]" {
		t.Errorf("kubeatlas: an interval after v1 was served: %s, want %s (client-go's deferred mapper after a Reset)", got, want)
	}
	t.Logf("controller-runtime %s's default mapper, the kind without a version after v1 was served: %s (client-go after a Reset: %s)", crVersion(), mappingVersions(theirs, old), want)
}

// clientGoDeferred is client-go's deferred mapper over a fresh memory
// cache: what it answers after a Reset.
func clientGoDeferred(t *testing.T, cfg *rest.Config) meta.RESTMapper {
	t.Helper()
	dc, err := cgdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cgrestmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

// crVersion is the controller-runtime version this module requires, for
// the log (a test binary carries no module versions).
func crVersion() string {
	b, _ := os.ReadFile("go.mod")
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "sigs.k8s.io/controller-runtime" {
			return f[1]
		}
	}
	return "(version unknown)"
}
