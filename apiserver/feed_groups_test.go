package apiserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"

	"github.com/kubeatlas/kubeatlas/apiserver"
	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
)

// snapshotOf reads the discovery of a fake server with the given CRDs.
func snapshotOf(t *testing.T, crds ...discoverytest.CRD) *discovery.Snapshot {
	t.Helper()
	srv, url := discoverytest.Start(t)
	for _, crd := range crds {
		if err := srv.AddCRD(crd); err != nil {
			t.Fatal(err)
		}
	}
	c, err := discovery.NewForHTTPClient(nil, url)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGroupOnlyOneServerServesHasAnObject: when the client's URL has
// answered only from a server without a group (behind a load balancer, its
// snapshot is one server's view until it sees two disagree) and the check
// finds another server that serves it, the group has an object all the
// same, built from that server's view, with Consistent False; the groups
// every server serves are Consistent True.
func TestGroupOnlyOneServerServesHasAnObject(t *testing.T) {
	extra := discoverytest.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "New"}
	older, newer := snapshotOf(t), snapshotOf(t, extra)
	f := &apiserver.Feed{Stores: apiserver.NewStores(nil)}
	f.ApplySnapshot(older)
	if _, ok := f.Stores.Groups.Peek("new.example.com"); ok {
		t.Fatal("a group nobody was found to serve has an object")
	}
	f.ApplyReport(&consistency.Report{
		Servers: []consistency.Server{{Identity: "old", Alive: true, View: older}, {Identity: "new", Alive: true, View: newer}},
		Differences: []consistency.Difference{{GroupVersion: schema.GroupVersion{Group: "new.example.com", Version: "v1"},
			ServedBy: []string{"new"}, MissingFrom: []string{"old"}}},
	}, time.Now())
	o, ok := f.Stores.Groups.Peek("new.example.com")
	if !ok {
		t.Fatal("the group one server serves has no object")
	}
	g := o.(*v1alpha1.Group)
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionConsistent); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("its Consistent condition is %+v, want False", c)
	}
	if len(g.Status.Versions) != 1 || g.Status.Versions[0].Version != "v1" || len(g.Status.Versions[0].Resources) == 0 {
		t.Errorf("its versions are %+v, want v1 with the CRD's resource", g.Status.Versions)
	}
	o, _ = f.Stores.Groups.Peek("apps")
	if c := meta.FindStatusCondition(o.(*v1alpha1.Group).Status.Conditions, v1alpha1.ConditionConsistent); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("apps's Consistent condition is %+v, want True", c)
	}
	// Once the servers agree again without it, it is gone.
	f.ApplyReport(&consistency.Report{Servers: []consistency.Server{{Identity: "old", Alive: true, View: older}}}, time.Now())
	if _, ok := f.Stores.Groups.Peek("new.example.com"); ok {
		t.Error("the group no server serves any more still has an object")
	}
}

