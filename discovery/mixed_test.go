package discovery_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// afterAPIs is a transport that runs a hook after the server has answered
// a request for /apis: what changes on the server between a refresh's read
// and its resample on a new connection.
type afterAPIs struct {
	next http.RoundTripper
	hook func()
}

func (t afterAPIs) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && r.URL.Path == "/apis" {
		t.hook()
	}
	return resp, err
}

// TestOneServerMovingOnIsNotDisagreement: one API server whose discovery
// changes again between a refresh's read and its resample (a CRD gaining
// v2 while five other CRDs install) is moving on (A, then B, then C), not
// disagreeing with another (A, then B, then A): the snapshot is never a
// union, and the new preferred version is served after one refresh. Before,
// the resample's third view made the client serve the union of all three
// in the oldest one's order (the old preferred version), and a deleted
// group stayed for the union's window.
func TestOneServerMovingOnIsNotDisagreement(t *testing.T) {
	srv, hc, base := docserver.StartInProcess(t)
	widgets := docserver.CRD{Group: "burst.example.com", Versions: []string{"v1"}, Kind: "Widget"}
	if err := srv.AddCRD(widgets); err != nil {
		t.Fatal(err)
	}
	var burst []func()
	tr := afterAPIs{next: hc.Transport, hook: func() {
		if len(burst) > 0 {
			burst[0]()
			burst = burst[1:]
		}
	}}
	c, err := discovery.NewForHTTPClient(&http.Client{Transport: tr}, base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// The refresh reads widgets gaining v2; right after its /apis, five
	// CRDs install, which its resample sees.
	widgets.Versions = []string{"v2", "v1"} // v2 preferred
	if err := srv.AddCRD(widgets); err != nil {
		t.Fatal(err)
	}
	burst = append(burst, func() {
		for i := range 5 {
			if err := srv.AddCRD(docserver.CRD{Group: fmt.Sprintf("b%d.burst.example.com", i), Versions: []string{"v1"}, Kind: "Burst"}); err != nil {
				t.Error(err)
			}
		}
	})
	s, err := c.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Mixed() {
		v, r := s.Partial()
		t.Errorf("one server moving on was taken for disagreeing servers: mixed, partial %v %v", v, r)
	}
	g, ok := s.Group(widgets.Group)
	if !ok || g.PreferredVersion().Version != "v2" {
		t.Errorf("after one refresh, the preferred version of %s is not v2: %+v", widgets.Group, g)
	}
	mapping, err := m.RESTMapping(schema.GroupKind{Group: widgets.Group, Kind: "Widget"})
	if err != nil || mapping.Resource.Version != "v2" {
		t.Errorf("the mapper after one refresh: %v, %v; want v2", mapping, err)
	}
	for i := range 5 {
		if _, ok := s.Group(fmt.Sprintf("b%d.burst.example.com", i)); !ok {
			t.Errorf("the CRD the resample saw is not served")
		}
	}
	// A group deleted goes at the next refresh.
	if err := srv.RemoveCRD("b0.burst.example.com", "bursts"); err != nil {
		t.Fatal(err)
	}
	s, err = c.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Group("b0.burst.example.com"); ok || s.Mixed() {
		t.Errorf("a deleted group is still served after a refresh (mixed %v)", s.Mixed())
	}
}

// TestMovingOnKeepsLastKnown: a refresh that reads an aggregated API's
// group-version Stale with no resources (its server away, never cached by
// the aggregator) while the server moves on before the resample (a CRD
// installs) serves the resample's view with the version's last known
// resources, as the refresh's own read does: before, the third view was
// served as read, its kinds no longer mapped, and every refresh after
// kept nothing (issue 47's soak: a throttled identity, whose resample
// waited out a Retry-After, stopped mapping the aggregated kind for the
// whole outage while the identities beside it kept it).
func TestMovingOnKeepsLastKnown(t *testing.T) {
	srv, hc, base := docserver.StartInProcess(t)
	gv := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	live := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: []apidiscoveryv2.APIResourceDiscovery{{
		Resource: "nodes", ResponseKind: &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: "NodeMetrics"},
		Scope: apidiscoveryv2.ScopeCluster, Verbs: []string{"get", "list"},
	}}}
	if err := srv.SetGroupVersion(gv.Group, live); err != nil {
		t.Fatal(err)
	}
	var burst []func()
	tr := afterAPIs{next: hc.Transport, hook: func() {
		if len(burst) > 0 {
			burst[0]()
			burst = burst[1:]
		}
	}}
	c, err := discovery.NewForHTTPClient(&http.Client{Transport: tr}, base)
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetGroupVersion(gv.Group, apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}); err != nil {
		t.Fatal(err)
	}
	burst = append(burst, func() {
		if err := srv.AddCRD(docserver.CRD{Group: "later.example.com", Versions: []string{"v1"}, Kind: "Later"}); err != nil {
			t.Error(err)
		}
	})
	for i := range 2 {
		s, err := c.Refresh(ctx)
		if !errors.Is(err, discovery.ErrStale) {
			t.Fatalf("refresh %d: %v, want the Stale group-version", i+1, err)
		}
		if _, ok := s.Group("later.example.com"); !ok {
			t.Errorf("refresh %d: the CRD the resample saw is not served", i+1)
		}
		v, ok := s.Version(gv)
		if !ok || !v.LastKnown || len(v.Resources) != 1 {
			t.Errorf("refresh %d: %s is %+v, want its last known resource", i+1, gv, v)
		}
		if _, err := m.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: "NodeMetrics"}, gv.Version); err != nil {
			t.Errorf("refresh %d: NodeMetrics no longer maps: %v", i+1, err)
		}
	}
}
