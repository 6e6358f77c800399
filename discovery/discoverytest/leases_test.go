package discoverytest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

const (
	leasesPath       = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
	identitySelector = "?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver"
)

func listLeases(t *testing.T, c *http.Client, url string) coordinationv1.LeaseList {
	t.Helper()
	resp, body := do(t, c, http.MethodGet, url, "Accept", "application/json")
	var list coordinationv1.LeaseList
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", url, resp.StatusCode, err, body)
	}
	if list.Kind != "LeaseList" || list.APIVersion != "coordination.k8s.io/v1" || list.ResourceVersion == "" {
		t.Errorf("GET %s: kind %q, apiVersion %q, resourceVersion %q", url, list.Kind, list.APIVersion, list.ResourceVersion)
	}
	return list
}

// byHostname indexes identity leases by their kubernetes.io/hostname label.
func byHostname(list coordinationv1.LeaseList) map[string]coordinationv1.Lease {
	m := map[string]coordinationv1.Lease{}
	for _, l := range list.Items {
		m[l.Labels["kubernetes.io/hostname"]] = l
	}
	return m
}

// TestIdentityLeases: every backend's answer lists one identity lease per
// backend in kube-system, shaped as a kube-apiserver's, and GET by name
// answers one.
func TestIdentityLeases(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(3, discoverytest.RoundRobin))
	start := time.Now()
	var first map[string]coordinationv1.Lease
	for _, u := range []string{base, srv.Backends()[0].URL(), srv.Backends()[1].URL(), srv.Backends()[2].URL()} {
		for _, query := range []string{"", identitySelector} {
			leases := byHostname(listLeases(t, http.DefaultClient, u+leasesPath+query))
			if len(leases) != 3 {
				t.Fatalf("%s%s: %d leases, want 3", u, query, len(leases))
			}
			if first == nil {
				first = leases
			}
			for _, b := range srv.Backends() {
				l, ok := leases[b.ID()]
				if !ok {
					t.Fatalf("no lease of hostname %s", b.ID())
				}
				if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != *first[b.ID()].Spec.HolderIdentity || l.UID != first[b.ID()].UID {
					t.Errorf("%s: backends disagree on %s's lease", u, b.ID())
				}
			}
		}
	}
	for _, b := range srv.Backends() {
		l := first[b.ID()]
		if l.Name != b.LeaseName() || !strings.HasPrefix(l.Name, "apiserver-") || l.Namespace != "kube-system" || l.Kind != "" {
			t.Errorf("lease %s/%s (kind %q) of %s, want kube-system/%s in a list without kinds", l.Namespace, l.Name, l.Kind, b.ID(), b.LeaseName())
		}
		holder, uuid, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
		if holder != l.Name || len(uuid) != 36 {
			t.Errorf("holderIdentity %q, want %s_<uuid>", *l.Spec.HolderIdentity, l.Name)
		}
		if l.Labels["apiserver.kubernetes.io/identity"] != "kube-apiserver" || len(l.Labels) != 2 {
			t.Errorf("labels %v", l.Labels)
		}
		u, _ := url.Parse(b.URL())
		if got := l.Annotations["kubernetes.io/peer-advertise-address"]; got != u.Host || len(l.Annotations) != 1 {
			t.Errorf("annotations %v, want the peer-advertise-address %s", l.Annotations, u.Host)
		}
		if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 3600 {
			t.Errorf("leaseDurationSeconds %v, want 3600", l.Spec.LeaseDurationSeconds)
		}
		if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > time.Since(start)+11*time.Second {
			t.Errorf("renewTime %v: not renewed lately", l.Spec.RenewTime)
		}
		if l.ResourceVersion == "" || l.CreationTimestamp.IsZero() {
			t.Errorf("lease %s: resourceVersion %q, creationTimestamp %v", l.Name, l.ResourceVersion, l.CreationTimestamp)
		}

		resp, body := get(t, base+leasesPath+"/"+l.Name)
		var one coordinationv1.Lease
		if err := json.Unmarshal(body, &one); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET lease %s: %d %v", l.Name, resp.StatusCode, err)
		}
		if one.Kind != "Lease" || one.APIVersion != "coordination.k8s.io/v1" || one.UID != l.UID {
			t.Errorf("GET lease %s: %s %s %s", l.Name, one.APIVersion, one.Kind, one.UID)
		}
	}

	// Elsewhere, nothing; a selector that matches nothing, nothing.
	for _, u := range []string{
		"/apis/coordination.k8s.io/v1/namespaces/default/leases",
		leasesPath + "?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-scheduler",
		leasesPath + "?fieldSelector=metadata.name%3Dnone",
	} {
		if n := len(listLeases(t, http.DefaultClient, base+u).Items); n != 0 {
			t.Errorf("%s: %d leases, want none", u, n)
		}
	}
	if n := len(listLeases(t, http.DefaultClient, base+"/apis/coordination.k8s.io/v1/leases").Items); n != 3 {
		t.Errorf("leases in every namespace: %d, want 3", n)
	}
	name := srv.Backends()[2].LeaseName()
	if n := len(listLeases(t, http.DefaultClient, base+leasesPath+"?fieldSelector=metadata.name%3D"+name).Items); n != 1 {
		t.Errorf("fieldSelector metadata.name=%s: %d leases, want 1", name, n)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, leasesPath + "/apiserver-none", http.StatusNotFound},
		{http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/default/leases/" + name, http.StatusNotFound},
		{http.MethodGet, leasesPath + "?labelSelector=%3D%3D", http.StatusBadRequest},
		{http.MethodGet, leasesPath + "?fieldSelector=spec.holderIdentity%3Dx", http.StatusBadRequest},
		{http.MethodGet, leasesPath + "?watch=1", http.StatusMethodNotAllowed},
		{http.MethodDelete, leasesPath + "/" + name, http.StatusMethodNotAllowed},
	} {
		if resp, _ := do(t, http.DefaultClient, tc.method, base+tc.path); resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}

	// Metadata only, as a metadata client asks.
	resp, body := get(t, base+leasesPath, "Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	var partial metav1.PartialObjectMetadataList
	if err := json.Unmarshal(body, &partial); err != nil || resp.StatusCode != http.StatusOK || partial.Kind != "PartialObjectMetadataList" || len(partial.Items) != 3 {
		t.Errorf("metadata-only list: %d %v %s, %d items", resp.StatusCode, err, partial.Kind, len(partial.Items))
	}

	// The discovery the fake serves lists the leases, as the real fixture does.
	list, _ := aggregatedGroups(t, base, acceptV2JSON)
	v := findVersion(list, schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"})
	found := false
	for _, r := range v.Resources {
		found = found || r.Resource == "leases" && r.Scope == "Namespaced"
	}
	if !found {
		t.Errorf("discovery does not list coordination.k8s.io/v1 leases")
	}
}

// TestLeaseRenewTime: SetLeaseRenewTime pins a lease's renewTime, which
// makes its backend look dead once an hour has passed since, and the zero
// time makes it renewed again; RemoveLease deletes it until
// SetLeaseRenewTime brings it back, with its holderIdentity. The backend
// serves throughout.
func TestLeaseRenewTime(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin))
	b := srv.Backends()[1]
	lease := func() (coordinationv1.Lease, bool) {
		l, ok := byHostname(listLeases(t, http.DefaultClient, base+leasesPath+identitySelector))[b.ID()]
		return l, ok
	}
	before, _ := lease()
	alive := func(l coordinationv1.Lease) bool {
		return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).After(time.Now())
	}

	dead := time.Now().Add(-2 * time.Hour).Truncate(time.Microsecond)
	b.SetLeaseRenewTime(dead)
	l, _ := lease()
	if !l.Spec.RenewTime.Time.Equal(dead) || alive(l) || l.ResourceVersion == before.ResourceVersion {
		t.Errorf("after SetLeaseRenewTime(2h ago): renewTime %v (want %v), alive %v, resourceVersion %s (was %s)",
			l.Spec.RenewTime, dead, alive(l), l.ResourceVersion, before.ResourceVersion)
	}
	if resp, _ := get(t, b.URL()+"/apis", "Accept", acceptV2JSON); resp.StatusCode != http.StatusOK {
		t.Errorf("a backend that looks dead answers %d", resp.StatusCode)
	}

	b.SetLeaseRenewTime(time.Time{})
	if l, _ := lease(); !alive(l) || time.Since(l.Spec.RenewTime.Time) > time.Minute {
		t.Errorf("after SetLeaseRenewTime(zero): renewTime %v", l.Spec.RenewTime)
	}

	b.RemoveLease()
	if _, ok := lease(); ok {
		t.Fatalf("the lease is listed after RemoveLease")
	}
	if resp, _ := get(t, base+leasesPath+"/"+b.LeaseName()); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET of a removed lease: %d", resp.StatusCode)
	}
	if n := len(listLeases(t, http.DefaultClient, base+leasesPath).Items); n != 1 {
		t.Errorf("%d leases after removing one of 2", n)
	}
	b.SetLeaseRenewTime(time.Time{})
	back, ok := lease()
	if !ok || *back.Spec.HolderIdentity != *before.Spec.HolderIdentity || !alive(back) || back.UID == before.UID {
		t.Errorf("after SetLeaseRenewTime on a removed lease: listed %v, holderIdentity %v (was %s), uid %s (was %s)",
			ok, back.Spec.HolderIdentity, *before.Spec.HolderIdentity, back.UID, before.UID)
	}
}

