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
// be sure it saw them all: the verdict is Unknown, not Consistent.
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
		if err != nil || got.Verdict() != consistency.Unknown || got.Samples != 8 || got.Certainty != consistency.NotEveryServerSeen {
			t.Fatalf("peer=%v, agreeing servers: %+v %v", peer, got, err)
		}
		if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: "upgraded.example.com", Versions: []string{"v1"}, Kind: "New"}); err != nil {
			t.Fatal(err)
		}
		got, err = consistency.Check(ctx, c, consistency.WithSamples(16))
		if err != nil || got.Verdict() != consistency.Inconsistent || got.Certainty != consistency.EveryServerSampled {
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
// is reported so, but its peer's merged view still serves what it serves
// (a peer proxy forgets a peer when its lease is deleted, not when it
// expires), so the verdict is still Inconsistent; once its lease is
// deleted, the one server the cluster names was asked, and the verdict is
// Consistent. Through the URL only, both are told apart by sampling.
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
	if r.Verdict() != consistency.Inconsistent || r.Certainty != consistency.EveryServerAsked || r.Samples != 0 || len(r.Servers) != 2 {
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
	if through.Certainty != consistency.EveryServerSampled || through.Verdict() != consistency.Inconsistent || through.Samples > 32 {
		t.Errorf("through the URL: %v after %d samples", through.Certainty, through.Samples)
	}

	// A server whose lease expired is not asked.
	next.SetLeaseRenewTime(time.Now().Add(-2 * time.Hour))
	r, err = consistency.Check(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Servers[1].Alive || r.Servers[1].View != nil || r.Servers[1].Err == nil || r.Certainty != consistency.EveryServerAsked {
		t.Errorf("an expired lease: %+v, certainty %v", r.Servers[1], r.Certainty)
	}
	if got := r.Servers[0].FromPeers; r.Verdict() != consistency.Inconsistent || len(got) != 1 || got[0].GroupVersion() != upgraded {
		t.Errorf("an expired lease: verdict %v, %s from its peer %v; want inconsistent, the upgraded group's resource from the peer", r.Verdict(), old.ID(), got)
	}
	next.RemoveLease()
	r, err = consistency.Check(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Servers) != 1 || r.Certainty != consistency.EveryServerAsked || r.Verdict() != consistency.Consistent || !r.Consistent() {
		t.Errorf("the lease deleted: %d servers, %v, verdict %v; want the one server asked, consistent", len(r.Servers), r.Certainty, r.Verdict())
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

// TestVerdictPointedAtOneServer: a check pointed at one API server's own
// address that can ask no other (its client carries a token over plain
// http, so nobody is asked at an address a lease names; or through its
// URL only; or without a rest.Config) sees that server alone. With
// peer-aggregated discovery, the server's merged view against its own
// shows what a peer serves and it does not: the verdict is Inconsistent
// (on 7ae8804 it was consistent, "not every server seen"), named in its
// FromPeers, with every request sent to that server alone. Where its
// merged view is its own, the check cannot tell (Unknown), whether the
// peer serves the same or less: never Consistent. So too without peer
// aggregation, where nothing shows the peer.
func TestVerdictPointedAtOneServer(t *testing.T) {
	upgraded := schema.GroupVersionResource{Group: "upgraded.example.com", Version: "v1", Resource: "news"}
	type pair struct {
		name                string
		peer                bool
		oldExtra, nextExtra bool // a CRD only that server serves
		want                consistency.Verdict
		wantFromPeers       []schema.GroupVersionResource
	}
	pairs := []pair{
		{name: "the peer serves more", peer: true, nextExtra: true, want: consistency.Inconsistent, wantFromPeers: []schema.GroupVersionResource{upgraded}},
		{name: "alike", peer: true, want: consistency.Unknown},
		{name: "the peer serves less", peer: true, oldExtra: true, want: consistency.Unknown},
		{name: "no peer aggregation", nextExtra: true, want: consistency.Unknown},
	}
	clients := []struct {
		name string
		new  func(t *testing.T, url string) (*discovery.Client, []consistency.Option)
	}{
		{"a token over plain http", func(t *testing.T, url string) (*discovery.Client, []consistency.Option) {
			c, err := discovery.New(&rest.Config{Host: url, BearerToken: "secret"})
			if err != nil {
				t.Fatal(err)
			}
			return c, nil
		}},
		{"through the URL only", func(t *testing.T, url string) (*discovery.Client, []consistency.Option) {
			c, err := discovery.New(&rest.Config{Host: url, BearerToken: "secret"})
			if err != nil {
				t.Fatal(err)
			}
			return c, []consistency.Option{consistency.WithURLOnly()}
		}},
		{"no rest.Config", func(t *testing.T, url string) (*discovery.Client, []consistency.Option) {
			c, err := discovery.NewForHTTPClient(&http.Client{Transport: &bearer{"secret", http.DefaultTransport.(*http.Transport).Clone()}}, url)
			if err != nil {
				t.Fatal(err)
			}
			return c, nil
		}},
	}
	for _, p := range pairs {
		opts := []discoverytest.Option{discoverytest.WithBackends(2, discoverytest.Sticky),
			discoverytest.WithBackendVersions("v1.36.3", "v1.37.1"), discoverytest.WithBearerToken("secret")}
		if p.peer {
			opts = append(opts, discoverytest.WithPeerAggregation())
		}
		srv, _ := discoverytest.Start(t, opts...)
		old, next := srv.Backends()[0], srv.Backends()[1]
		if p.oldExtra {
			if err := old.AddCRD(discoverytest.CRD{Group: "old.example.com", Versions: []string{"v1"}, Kind: "Old"}); err != nil {
				t.Fatal(err)
			}
		}
		if p.nextExtra {
			if err := next.AddCRD(discoverytest.CRD{Group: upgraded.Group, Versions: []string{"v1"}, Kind: "New"}); err != nil {
				t.Fatal(err)
			}
		}
		for _, cl := range clients {
			t.Run(p.name+"/"+cl.name, func(t *testing.T) {
				srv.ResetRequests()
				c, copts := cl.new(t, old.URL())
				r, err := consistency.Check(context.Background(), c, append(copts, consistency.WithSamples(4))...)
				if err != nil {
					t.Fatal(err)
				}
				if got := r.Verdict(); got != p.want || r.Consistent() != (p.want == consistency.Consistent) {
					t.Errorf("verdict %v (consistent %v, %v), want %v", got, r.Consistent(), r.Certainty, p.want)
				}
				var seen []consistency.Server
				for _, s := range r.Servers {
					if s.View != nil {
						seen = append(seen, s)
					}
				}
				if len(seen) != 1 || seen[0].Version != "v1.36.3" || !slices.Equal(seen[0].FromPeers, p.wantFromPeers) {
					t.Errorf("servers seen %+v, want v1.36.3 alone, getting %v from its peer", seen, p.wantFromPeers)
				}
				if r.Certainty == consistency.EveryServerAsked || r.Certainty == consistency.EveryServerSampled {
					t.Errorf("certainty %v with one server of two seen", r.Certainty)
				}
				for _, req := range srv.Requests() {
					if req.Backend != old.ID() {
						t.Errorf("%s %s reached %s, want every request at %s", req.Method, req.Path, req.Backend, old.ID())
					}
				}
			})
		}
	}
}

// bearer sends a token with every request, through a transport of its
// own (whose idle connections the check closes to sample on new ones).
type bearer struct {
	token string
	next  *http.Transport
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func (b *bearer) WrappedRoundTripper() http.RoundTripper { return b.next }
