package discovery_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// newClient is discovery's newClient (discovery/snapshot_test.go), for
// the tests that stay here.
func newClient(t testing.TB, base string, opts ...discovery.Option) *discovery.Client {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// flatten renders a snapshot as sorted lines, one per resource and
// subresource, for comparing snapshots read in different ways (a copy of
// discovery/snapshot_test.go's, with boolStr's).
func flatten(s *discovery.Snapshot) []string {
	var out []string
	for _, g := range s.Groups() {
		for vi, v := range g.Versions {
			for _, r := range v.Resources {
				out = append(out, strings.Join([]string{g.Name, v.Version, r.Name, r.SingularName, r.Kind.String(),
					boolStr(r.Namespaced), strings.Join(r.Verbs, ","), strings.Join(r.ShortNames, ","),
					strings.Join(r.Categories, ","), boolStr(vi == 0)}, " "))
				for _, sub := range r.Subresources {
					out = append(out, strings.Join([]string{g.Name, v.Version, r.Name + "/" + sub.Name, sub.Kind.String(), strings.Join(sub.Verbs, ",")}, " "))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func groupOrder(s *discovery.Snapshot) []string {
	var out []string
	for _, g := range s.Groups() {
		for _, v := range g.Versions {
			out = append(out, g.Name+"/"+v.Version)
		}
	}
	return out
}

// TestSnapshotEveryGeneration: whatever the server speaks, the snapshot is
// the same, read in as few requests as the format allows.
func TestSnapshotEveryGeneration(t *testing.T) {
	_, refBase := discoverytest.Start(t, discoverytest.WithCRDs(40, 5))
	ref, err := newClient(t, refBase).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gvs := len(groupOrder(ref))
	for _, tc := range []struct {
		gen      discoverytest.Generation
		opts     []discovery.Option
		source   string
		requests int
	}{
		{discoverytest.GenerationV2, nil, "aggregated/v2+protobuf", 2},
		{discoverytest.GenerationV2, []discovery.Option{discovery.WithJSONOnly()}, "aggregated/v2+json", 2},
		{discoverytest.GenerationV2AndV2Beta1, nil, "aggregated/v2+protobuf", 2},
		{discoverytest.GenerationV2Beta1, nil, "aggregated/v2beta1+json", 2},
		{discoverytest.GenerationLegacy, nil, "legacy+json", 2 + gvs},
		{discoverytest.GenerationV2, []discovery.Option{discovery.WithLegacyOnly()}, "legacy+json", 2 + gvs},
	} {
		t.Run(tc.gen.String()+"/"+tc.source, func(t *testing.T) {
			srv, base := discoverytest.Start(t, discoverytest.WithGeneration(tc.gen), discoverytest.WithCRDs(40, 5))
			c := newClient(t, base, tc.opts...)
			s, err := c.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, named := s.Sources(); named.String() != tc.source {
				t.Errorf("source %s, want %s", named, tc.source)
			}
			if got := srv.Stats().Requests; got != tc.requests {
				t.Errorf("%d requests, want %d", got, tc.requests)
			}
			if !slices.Equal(groupOrder(s), groupOrder(ref)) {
				t.Errorf("group-version order differs:\n got %v\nwant %v", groupOrder(s), groupOrder(ref))
			}
			if got, want := flatten(s), flatten(ref); !slices.Equal(got, want) {
				t.Errorf("resources differ from aggregated v2: %d lines vs %d", len(got), len(want))
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						t.Errorf("first difference:\n got %s\nwant %s", got[i], want[i])
						break
					}
				}
			}
			if s.Err() != nil {
				t.Errorf("err=%v", s.Err())
			}
		})
	}
}

// TestLegacyPartialFailure: on a legacy server a failing group-version is
// kept, marked Failed, with its error mapped to an apimachinery status.
func TestLegacyPartialFailure(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithGeneration(discoverytest.GenerationLegacy), discoverytest.WithCRDs(10, 2))
	srv.InjectFault("/apis/g001.stress.example.com/v1", discoverytest.Fault{Status: http.StatusServiceUnavailable})
	s, err := newClient(t, base).Snapshot(context.Background())
	gv := schema.GroupVersion{Group: "g001.stress.example.com", Version: "v1"}
	var pe *discovery.PartialError
	if !errors.As(err, &pe) || len(pe.Errors) != 1 || pe.Errors[0].GroupVersion != gv || !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("error %v: want a PartialError with one 503 for %s", err, gv)
	}
	v, ok := s.Version(gv)
	if !ok || v.Freshness != surface.FreshnessFailed {
		t.Errorf("failed group-version %+v", v)
	}
	if v, ok := s.Version(schema.GroupVersion{Group: "g001.stress.example.com", Version: "v1beta1"}); !ok || len(v.Resources) == 0 {
		t.Errorf("a sibling version is missing its resources")
	}
}

// TestLegacyParallelismBound: legacy discovery uses at most the configured
// number of concurrent requests, not one goroutine per group-version.
func TestLegacyParallelismBound(t *testing.T) {
	srv, err := discoverytest.NewServer(discoverytest.WithGeneration(discoverytest.GenerationLegacy), discoverytest.WithCRDs(30, 10))
	if err != nil {
		t.Fatal(err)
	}
	srv.InjectFault("/apis/*", discoverytest.Fault{Latency: 20 * time.Millisecond})
	var inflight, peak atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	if _, err := newClient(t, ts.URL, discovery.WithConcurrency(3)).Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	// /api's own fetch runs beside /apis's workers.
	if p := peak.Load(); p > 3+2 || p < 2 {
		t.Errorf("peak concurrency %d, want between 2 and 5", p)
	}
}

func TestNoPeer(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin), discoverytest.WithPeerAggregation())
	if err := srv.Backends()[1].AddCRD(discoverytest.CRD{Group: "peer.example.com", Versions: []string{"v1"}, Kind: "Peer"}); err != nil {
		t.Fatal(err)
	}
	merged, _ := newClient(t, base).Snapshot(context.Background())
	if _, ok := merged.Group("peer.example.com"); !ok {
		t.Errorf("merged view lacks the peer's group")
	}
	srv.ResetRequests()
	// Round-robin: this client's /apis goes to whichever backend is next.
	local, _ := newClient(t, base, discovery.WithNoPeer()).Snapshot(context.Background())
	var apisBackend string
	for _, r := range srv.Requests() {
		if r.Path == "/apis" {
			apisBackend = r.Backend
			if !strings.Contains(r.Accept, "profile=nopeer") {
				t.Errorf("Accept %q lacks profile=nopeer", r.Accept)
			}
		}
	}
	_, has := local.Group("peer.example.com")
	if has != (apisBackend == "apiserver-1") {
		t.Errorf("nopeer view from %s: has the peer group=%v", apisBackend, has)
	}
}