// TestRemoveLeaseLeavesPeerAggregation: with peer aggregation, a backend
// whose lease is removed drops out of its peers' merged discovery, as a
// real peer proxy forgets it; it serves its own; a lease brought back
// brings it back.
func TestRemoveLeaseLeavesPeerAggregation(t *testing.T) {
	srv, _ := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin), discoverytest.WithPeerAggregation())
	b0, b1 := srv.Backends()[0], srv.Backends()[1]
	if err := b1.AddCRD(extra); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: extra.Group, Version: "v1"}
	merges := func(b *discoverytest.Backend) bool {
		list, _ := aggregatedGroups(t, b.URL(), acceptV2JSON)
		return findVersion(list, gv) != nil
	}
	if !merges(b0) {
		t.Fatal("backend 0's merged view lacks backend 1's group")
	}
	b1.SetLeaseRenewTime(time.Now().Add(-2 * time.Hour))
	if !merges(b0) {
		t.Error("an expired lease took backend 1 out of backend 0's merged view; a real peer proxy keeps it")
	}
	b1.RemoveLease()
	if merges(b0) {
		t.Error("backend 0's merged view still has the group of backend 1, whose lease is gone")
	}
	if !merges(b1) {
		t.Error("backend 1 without a lease no longer serves its own group")
	}
	b1.SetLeaseRenewTime(time.Time{})
	if !merges(b0) {
		t.Error("backend 1's lease is back, its group is not in backend 0's merged view")
	}
}

