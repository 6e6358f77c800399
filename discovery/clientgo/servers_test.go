package clientgo_test

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// legacyServer serves legacy discovery JSON from paths (the body for each
// path; any other path is a 404) and records each request's Accept header.
func legacyServer(t *testing.T, paths map[string]string) (base string, accepts func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Accept"))
		mu.Unlock()
		body, ok := paths[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// customMetrics is kube-aggregator's legacy document of a custom metrics
// API: subresources of "pods", which it does not list itself.
var customMetrics = map[string]string{
	"/api":                                `{"kind":"APIVersions","versions":["v1"]}`,
	"/api/v1":                             `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get"]}]}`,
	"/apis":                               `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"custom.metrics.k8s.io","versions":[{"groupVersion":"custom.metrics.k8s.io/v1beta1","version":"v1beta1"}],"preferredVersion":{"groupVersion":"custom.metrics.k8s.io/v1beta1","version":"v1beta1"}}]}`,
	"/apis/custom.metrics.k8s.io/v1beta1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"custom.metrics.k8s.io/v1beta1","resources":[{"name":"pods/http_requests","singularName":"","namespaced":true,"kind":"MetricValueList","verbs":["get"]}]}`,
}

// TestKindlessParentsListed: the metrics a custom metrics API lists under a
// parent it does not list are listed, as client-go lists them (they were
// dropped with the kindless parent).
func TestKindlessParentsListed(t *testing.T) {
	base, _ := legacyServer(t, customMetrics)
	want, err := clientGo(t, base).ServerResourcesForGroupVersion("custom.metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := adapter(t, base).ServerResourcesForGroupVersion("custom.metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	names := func(l *metav1.APIResourceList) (out []string) {
		for _, r := range l.APIResources {
			out = append(out, r.Name+":"+r.Kind)
		}
		return out
	}
	if !reflect.DeepEqual(names(got), names(want)) || len(names(got)) == 0 {
		t.Errorf("resources: adapter %v, client-go %v", names(got), names(want))
	}
}

// TestLegacyGroupsAndMaybeResources pins a documented difference: from a
// legacy server, GroupsAndMaybeResources answers resources and failures
// too (client-go's answers groups alone), the same as its
// ServerGroupsAndResources.
func TestLegacyGroupsAndMaybeResources(t *testing.T) {
	base, _ := legacyServer(t, customMetrics)
	groups, resources, failed, err := adapter(t, base).GroupsAndMaybeResources()
	if err != nil {
		t.Fatal(err)
	}
	_, cgResources, cgFailed, err := clientGo(t, base).GroupsAndMaybeResources()
	if err != nil || len(cgResources) != 0 || len(cgFailed) != 0 {
		t.Fatalf("client-go: resources %v, failed %v, %v; the difference pinned here is gone", cgResources, cgFailed, err)
	}
	gv := schema.GroupVersion{Group: "custom.metrics.k8s.io", Version: "v1beta1"}
	if len(groups.Groups) != 2 || resources[gv] == nil || len(resources[gv].APIResources) != 1 || len(failed) != 0 {
		t.Errorf("groups %d, resources of %s %v, failed %v; want 2 groups, its metric, none failed", len(groups.Groups), gv, resources[gv], failed)
	}
}

// TestLegacyGroupWithoutPreferredVersion: a legacy group that names no
// preferred version is answered so, as client-go answers it (it was given
// its first version).
func TestLegacyGroupWithoutPreferredVersion(t *testing.T) {
	paths := map[string]string{
		"/apis":                   `{"groups":[{"name":"astronomy","versions":[{"groupVersion":"astronomy/v8beta1","version":"v8beta1"}]}]}`,
		"/apis/astronomy/v8beta1": `{"groupVersion":"astronomy/v8beta1","resources":[{"name":"stars","namespaced":true,"kind":"Star"}]}`,
	}
	base, _ := legacyServer(t, paths)
	want, err := clientGo(t, base).ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	got, err := adapter(t, base).ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got.Groups[0].PreferredVersion != (metav1.GroupVersionForDiscovery{}) {
		t.Errorf("ServerGroups: adapter %+v, client-go %+v", got, want)
	}
}

// TestLegacyGroupListedTwice: a group a legacy server lists twice keeps
// the versions of both entries (the second entry's were dropped); the
// entries are one group (client-go lists both: the kept difference).
func TestLegacyGroupListedTwice(t *testing.T) {
	paths := map[string]string{
		"/apis":               `{"groups":[{"name":"batch","versions":[{"groupVersion":"batch/v1"}]},{"name":"batch","versions":[{"groupVersion":"batch/v1beta1"}]}]}`,
		"/apis/batch/v1":      `{"groupVersion":"batch/v1","resources":[{"name":"jobs","namespaced":true,"kind":"Job"}]}`,
		"/apis/batch/v1beta1": `{"groupVersion":"batch/v1beta1","resources":[{"name":"cronjobs","namespaced":true,"kind":"CronJob"}]}`,
	}
	base, _ := legacyServer(t, paths)
	groups, err := adapter(t, base).ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			versions = append(versions, v.GroupVersion)
		}
	}
	if len(groups.Groups) != 1 || !reflect.DeepEqual(versions, []string{"batch/v1", "batch/v1beta1"}) {
		t.Errorf("groups %d, versions %v; want one group with batch/v1, batch/v1beta1", len(groups.Groups), versions)
	}
}

// TestAcceptHeaderDifference pins a documented difference: on a legacy
// server, the adapter's first request asks for protobuf aggregated
// discovery first, then JSON v2, v2beta1 and legacy JSON; client-go asks
// for JSON v2 and legacy JSON only.
func TestAcceptHeaderDifference(t *testing.T) {
	base, accepts := legacyServer(t, customMetrics)
	if _, err := adapter(t, base).ServerGroups(); err != nil {
		t.Fatal(err)
	}
	ours := accepts()[0]
	base, accepts = legacyServer(t, customMetrics)
	if _, err := clientGo(t, base).ServerGroups(); err != nil {
		t.Fatal(err)
	}
	theirs := accepts()[0]
	if !strings.HasPrefix(ours, "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList") ||
		!strings.Contains(ours, "v=v2beta1") || !strings.HasSuffix(ours, "application/json") {
		t.Errorf("adapter's Accept: %q", ours)
	}
	if strings.Contains(theirs, "protobuf") || !strings.HasPrefix(theirs, "application/json;g=apidiscovery.k8s.io;v=v2") {
		t.Errorf("client-go's Accept: %q; the difference pinned here changed", theirs)
	}
}