// TestBadResponsesLegacy is TestBadResponses (in discovery, on
// internal/docserver) for the case that needs a legacy server: a legacy
// body under an aggregated Content-Type. The loop is TestBadResponses's.
func TestBadResponsesLegacy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gen   discoverytest.Generation
		fault discoverytest.Fault
		opts  []discovery.Option
		check func(error) bool
	}{
		{"legacy body under an aggregated type", discoverytest.GenerationLegacy,
			discoverytest.Fault{ContentType: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}, nil,
			func(err error) bool { var re *discovery.ResponseError; return errors.As(err, &re) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, base := discoverytest.Start(t, discoverytest.WithGeneration(tc.gen))
			c := newClient(t, base, tc.opts...)
			good, err := c.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// Change the cluster so the refresh gets a 200 (a 304 has no
			// body to damage), then damage it.
			if err := srv.AddCRD(discoverytest.CRD{Group: "x.example.com", Versions: []string{"v1"}, Kind: "X"}); err != nil {
				t.Fatal(err)
			}
			srv.InjectFault("/apis", tc.fault)
			s, err := c.Refresh(context.Background())
			if !tc.check(err) {
				t.Errorf("error %v (%T) is not the expected kind", err, err)
			}
			if s == nil || s.Generation() != good.Generation() || c.Current() != s || s.Validated() != good.Validated() {
				t.Errorf("a failed refresh must keep the previous snapshot's content")
			} else if s.RefreshError() != err || good.RefreshError() != nil {
				t.Errorf("the snapshot served after a failed refresh does not say why: %v", s.RefreshError())
			}
			fresh := newClient(t, base, tc.opts...)
			if s, err := fresh.Snapshot(context.Background()); s != nil || err == nil {
				t.Errorf("a first read that fails returned a snapshot %v / %v", s, err)
			}
		})
	}
}