// TestLeaseRenewals: a live backend's lease is renewed every 10 s, each
// renewal a write with a new resourceVersion; a pinned one is not. On the
// fake clock of a synctest bubble.
func TestLeaseRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := discoverytest.StartInProcess(t, discoverytest.WithBackends(2, discoverytest.RoundRobin))
		start := time.Now()
		before := byHostname(listLeases(t, hc, base+leasesPath))
		srv.Backends()[1].SetLeaseRenewTime(start)
		time.Sleep(25 * time.Second)
		after := byHostname(listLeases(t, hc, base+leasesPath))
		live, pinned := srv.Backends()[0].ID(), srv.Backends()[1].ID()
		if got := after[live].Spec.RenewTime.Time; !got.Equal(start.Add(20*time.Second)) || after[live].ResourceVersion == before[live].ResourceVersion {
			t.Errorf("25 s later the live lease was renewed at %v (resourceVersion %s, was %s), want %v",
				got.Sub(start), after[live].ResourceVersion, before[live].ResourceVersion, 20*time.Second)
		}
		if got := after[pinned].Spec.RenewTime.Time; !got.Equal(start) {
			t.Errorf("the pinned lease was renewed at %v", got.Sub(start))
		}
	})
}

// TestLeasesShareResourceVersions: lease writes take resourceVersions from
// the one counter the objects use, as etcd has one, and a watch of CRDs
// from a lease list's resourceVersion works.
func TestLeasesShareResourceVersions(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin))
	rv := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("resourceVersion %q: %v", s, err)
		}
		return n
	}
	crdList := func() uint64 {
		resp, body := get(t, base+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
		var list metav1.List
		if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("listing CRDs: %d %v", resp.StatusCode, err)
		}
		return rv(list.ResourceVersion)
	}
	crdRV := crdList()
	srv.Backends()[0].SetLeaseRenewTime(time.Now().Add(-time.Minute))
	leaseRV := listLeases(t, http.DefaultClient, base+leasesPath).ResourceVersion
	if after := crdList(); rv(leaseRV) <= crdRV || after < rv(leaseRV) {
		t.Errorf("a lease write: the lease list is at %s, CRDs were at %d and then at %d; want one counter, moved on", leaseRV, crdRV, after)
	}
	if err := srv.AddCRD(extra); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, base+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=1&resourceVersion="+leaseRV+"&timeoutSeconds=1")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"type":"ADDED"`) || strings.Contains(string(body), `"type":"ERROR"`) {
		t.Errorf("watching CRDs from a lease list's resourceVersion: %d %s", resp.StatusCode, body)
	}
}
