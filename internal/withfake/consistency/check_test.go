package consistency_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// newClient is a client built without a rest.Config: the check cannot
// ask its cluster's servers at their own addresses with it.
func newClient(t testing.TB, base string) *discovery.Client {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCheckBySampling: a client built without a rest.Config
// cannot ask the servers its cluster's leases name at their own addresses:
// behind a balancer that gives each connection to one server, the check
// samples through the URL on new connections, tells the disagreeing
// servers apart (one is upgraded and serves a new group) and names what
// differs; servers that agree cannot be told apart, and it says it cannot
// be sure it saw them all.
func TestCheckBySampling(t *testing.T) {
	for _, peer := range []bool{false, true} {
		opts := []discoverytest.Option{discoverytest.WithBackends(2, discoverytest.Sticky)}
		if peer {
			opts = append(opts, discoverytest.WithPeerAggregation())
		}
		srv, base := discoverytest.Start(t, opts...)
		c := newClient(t, base)
		ctx := context.Background()
		got, err := consistency.Check(ctx, c, consistency.WithSamples(8))
		if err != nil || !got.Consistent() || got.Samples != 8 || got.Certainty != consistency.NotEveryServerSeen {
			t.Fatalf("peer=%v, agreeing servers: %+v %v", peer, got, err)
		}
		if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "New"}); err != nil {
			t.Fatal(err)
		}
		got, err = consistency.Check(ctx, c, consistency.WithSamples(16))
		if err != nil || got.Consistent() || got.Certainty != consistency.EveryServerSampled {
			t.Fatalf("peer=%v, disagreeing servers: %+v %v", peer, got, err)
		}
		sampled := 0
		for _, s := range got.Servers {
			if s.View != nil && s.Samples > 0 && s.Identity == "" {
				sampled++
			}
		}
		if sampled != 2 {
			t.Errorf("peer=%v: %d servers told apart through the URL, want 2", peer, sampled)
		}
		gv := schema.GroupVersion{Group: "upgraded.example.com", Version: "v1"}
		if !slices.ContainsFunc(got.Differences, func(d consistency.Difference) bool { return d.GroupVersion == gv && d.Resource == "" }) {
			t.Errorf("peer=%v: the views differ by %+v, want %s", peer, got.Differences, gv)
		}
	}
	_, legacy := discoverytest.Start(t, discoverytest.WithGeneration(discoverytest.GenerationLegacy))
	if _, err := consistency.Check(context.Background(), newClient(t, legacy), consistency.WithSamples(2)); err == nil {
		t.Errorf("a legacy server passed a consistency check it cannot take")
	}
	if _, err := consistency.Check(context.Background(), newClient(t, "http://127.0.0.1:1"), consistency.WithSamples(0)); err == nil {
		t.Errorf("zero samples accepted")
	}
}

// TestCheckFromLeases: a cluster whose identity leases name
// its servers and their addresses (discoverytest's HA mode, as a real
// cluster's) has each asked directly: versions, own views, what each gets
// from its peers, and what differs, with every server asked and no
// sample through the URL. A server whose lease expired is not asked, and
// is reported so; through the URL only, both are told apart by sampling.
func TestCheckFromLeases(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky),
		discoverytest.WithPeerAggregation(), discoverytest.WithBackendVersions("v1.36.3", "v1.37.1"))
	upgraded := schema.GroupVersion{Group: "upgraded.example.com", Version: "v1"}
	old, next := srv.Backends()[0], srv.Backends()[1]
	if err := next.AddCRD(discoverytest.CRD{Group: upgraded.Group, Versions: []string{"v1"}, Kind: "New"}); err != nil {
		t.Fatal(err)
	}
	c, err := discovery.New(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := consistency.Check(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Consistent() || r.Certainty != consistency.EveryServerAsked || r.Samples != 0 || len(r.Servers) != 2 {
		t.Fatalf("%+v", r)
	}
	for i, b := range []*discoverytest.Backend{old, next} {
		s := r.Servers[i]
		if s.Identity != b.LeaseName() || s.Hostname != b.ID() || !strings.HasSuffix(b.URL(), "//"+s.Address) || s.View == nil || !s.Alive {
			t.Errorf("server %d: %+v, want backend %s at %s", i, s, b.LeaseName(), b.URL())
		}
	}
	if r.Servers[0].Version != "v1.36.3" || r.Servers[1].Version != "v1.37.1" {
		t.Errorf("versions %s %s", r.Servers[0].Version, r.Servers[1].Version)
	}
	if got := r.Servers[0].FromPeers; len(got) != 1 || got[0].GroupVersion() != upgraded {
		t.Errorf("%s from its peer: %v, want the upgraded group's resource", old.ID(), got)
	}
	want := consistency.Difference{GroupVersion: upgraded, ServedBy: []string{next.ID()}, MissingFrom: []string{old.ID()}}
	if len(r.Differences) != 2 || !reflect.DeepEqual(r.Differences[0], want) || r.Differences[1].Resource == "" {
		t.Errorf("differences %+v, want %+v and its resource", r.Differences, want)
	}

	// Through the URL only: told apart by version and view.
	through, err := consistency.Check(ctx, c, consistency.WithURLOnly(), consistency.WithSamples(32))
	if err != nil {
		t.Fatal(err)
	}
	if through.Certainty != consistency.EveryServerSampled || through.Consistent() || through.Samples > 32 {
		t.Errorf("through the URL: %v after %d samples", through.Certainty, through.Samples)
	}

	// A server whose lease expired is not asked.
	next.SetLeaseRenewTime(time.Now().Add(-2 * time.Hour))
	r, err = consistency.Check(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Servers[1].Alive || r.Servers[1].View != nil || r.Servers[1].Err == nil || r.Certainty != consistency.EveryServerAsked || !r.Consistent() {
		t.Errorf("an expired lease: %+v, certainty %v", r.Servers[1], r.Certainty)
	}
}

// TestCheckEndpointSliceAddress: a lease without a
// peer-advertise-address (an older server) gets the one address of the
// kubernetes EndpointSlice that no other lease names, and its server is
// asked there.
func TestCheckEndpointSliceAddress(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky), discoverytest.WithBackendVersions("v1.36.3", "v1.37.1"))
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	hidden := srv.Backends()[1]
	hiddenAddr := strings.TrimPrefix(hidden.URL(), "http://")
	host, port, _ := net.SplitHostPort(hiddenAddr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if !strings.HasSuffix(resp.Request.URL.Path, "/leases") {
			return nil
		}
		// The second lease loses its address, as an older server's has none.
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body.Close()
		body = bytes.ReplaceAll(body, []byte(`"kubernetes.io/peer-advertise-address":"`+hiddenAddr+`"`), []byte(`"other":""`))
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","items":[{"metadata":{"name":"kubernetes"},"addressType":"IPv4","endpoints":[{"addresses":[%q]}],"ports":[{"name":"https","port":%s,"protocol":"TCP"}]}]}`, host, port)
	})
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)

	c, err := discovery.New(&rest.Config{Host: front.URL})
	if err != nil {
		t.Fatal(err)
	}
	r, err := consistency.Check(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Certainty != consistency.EveryServerAsked || len(r.Servers) != 2 || r.Servers[1].Address != hiddenAddr || r.Servers[1].Version != "v1.37.1" {
		t.Errorf("certainty %v, servers %+v: want the second asked at %s, the EndpointSlice's address", r.Certainty, r.Servers, hiddenAddr)
	}
}

