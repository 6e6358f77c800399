//go:build linux

package tests

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// onlyNext is what v1.37.1 serves and v1.36.3 does not (realserver.md).
var onlyNext = []schema.GroupVersionResource{
	{Group: "certificates.k8s.io", Version: "v1", Resource: "clustertrustbundles"},
	{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests"},
	{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"},
	{Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations"},
}

func sortedGVRs(in []schema.GroupVersionResource) []schema.GroupVersionResource {
	out := slices.Clone(in)
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// resourceDifferences lists the resources (not whole group-versions) that
// a report says not every server serves, with who serves them.
func resourceDifferences(r *consistency.Report) (gvrs []schema.GroupVersionResource, servedBy map[schema.GroupVersionResource][]string) {
	servedBy = map[schema.GroupVersionResource][]string{}
	for _, d := range r.Differences {
		if d.Resource != "" {
			gvr := d.GroupVersion.WithResource(d.Resource)
			gvrs = append(gvrs, gvr)
			servedBy[gvr] = d.ServedBy
		}
	}
	return sortedGVRs(gvrs), servedBy
}

// TestConsistencyOnRealPair: against a real v1.36.3 + v1.37.1 control
// plane behind a round-robin balancer, consistency.Check finds both servers
// through their identity leases, asks each directly, and names what
// differs: the four resources only v1.37.1 serves (which v1.36.3's merged
// view gets from its peer), and the resources whose storage versions the
// servers disagree on. Through the balancer alone it reaches both in a few
// samples and says so.
func TestConsistencyOnRealPair(t *testing.T) {
	p := startHA(t, haOptions{peerProxy: true, storageVersionAPI: true})
	ctx := context.Background()
	c, err := discovery.New(p.config)
	if err != nil {
		t.Fatal(err)
	}
	old, next := p.servers[0], p.servers[1]
	// The pair is on loopback, which the kubernetes EndpointSlices may not
	// list (their validation refuses 127.0.0.0/8): the test vouches for the
	// servers' addresses itself, as an operator who knows them would, so
	// that the check asks them with the client's credentials.
	vouched := consistency.WithAPIServers(strings.TrimPrefix(old.url, "https://"), strings.TrimPrefix(next.url, "https://"))
	var r *consistency.Report
	eventually(t, "both servers' leases and peer-aggregated discovery", 60*time.Second, func() (bool, string) {
		r, err = consistency.Check(ctx, c, vouched)
		if err != nil {
			return false, err.Error()
		}
		reached := 0
		for _, s := range r.Servers {
			if s.View != nil && len(s.FromPeers) > 0 || s.Version == next.version {
				reached++
			}
		}
		return reached == 2, fmt.Sprintf("%d servers, %s", len(r.Servers), r.Certainty)
	})
	logReport(t, r)
	if r.Verdict() != consistency.Inconsistent || r.Consistent() || r.Certainty != consistency.EveryServerAsked || r.Samples != 0 {
		t.Errorf("verdict %v, certainty %v, %d samples: want an inconsistency found by asking both directly", r.Verdict(), r.Certainty, r.Samples)
	}
	byName := map[string]consistency.Server{}
	for _, s := range r.Servers {
		byName[s.Hostname] = s
	}
	if byName[old.name].Version != old.version || byName[next.name].Version != next.version {
		t.Errorf("versions: %s=%s %s=%s", old.name, byName[old.name].Version, next.name, byName[next.name].Version)
	}
	gvrs, servedBy := resourceDifferences(r)
	if !slices.Equal(gvrs, sortedGVRs(onlyNext)) {
		t.Errorf("resources that differ: %v, want %v", gvrs, onlyNext)
	}
	for gvr, by := range servedBy {
		if !slices.Equal(by, []string{next.name}) {
			t.Errorf("%s served by %v, want %s alone", gvr, by, next.name)
		}
	}
	if got := sortedGVRs(byName[old.name].FromPeers); !slices.Equal(got, sortedGVRs(onlyNext)) {
		t.Errorf("%s gets %v from its peer, want %v", old.name, got, onlyNext)
	}
	if got := byName[next.name].FromPeers; len(got) != 0 {
		t.Errorf("%s gets %v from its peer, want nothing", next.name, got)
	}
	if !r.StorageVersionAPI || !slices.ContainsFunc(r.StorageVersions, func(d consistency.StorageVersionDisagreement) bool {
		return d.Resource == schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"} &&
			d.Encodings[old.name] == "admissionregistration.k8s.io/v1beta1" && d.Encodings[next.name] == "admissionregistration.k8s.io/v1"
	}) {
		t.Errorf("storage versions: API %v, %+v; want mutatingadmissionpolicies in v1beta1 on %s and v1 on %s", r.StorageVersionAPI, r.StorageVersions, old.name, next.name)
	}

	// examples/consistency says the same, and exits 1.
	bin := filepath.Join(t.TempDir(), "consistency")
	if out, err := buildExample(bin, "consistency"); err != nil {
		t.Fatalf("building examples/consistency: %v\n%s", err, out)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: ha, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: ha, context: {cluster: ha, user: admin}}]
current-context: ha
`, p.lb.url(), base64.StdEncoding.EncodeToString(p.caPEM), token), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--api-server", strings.TrimPrefix(old.url, "https://"), "--api-server", strings.TrimPrefix(next.url, "https://"))
	out, err := cmd.Output()
	t.Logf("examples/consistency:\n%s", out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("examples/consistency on the pair: %v, want exit status 1", err)
	}
	for _, gvr := range onlyNext {
		if line := fmt.Sprintf("%s %s: served by %s; not by %s\n", gvr.GroupVersion(), gvr.Resource, next.name, old.name); !strings.Contains(string(out), line) {
			t.Errorf("examples/consistency does not say %q", line)
		}
	}

	// Through the balancer only: each sample a new connection.
	before := p.lb.connections()
	through, err := consistency.Check(ctx, c, consistency.WithURLOnly())
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, through)
	if through.Certainty != consistency.EveryServerSampled || through.Samples > 4 || through.Verdict() != consistency.Inconsistent {
		t.Errorf("through the balancer: %v after %d samples, verdict %v; want both servers told apart within 4", through.Certainty, through.Samples, through.Verdict())
	}
	after := p.lb.connections()
	t.Logf("balancer connections per server: before %v, after %v; %d samples", before, after, through.Samples)
	if g, _ := resourceDifferences(through); !slices.Equal(g, sortedGVRs(onlyNext)) {
		t.Errorf("through the balancer, resources that differ: %v", g)
	}

	// One server gone: its lease is still current, it cannot be asked,
	// and every sample through the balancer reaches the other: the report
	// says every server that answers was seen, and names the one that did
	// not answer (its lease alone cannot hold the verdict). Discovery no
	// longer differs; the StorageVersion API still records the gone
	// server's encodings, so the servers are still not consistent.
	next.stop()
	p.lb.takeOut(1)
	gone, err := consistency.Check(ctx, c, consistency.WithSamples(4), vouched)
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, gone)
	if gone.Certainty != consistency.EveryAnsweringServerSeen || len(gone.Differences) != 0 || len(gone.StorageVersions) == 0 || gone.Verdict() != consistency.Inconsistent {
		t.Errorf("with %s down: certainty %v, differences %v, storage versions %v; want every answering server seen, no difference in discovery, the storage versions as before",
			next.name, gone.Certainty, gone.Differences, gone.StorageVersions)
	}
	for _, s := range gone.Servers {
		if (s.Hostname == next.name) != (s.View == nil && s.Err != nil) {
			t.Errorf("with %s down: %s seen %v, error %v", next.name, s.Name(), s.View != nil, s.Err)
		}
	}

	// A kubeconfig without a CA, TLS verification off, and a token: nobody
	// is asked at an address the cluster names, and the report says why.
	insecure := rest.CopyConfig(p.config)
	insecure.CAData, insecure.Insecure = nil, true
	ic, err := discovery.New(insecure)
	if err != nil {
		t.Fatal(err)
	}
	unverified, err := consistency.Check(ctx, ic, consistency.WithSamples(4))
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, unverified)
	if !errors.Is(unverified.NotAskedDirectly, consistency.ErrNotAskedDirectly) || slices.ContainsFunc(unverified.Servers, func(s consistency.Server) bool { return s.Address != "" }) {
		t.Errorf("TLS verification off: not asked directly %v, servers %+v; want none asked at its address", unverified.NotAskedDirectly, unverified.Servers)
	}
}

// TestConsistencyOfOneServerAlone: on a real v1.36.3 + v1.37.1 pair with
// the peer proxy and no StorageVersion API, a check pointed at the
// v1.36.3 server's own address, with nobody vouching for either server's
// (loopback, which the EndpointSlices cannot list), sees that server
// alone; its merged view against its own shows the four resources its
// peer serves, so the verdict is Inconsistent, and examples/consistency
// exits 1 naming them (on 7ae8804: consistent, "not every server seen",
// and exit 2). Vouched for, both servers are asked and both views named,
// as before.
func TestConsistencyOfOneServerAlone(t *testing.T) {
	p := startHA(t, haOptions{peerProxy: true})
	ctx := context.Background()
	old, next := p.servers[0], p.servers[1]
	alone, err := discovery.New(p.configFor(old.url))
	if err != nil {
		t.Fatal(err)
	}
	vouched := consistency.WithAPIServers(strings.TrimPrefix(old.url, "https://"), strings.TrimPrefix(next.url, "https://"))
	var r *consistency.Report
	eventually(t, "both servers' leases and peer-aggregated discovery", 60*time.Second, func() (bool, string) {
		r, err = consistency.Check(ctx, alone, vouched)
		if err != nil {
			return false, err.Error()
		}
		reached := 0
		for _, s := range r.Servers {
			if s.View != nil && len(s.FromPeers) > 0 || s.Version == next.version {
				reached++
			}
		}
		return reached == 2, fmt.Sprintf("%d servers, %s", len(r.Servers), r.Certainty)
	})
	logReport(t, r)
	if gvrs, _ := resourceDifferences(r); r.Verdict() != consistency.Inconsistent || r.Certainty != consistency.EveryServerAsked || !slices.Equal(gvrs, sortedGVRs(onlyNext)) || r.StorageVersionAPI {
		t.Errorf("vouched: verdict %v, %v, differences %v, StorageVersion API %v; want both asked, the four resources named, no StorageVersion API", r.Verdict(), r.Certainty, gvrs, r.StorageVersionAPI)
	}

	// Pointed at the v1.36.3 server alone, nobody vouching for an address:
	// no server is asked with the client's credentials at the address its
	// lease names (each may be asked without any, which a real server
	// refuses), the samples through the URL all reach v1.36.3, and its
	// merged view names what its peer serves.
	one, err := consistency.Check(ctx, alone, consistency.WithSamples(4))
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, one)
	if one.Verdict() != consistency.Inconsistent || one.Consistent() {
		t.Errorf("pointed at %s alone: verdict %v (%v), want inconsistent: its merged view shows its peer serving more", old.name, one.Verdict(), one.Certainty)
	}
	var seen []consistency.Server
	for _, s := range one.Servers {
		if s.Vouched {
			t.Errorf("pointed at %s alone, nobody vouching: %s asked with the client's credentials at %s", old.name, s.Name(), s.Address)
		}
		if s.View != nil {
			seen = append(seen, s)
		}
	}
	if len(seen) != 1 || seen[0].Version != old.version || !slices.Equal(sortedGVRs(seen[0].FromPeers), sortedGVRs(onlyNext)) {
		for _, s := range seen {
			t.Errorf("pointed at %s alone: seen %s %s, from its peers %v", old.name, s.Name(), s.Version, s.FromPeers)
		}
		t.Errorf("pointed at %s alone: %d servers seen, want %s alone, getting %v from its peer", old.name, len(seen), old.version, onlyNext)
	}
	if len(one.Differences) != 0 || len(one.StorageVersions) != 0 {
		t.Errorf("pointed at %s alone: differences %v, storage versions %v; want none: one view seen, no StorageVersion API", old.name, one.Differences, one.StorageVersions)
	}
	// examples/consistency says so, and exits 1.
	bin := filepath.Join(t.TempDir(), "consistency")
	if out, err := buildExample(bin, "consistency"); err != nil {
		t.Fatalf("building examples/consistency: %v\n%s", err, out)
	}
	oneKubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(oneKubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: one, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: one, context: {cluster: one, user: admin}}]
current-context: one
`, old.url, base64.StdEncoding.EncodeToString(p.caPEM), token), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--kubeconfig", oneKubeconfig, "--samples", "4").Output()
	t.Logf("examples/consistency pointed at %s:\n%s", old.name, out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("examples/consistency pointed at %s alone: %v, want exit status 1", old.name, err)
	}
	for _, gvr := range onlyNext {
		if line := fmt.Sprintf("%s %s: served by a peer of ", gvr.GroupVersion(), gvr.Resource); !strings.Contains(string(out), line) {
			t.Errorf("examples/consistency pointed at %s alone does not say %q", old.name, line)
		}
	}
}

func logReport(t *testing.T, r *consistency.Report) {
	t.Helper()
	t.Logf("%v, %v, %d samples, merged %.12s", r.Verdict(), r.Certainty, r.Samples, r.MergedETag)
	for _, s := range r.Servers {
		t.Logf("  %s: identity %s alive %v address %q version %s etag %.12s samples %d from peers %d err %v", s.Name(), s.Identity, s.Alive, s.Address, s.Version, s.ETag, s.Samples, len(s.FromPeers), s.Err)
	}
	for _, d := range r.Differences {
		t.Logf("  differs: %s %s served by %v, not by %v", d.GroupVersion, d.Resource, d.ServedBy, d.MissingFrom)
	}
	for _, d := range r.StorageVersions {
		t.Logf("  storage version: %s %v", d.Resource, d.Encodings)
	}
}

// churn makes every request of a client open a new connection, as a
// balancer that moves clients between servers does (or a server's
// --goaway-chance), so that a round-robin balancer alternates servers.
type churn struct{ next http.RoundTripper }

func (c churn) RoundTrip(r *http.Request) (*http.Response, error) {
	utilnet.CloseIdleConnectionsFor(c.next)
	return c.next.RoundTrip(r)
}

// TestNoFlappingOnRealPair: without the peer proxy, the two servers
// disagree, and a client whose requests alternate between them through
// the balancer sees one mixed snapshot (the four resources partial), not
// a change every other refresh: 100 refreshes, at most one change event.
// A CRD then created is told once.
func TestNoFlappingOnRealPair(t *testing.T) {
	p := startHA(t, haOptions{})
	ctx := context.Background()
	cfg := rest.CopyConfig(p.config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return churn{rt} }
	c, err := discovery.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var changes []discovery.Change
	defer c.Subscribe(func(ch discovery.Change) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, ch)
	})()
	events := func() int { mu.Lock(); defer mu.Unlock(); return len(changes) }
	refresh := func(n int) {
		t.Helper()
		for range n {
			if _, err := c.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	refresh(100)
	s := c.Current()
	_, partial := s.Partial()
	t.Logf("after 100 refreshes: %d change events, mixed %v, partial %v, connections %v, stats %+v", events(), s.Mixed(), partial, p.lb.connections(), c.Stats())
	if n := events(); n > 1 {
		t.Errorf("100 refreshes through alternating servers: %d change events, want at most 1", n)
	}
	if !s.Mixed() || !slices.Equal(sortedGVRs(partial), sortedGVRs(onlyNext)) {
		t.Errorf("mixed %v, partial %v: want the four resources only v1.37.1 serves", s.Mixed(), partial)
	}
	// The REST mapper over the client answers from the union: a kind only
	// one server serves maps, on every refresh, from one index.
	m, err := restmapper.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctb := schema.GroupKind{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}
	gen := c.Current().Generation()
	for range 20 {
		refresh(1)
		if _, err := m.RESTMapping(ctb, "v1"); err != nil {
			t.Fatalf("a kind one server serves: %v", err)
		}
	}
	if got := c.Current().Generation(); got != gen {
		t.Errorf("the snapshot's generation moved from %d to %d over 20 refreshes of disagreeing servers", gen, got)
	}

	before := events()
	dyn, err := dynamic.NewForConfig(p.config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd("Namespaced", "v1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: group, Version: "v1"}
	eventually(t, "both servers serve the CRD", 30*time.Second, func() (bool, string) {
		refresh(1)
		_, partial := c.Current().Partial()
		_, ok := c.Current().Version(gv)
		return ok && !slices.ContainsFunc(partial, func(r schema.GroupVersionResource) bool { return r.GroupVersion() == gv }), fmt.Sprintf("served %v, partial %v", ok, partial)
	})
	refresh(50)
	if n := events() - before; n != 1 {
		mu.Lock()
		for _, ch := range changes[before:] {
			t.Logf("change: +%v -%v ~%v +%v -%v ~%v", ch.AddedVersions, ch.RemovedVersions, ch.ChangedVersions, ch.AddedResources, ch.RemovedResources, ch.ChangedResources)
		}
		mu.Unlock()
		t.Errorf("a CRD created: %d change events, want 1", n)
	}
}
