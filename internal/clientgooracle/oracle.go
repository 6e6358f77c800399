// Package clientgooracle asks a client-go DiscoveryInterface what
// client-go's own helpers make of it (restmapper.GetAPIGroupResources,
// ServerPreferredResources, ServerGroupsAndResources, ...), so that a test
// can require the same answers of discovery/clientgo's adapter as of
// client-go's DiscoveryClient against the same server: the differential
// tests beside discovery/clientgo and in internal/withfake share it.
package clientgooracle

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
)

// Answers is what client-go's own helpers make of a discovery interface,
// in a fixed order.
type Answers struct {
	GroupResources []*restmapper.APIGroupResources
	Preferred      []*metav1.APIResourceList
	PreferredNS    []*metav1.APIResourceList
	Groups         []*metav1.APIGroup
	Resources      []*metav1.APIResourceList
	Failed         []schema.GroupVersion
}

// Ask asks d through client-go's helpers; an error other than failed
// group-versions fails the test.
func Ask(t testing.TB, d cgdiscovery.DiscoveryInterface) Answers {
	t.Helper()
	var a Answers
	var err error
	if a.GroupResources, err = restmapper.GetAPIGroupResources(d); err != nil && !cgdiscovery.IsGroupDiscoveryFailedError(err) {
		t.Fatalf("GetAPIGroupResources: %v", err)
	}
	a.Preferred, _ = cgdiscovery.ServerPreferredResources(d)
	a.PreferredNS, _ = cgdiscovery.ServerPreferredNamespacedResources(d)
	a.Groups, a.Resources, err = cgdiscovery.ServerGroupsAndResources(d)
	var failed *cgdiscovery.ErrGroupDiscoveryFailed
	if errors.As(err, &failed) {
		for gv := range failed.Groups {
			a.Failed = append(a.Failed, gv)
		}
	} else if err != nil {
		t.Fatalf("ServerGroupsAndResources: %v", err)
	}
	byGV := func(x, y *metav1.APIResourceList) int { return strings.Compare(x.GroupVersion, y.GroupVersion) }
	// The preferred-resources helpers build their lists from maps, in no
	// fixed order.
	for _, lists := range [][]*metav1.APIResourceList{a.Preferred, a.PreferredNS} {
		slices.SortFunc(lists, byGV)
		for _, l := range lists {
			slices.SortFunc(l.APIResources, func(x, y metav1.APIResource) int { return strings.Compare(x.Name, y.Name) })
		}
	}
	slices.SortFunc(a.Resources, byGV)
	slices.SortFunc(a.Failed, func(x, y schema.GroupVersion) int { return strings.Compare(x.String(), y.String()) })
	return a
}

// Compare fails the test for each answer that differs, showing where.
func Compare(t testing.TB, got, want Answers) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"restmapper.GetAPIGroupResources", got.GroupResources, want.GroupResources},
		{"ServerPreferredResources", got.Preferred, want.Preferred},
		{"ServerPreferredNamespacedResources", got.PreferredNS, want.PreferredNS},
		{"ServerGroupsAndResources groups", got.Groups, want.Groups},
		{"ServerGroupsAndResources resources", got.Resources, want.Resources},
		{"failed group-versions", got.Failed, want.Failed},
	} {
		if !equality.Semantic.DeepEqual(c.got, c.want) {
			t.Errorf("%s differs from client-go's:\n%s", c.name, FirstDifference(c.got, c.want))
		}
	}
}

// FirstDifference shows where two values part, as JSON lines.
func FirstDifference(got, want any) string {
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	gl, wl := strings.Split(string(g), "\n"), strings.Split(string(w), "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			lo := max(0, i-6)
			hi := min(i+6, len(gl), len(wl))
			return fmt.Sprintf("at line %d:\n got %s\nwant %s", i, strings.Join(gl[lo:hi], "\n"), strings.Join(wl[lo:hi], "\n"))
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(gl), len(wl))
}