// TestFeedTakesTheClientsSnapshot: a client that read its snapshot before
// the feed got it (Subscribe tells only of later changes) fills the stores
// all the same, with no change upstream.
func TestFeedTakesTheClientsSnapshot(t *testing.T) {
	_, url := discoverytest.Start(t)
	c, err := discovery.NewForHTTPClient(nil, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := &apiserver.Feed{Client: c, Stores: apiserver.NewStores(nil), CheckInterval: -1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := f.Stores.Groups.Peek("apps"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's snapshot was not applied: no apps group after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.Stores.Groups.List(context.Background(), nil); err != nil {
		t.Fatalf("the groups store is filled but answers %v", err)
	}
}

// TestVerdictCondition: the cluster's Consistent condition is the
// report's verdict: True only where every API server was seen and they
// agree; False where they were seen to differ, a server's merged view
// serving more than its own among them (what a peer serves, seen from
// that server alone); Unknown where the check could not tell (one server
// of two seen, its merged view its own; or none seen).
func TestVerdictCondition(t *testing.T) {
	view := snapshotOf(t)
	fromPeer := []schema.GroupVersionResource{{Group: "new.example.com", Version: "v1", Resource: "news"}}
	tests := []struct {
		name   string
		r      consistency.Report
		status metav1.ConditionStatus
		reason string
	}{
		{"every server asked, agreeing", consistency.Report{Certainty: consistency.EveryServerAsked,
			Servers: []consistency.Server{{Identity: "a", Alive: true, View: view}, {Identity: "b", Alive: true, View: view}}}, metav1.ConditionTrue, "SameDiscovery"},
		{"one of two seen", consistency.Report{Certainty: consistency.NotEveryServerSeen,
			Servers: []consistency.Server{{Identity: "a", Alive: true}, {Identity: "b", Alive: true}, {Alive: true, View: view, Samples: 4}}}, metav1.ConditionUnknown, "NotEveryServerSeen"},
		{"every answering server seen", consistency.Report{Certainty: consistency.EveryAnsweringServerSeen,
			Servers: []consistency.Server{{Identity: "a", Alive: true, View: view}, {Identity: "b", Alive: true}}}, metav1.ConditionUnknown, "NotEveryServerSeen"},
		{"none seen", consistency.Report{Certainty: consistency.NotEveryServerSeen}, metav1.ConditionUnknown, "NotEveryServerSeen"},
		{"one of two seen, a peer serves more", consistency.Report{Certainty: consistency.NotEveryServerSeen,
			Servers: []consistency.Server{{Identity: "a", Alive: true}, {Identity: "b", Alive: true}, {Alive: true, View: view, Samples: 4, FromPeers: fromPeer}}}, metav1.ConditionFalse, "Differ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &apiserver.Feed{Stores: apiserver.NewStores(nil)}
			f.ApplySnapshot(view)
			f.ApplyReport(&tt.r, time.Now())
			o, ok := f.Stores.Consistency.Peek(v1alpha1.ClusterConsistencyName)
			if !ok {
				t.Fatal("no verdict")
			}
			c := meta.FindStatusCondition(o.(*v1alpha1.ClusterConsistency).Status.Conditions, v1alpha1.ConditionConsistent)
			if c == nil || c.Status != tt.status || c.Reason != tt.reason || c.Message == "" {
				t.Errorf("the Consistent condition is %+v, want %s (%s)", c, tt.status, tt.reason)
			}
		})
	}
}

// TestGroupConditionsClaimOnlyWhatWasSeen: a check that saw one server of
// two, whose merged view serves a group its own does not (its peer
// serves it), makes that group's Consistent condition False and its
// served-everywhere label "false", the difference naming the server's
// peers (it was True: no two views seen differed); a group nothing names
// is Unknown, not True, for the other server was not seen. Once every
// server is seen to agree, the groups are True.
func TestGroupConditionsClaimOnlyWhatWasSeen(t *testing.T) {
	extra := discoverytest.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "New"}
	own, merged := snapshotOf(t), snapshotOf(t, extra)
	f := &apiserver.Feed{Stores: apiserver.NewStores(nil)}
	f.ApplySnapshot(merged)
	f.ApplyReport(&consistency.Report{Certainty: consistency.NotEveryServerSeen, Servers: []consistency.Server{
		{Identity: "a", Alive: true}, {Identity: "b", Alive: true},
		{Alive: true, View: own, Samples: 4, FromPeers: []schema.GroupVersionResource{{Group: extra.Group, Version: "v1", Resource: "news"}}},
	}}, time.Now())
	condition := func(name string) (*metav1.Condition, map[string]string) {
		t.Helper()
		o, ok := f.Stores.Groups.Peek(name)
		if !ok {
			t.Fatalf("no group %s", name)
		}
		g := o.(*v1alpha1.Group)
		return meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionConsistent), g.Labels
	}
	if c, labels := condition(extra.Group); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "news served by peers of ") || labels[apiserver.LabelServedEverywhere] != "false" {
		t.Errorf("%s, served through a peer: %+v, labels %v; want False, naming the server's peers", extra.Group, c, labels)
	}
	if c, _ := condition("apps"); c == nil || c.Status != metav1.ConditionUnknown {
		t.Errorf("apps, one server of two seen: %+v, want Unknown", c)
	}
	o, _ := f.Stores.Consistency.Peek(v1alpha1.ClusterConsistencyName)
	if d := o.(*v1alpha1.ClusterConsistency).Status.Differences; len(d) != 1 || d[0].Group != extra.Group || d[0].Resource != "news" {
		t.Errorf("the verdict's differences: %+v, want %s news", d, extra.Group)
	}

	f.ApplyReport(&consistency.Report{Certainty: consistency.EveryServerAsked, Servers: []consistency.Server{
		{Identity: "a", Alive: true, View: merged}, {Identity: "b", Alive: true, View: merged},
	}}, time.Now())
	for _, g := range []string{"apps", extra.Group} {
		if c, _ := condition(g); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s, every server seen to agree: %+v, want True", g, c)
		}
	}
}