// TestCheckJudgesLeasesByItsClock: a lease is alive by the check's clock
// (WithClock), not the machine's: two hours on, every lease has expired,
// no server is asked, each says why, and the check cannot be sure of
// anything. The servers' views are timed by that clock too.
func TestCheckJudgesLeasesByItsClock(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky))
	c, err := discovery.New(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := clocktesting.NewFakePassiveClock(time.Now())
	r, err := consistency.Check(ctx, c, consistency.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Servers {
		if !s.Alive || s.View == nil || !s.View.Fetched().Equal(now.Now()) {
			t.Errorf("now: %+v, want alive and asked, its view fetched at %v", s, now.Now())
		}
	}
	now.SetTime(now.Now().Add(2 * time.Hour))
	r, err = consistency.Check(ctx, c, consistency.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Servers) != 2 || r.Certainty != consistency.NotEveryServerSeen || r.Samples != 0 {
		t.Fatalf("two hours on: %d servers, %v, %d samples", len(r.Servers), r.Certainty, r.Samples)
	}
	for _, s := range r.Servers {
		if s.Alive || s.View != nil || s.Err == nil {
			t.Errorf("two hours on: %+v, want an expired lease, not asked", s)
		}
	}
	if _, err := consistency.Check(ctx, c, consistency.WithClock(nil)); err == nil {
		t.Errorf("a nil clock accepted")
	}
}

// TestCheckIsNotTheClients: the check reads none of the client's
// snapshots, and its requests to the servers' own addresses are its own:
// the client counts only those through its URL (the leases, the
// kubernetes EndpointSlice, the merged /apis, the StorageVersion API).
func TestCheckIsNotTheClients(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky))
	c, err := discovery.New(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	r, err := consistency.Check(context.Background(), c)
	if err != nil || r.Certainty != consistency.EveryServerAsked {
		t.Fatalf("%+v %v", r, err)
	}
	if c.Current() != nil {
		t.Errorf("the check left the client a snapshot")
	}
	// Each server answered /version, its own /apis and /api, and its
	// merged /apis at its own address.
	if got, served := c.Stats().Requests, len(srv.Requests()); got != 4 || served != 4+2*4 {
		t.Errorf("the client counted %d requests of the %d served, want 4 of 12", got, served)
	}
}

// TestCheckReadsByDefaults: the check reads and retries by discovery's
// defaults, not the client's options: a client that retries nothing and
// reads at most 1 KiB still gets a full report through a 429 with
// Retry-After.
func TestCheckReadsByDefaults(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.Sticky))
	c, err := discovery.New(&rest.Config{Host: base}, discovery.WithMaxRetries(0), discovery.WithMaxResponseBytes(1<<10))
	if err != nil {
		t.Fatal(err)
	}
	srv.InjectFault("/apis", discoverytest.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Times: 1})
	r, err := consistency.Check(context.Background(), c)
	if err != nil || r.Certainty != consistency.EveryServerAsked || !r.Consistent() || r.MergedETag == "" {
		t.Fatalf("%+v %v", r, err)
	}
}
