package discovery_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

func newClient(t testing.TB, base string, opts ...discovery.Option) *discovery.Client {
	t.Helper()
	c, err := discovery.NewForHTTPClient(nil, base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// flatten renders a snapshot as sorted lines, one per resource and
// subresource, for comparing snapshots read in different ways.
// internal/withfake/discovery (the tests that need the fake server) keeps
// a copy, with boolStr's.
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

func TestSnapshotContent(t *testing.T) {
	_, base := docserver.Start(t, docserver.WithCRDs(8, 2))
	s, err := newClient(t, base).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	apps, ok := s.Group("apps")
	if !ok || apps.PreferredVersion().Version != "v1" {
		t.Fatalf("apps group %+v", apps)
	}
	v, ok := s.Version(schema.GroupVersion{Group: "apps", Version: "v1"})
	if !ok {
		t.Fatal("apps/v1 missing")
	}
	i := slices.IndexFunc(v.Resources, func(r surface.Resource) bool { return r.Name == "deployments" })
	d := v.Resources[i]
	if d.Kind != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) || !d.Namespaced ||
		!slices.Equal(d.ShortNames, []string{"deploy"}) || !slices.Contains(d.Categories, "all") || d.SingularName != "deployment" {
		t.Errorf("deployments %+v", d)
	}
	var scale *surface.Subresource
	for i := range d.Subresources {
		if d.Subresources[i].Name == "scale" {
			scale = &d.Subresources[i]
		}
	}
	if scale == nil || scale.Kind != (schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}) {
		t.Errorf("deployments/scale %+v", scale)
	}
	if s.Groups()[0].Name != "" || s.Groups()[1].Name != "apiregistration.k8s.io" {
		t.Errorf("want the core group first, then the server's order; got %q, %q", s.Groups()[0].Name, s.Groups()[1].Name)
	}
	api, apis := s.ETags()
	if api == "" || apis == "" {
		t.Errorf("ETags %q %q", api, apis)
	}
	if _, ok := s.Group("nope"); ok {
		t.Errorf("found a group that does not exist")
	}
}

// TestConditionalRefresh: an unchanged cluster costs two 304s and hands back
// the same parsed content; a change costs one 200 for the endpoint that
// changed.
func TestConditionalRefresh(t *testing.T) {
	srv, base := docserver.Start(t, docserver.WithCRDs(20, 4))
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := newClient(t, base, discovery.WithClock(clk))
	first, err := c.Refresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	clk.Step(time.Minute)
	again, err := c.Refresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := srv.Stats()
	if st.Requests != 2 || st.NotModified != 2 {
		t.Errorf("unchanged refresh: %+v, want 2 requests, both 304", st)
	}
	for _, r := range srv.Requests() {
		if r.IfNoneMatch == "" {
			t.Errorf("%s sent without If-None-Match", r.Path)
		}
	}
	if &again.Groups()[0] != &first.Groups()[0] || !again.Validated().After(first.Validated()) || again.Fetched() != first.Fetched() {
		t.Errorf("a 304 refresh should share the parsed content and move only the validation time")
	}

	if err := srv.AddCRD(docserver.CRD{Group: "late.example.com", Versions: []string{"v1"}, Kind: "Late"}); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	changed, err := c.Refresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := changed.Group("late.example.com"); !ok {
		t.Errorf("the new group is missing after refresh")
	}
	// The change is confirmed at once on new connections (mixed.go): /apis
	// twice and /api, three 304s when the server that answered is the
	// only one.
	if st := srv.Stats(); st.Requests != 5 || st.NotModified != 4 {
		t.Errorf("refresh after a CRD install: %+v, want /api 304, /apis 200, and three 304s confirming them", st)
	}
	if c.Current() != changed {
		t.Errorf("Current is not the refreshed snapshot")
	}
	cs := c.Stats()
	if cs.Requests != 9 || cs.NotModified != 6 || cs.Refreshes != 3 || cs.Resamples != 1 || changed.Mixed() {
		t.Errorf("client stats %+v", cs)
	}
}

// TestStaleKeepsLastKnown: a group-version whose aggregated API server died
// stays in the snapshot with its last known resources, and the error names
// it; when it recovers the snapshot is complete again.
func TestStaleKeepsLastKnown(t *testing.T) {
	srv, base := docserver.Start(t)
	metrics := apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Resources: []apidiscoveryv2.APIResourceDiscovery{{
		Resource: "pods", ResponseKind: &metav1.GroupVersionKind{Group: "metrics.k8s.io", Version: "v1beta1", Kind: "PodMetrics"},
		Scope: apidiscoveryv2.ScopeNamespace, Verbs: []string{"get", "list"},
	}}}
	if err := srv.SetGroupVersion("metrics.k8s.io", metrics); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := newClient(t, base, discovery.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The aggregated API server goes away before the server ever learnt
	// its resources again: Stale with no resources.
	dead := apidiscoveryv2.APIVersionDiscovery{Version: "v1beta1", Freshness: apidiscoveryv2.DiscoveryFreshnessStale}
	if err := srv.SetGroupVersion("metrics.k8s.io", dead); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	for range 3 {
		s, err := c.Refresh(context.Background())
		var gve *discovery.GroupVersionError
		if !errors.As(err, &gve) || gve.GroupVersion != gv || !errors.Is(err, discovery.ErrStale) {
			t.Fatalf("error %v: want a GroupVersionError for %s wrapping ErrStale", err, gv)
		}
		v, ok := s.Version(gv)
		if !ok || v.Freshness != surface.FreshnessStale || !v.LastKnown || len(v.Resources) != 1 || s.Err() == nil {
			t.Fatalf("stale version %+v err=%v: want Stale, last known resources kept", v, s.Err())
		}
		if _, ok := s.Version(schema.GroupVersion{Group: "apps", Version: "v1"}); !ok {
			t.Fatalf("the rest of the snapshot is missing")
		}
	}
	if n := strings.Count(logs.String(), "not current"); n != 1 {
		t.Errorf("logged the stale group %d times over three refreshes, want once:\n%s", n, logs.String())
	}
	if err := srv.SetGroupVersion("metrics.k8s.io", metrics); err != nil {
		t.Fatal(err)
	}
	s, err := c.Refresh(context.Background())
	if err != nil || s.Err() != nil {
		t.Errorf("after recovery: %v, %v", err, s.Err())
	}
	if !strings.Contains(logs.String(), "current again") {
		t.Errorf("recovery not logged")
	}
}

// TestBadResponses: a damaged or refused /apis fails the refresh with an
// error of its kind, keeps the previous snapshot (saying why) and gives a
// first read no snapshot. The legacy server's case is in internal/withfake
// (TestBadResponsesLegacy): this server serves aggregated discovery only.
func TestBadResponses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault docserver.Fault
		opts  []discovery.Option
		check func(error) bool
	}{
		{"wrong content type", docserver.Fault{ContentType: "text/html"}, nil,
			func(err error) bool { var re *discovery.ResponseError; return errors.As(err, &re) }},
		{"truncated", docserver.Fault{Truncate: 500}, nil,
			func(err error) bool { return err != nil }},
		{"reset", docserver.Fault{ResetAfter: 500}, nil,
			func(err error) bool { return err != nil }},
		{"oversized", docserver.Fault{Oversize: 1 << 20}, []discovery.Option{discovery.WithMaxResponseBytes(512 << 10)},
			func(err error) bool { return errors.Is(err, discovery.ErrTooLarge) }},
		{"500", docserver.Fault{Status: 500}, nil, apierrors.IsInternalError},
		{"404", docserver.Fault{Status: 404}, nil, apierrors.IsNotFound},
		{"429", docserver.Fault{Status: 429, RetryAfter: 7 * time.Second}, []discovery.Option{discovery.WithMaxRetries(0)}, func(err error) bool {
			d, ok := apierrors.SuggestsClientDelay(err)
			return apierrors.IsTooManyRequests(err) && ok && d == 7
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, base := docserver.Start(t)
			c := newClient(t, base, tc.opts...)
			good, err := c.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// Change the cluster so the refresh gets a 200 (a 304 has no
			// body to damage), then damage it.
			if err := srv.AddCRD(docserver.CRD{Group: "x.example.com", Versions: []string{"v1"}, Kind: "X"}); err != nil {
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

// TestServerDataEdgeCases: nil response kinds, duplicates and empty
// entries from a server are tolerated, never a panic.
func TestServerDataEdgeCases(t *testing.T) {
	const doc = `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[
	 {"metadata":{"name":"a.example.com"},"versions":[
	   {"version":"v1","resources":[
	     {"resource":"things","responseKind":null,"scope":"Namespaced","verbs":["get"]},
	     {"resource":"widgets","responseKind":{"group":"","version":"","kind":"Widget"},"scope":"Cluster","verbs":["get"],
	      "subresources":[{"subresource":"status","responseKind":null,"verbs":["get"]},{"subresource":""}]},
	     {"resource":"widgets","responseKind":{"kind":"Dup"},"scope":"Cluster"},
	     {"resource":"","responseKind":{"kind":"Nameless"}}]},
	   {"version":"v1","resources":[]},
	   {"version":"","resources":[]}]},
	 {"metadata":{"name":"a.example.com"},"versions":[{"version":"v2"}]},
	 {"metadata":{"name":"empty.example.com"},"versions":[]},
	 {"metadata":{"name":"nil.example.com"}}]}`
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		if r.URL.Path == "/api" {
			_, _ = w.Write([]byte(`{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[]}`))
			return
		}
		_, _ = w.Write([]byte(doc))
	}))
	defer ts.Close()
	s, err := newClient(t, ts.URL).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, ok := s.Group("a.example.com")
	if !ok || len(a.Versions) != 1 || len(a.Versions[0].Resources) != 1 {
		t.Fatalf("group a: %+v", a)
	}
	w := a.Versions[0].Resources[0]
	if w.Kind.Kind != "Widget" || w.Kind.Group != "a.example.com" || len(w.Subresources) != 0 {
		t.Errorf("widgets %+v", w)
	}
	if g, ok := s.Group("empty.example.com"); !ok || g.PreferredVersion() != nil {
		t.Errorf("empty group %+v", g)
	}
}

// TestRefreshCoalesces: coalescing is explicit. Cold Snapshot callers
// share the one read under way (there is nothing older to be newer than).
// Refresh wants discovery as of its call, so callers that arrive while a
// refresh runs (it may have read the server before the change they must
// see) share the one that follows it: twenty at once cost two refreshes,
// not twenty, and not one. In a synctest bubble, every caller has joined
// before the held /apis answers, whatever the machine's load.
func TestRefreshCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		srv.InjectFault("/apis", docserver.Fault{Latency: 300 * time.Millisecond, Times: 1})
		c, err := discovery.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if _, err := c.Snapshot(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if st := srv.Stats(); st.Requests != 2 {
			t.Errorf("20 concurrent cold reads sent %d requests, want 2", st.Requests)
		}
		if d := time.Since(start); d != 300*time.Millisecond {
			t.Errorf("the reads took %v of bubble time, want the one held /apis (300ms)", d)
		}

		srv.ResetRequests()
		srv.InjectFault("/apis", docserver.Fault{Latency: 300 * time.Millisecond, Times: 1})
		first := make(chan *discovery.Snapshot, 1)
		go func() { s, _ := c.Refresh(t.Context()); first <- s }()
		synctest.Wait() // the first refresh holds its /apis
		for range 19 {
			wg.Go(func() {
				if _, err := c.Refresh(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		<-first
		if st := srv.Stats(); st.Requests != 4 || st.NotModified != 4 {
			t.Errorf("a refresh, then 19 arriving while it ran: %d requests (%d 304s), want 4 (two refreshes, 304s)", st.Requests, st.NotModified)
		}
	})
}

// TestCallerContext: a caller that gives up gets its context's error at
// once, the shared refresh still completes for the others, and no context
// error is ever kept as the client's state. In a synctest bubble, so that
// "both callers wait in one refresh", "at once" and "the abandoned refresh
// has ended" are facts, not timing: /apis is held for 10s of bubble time by
// a Fault.Latency while the callers come and go.
func TestCallerContext(t *testing.T) {
	const latency = 10 * time.Second // within DefaultRefreshTimeout
	type result struct {
		s     *discovery.Snapshot
		err   error
		after time.Duration // of bubble time since the callers started
	}
	// setup serves the fake cluster in the bubble, reads a first snapshot,
	// then holds the next /apis for the latency; refresh calls Refresh in a
	// goroutine of its own.
	setup := func(t *testing.T) (srv *docserver.Server, c *discovery.Client, s0 *discovery.Snapshot, refresh func(context.Context) <-chan result) {
		srv, hc, base := docserver.StartInProcess(t)
		c, err := discovery.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		if s0, err = c.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		srv.ResetRequests()
		srv.InjectFault("/apis", docserver.Fault{Latency: latency, Times: 1})
		start := time.Now()
		return srv, c, s0, func(ctx context.Context) <-chan result {
			out := make(chan result, 1)
			go func() {
				s, err := c.Refresh(ctx)
				out <- result{s, err, time.Since(start)}
			}()
			return out
		}
	}
	count := func(srv *docserver.Server, path string) int {
		n := 0
		for _, r := range srv.Requests() {
			if r.Path == path {
				n++
			}
		}
		return n
	}

	t.Run("one of two leaves", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, c, s0, refresh := setup(t)
			ctxA, cancelA := context.WithCancel(t.Context())
			defer cancelA()
			resA := refresh(ctxA)
			synctest.Wait() // A started the refresh; its /apis is held by the latency
			srv.InjectFault("/apis", docserver.Fault{Latency: latency, Times: 1})
			ctxB, cancelB := context.WithCancel(t.Context())
			defer cancelB()
			resB := refresh(ctxB)
			resC := refresh(t.Context())
			synctest.Wait() // B and C wait for the refresh after A's
			cancelA()
			a := <-resA
			if !errors.Is(a.err, context.Canceled) || a.s != s0 || a.after != 0 {
				t.Errorf("the caller that left: %v after %v (the snapshot it had: %v); want context.Canceled at once, with the snapshot it had", a.err, a.after, a.s == s0)
			}
			synctest.Wait() // A's refresh, which nobody waits for, was cancelled; B and C's began
			cancelB()
			if b := <-resB; !errors.Is(b.err, context.Canceled) || b.after != 0 {
				t.Errorf("the second caller that left: %v after %v; want context.Canceled at once", b.err, b.after)
			}
			synctest.Wait()
			select {
			case r := <-resC:
				t.Fatalf("the caller that stayed returned when the others left: %v after %v", r.err, r.after)
			default:
			}
			r := <-resC
			if r.err != nil || r.s == nil || r.s == s0 || r.s.RefreshError() != nil || r.after != latency {
				t.Fatalf("the caller that stayed: %v after %v; want the refreshed snapshot when its /apis answers, after %v", r.err, r.after, latency)
			}
			if c.Current() != r.s {
				t.Errorf("the refreshed snapshot is not current")
			}
			if n, m := count(srv, "/api"), count(srv, "/apis"); n != 2 || m != 2 {
				t.Errorf("%d /api and %d /apis requests, want A's refresh (abandoned) and one shared by B and C", n, m)
			}
		})
	})

	t.Run("everyone leaves", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, c, s0, refresh := setup(t)
			ctxA, cancelA := context.WithCancel(t.Context())
			defer cancelA()
			resA := refresh(ctxA)
			synctest.Wait()
			cancelA()
			a := <-resA
			if !errors.Is(a.err, context.Canceled) || a.s != s0 || a.after != 0 {
				t.Errorf("the caller that left: %v after %v (the snapshot it had: %v); want context.Canceled at once, with the snapshot it had", a.err, a.after, a.s == s0)
			}
			synctest.Wait() // the abandoned refresh has ended, if it is going to
			if count(srv, "/apis") != 1 {
				t.Fatalf("the refresh everyone left is still running: its /apis has not ended")
			}
			if cur := c.Current(); cur != s0 || cur.RefreshError() != nil {
				t.Errorf("after an abandoned refresh: the current snapshot is the one before: %v, RefreshError %v; want the one before, unmarked", cur == s0, cur.RefreshError())
			}
			if s, err := c.Snapshot(t.Context()); err != nil || s != s0 {
				t.Errorf("Snapshot after an abandoned refresh: the one before: %v, error %v", s == s0, err)
			}
			s, err := c.Refresh(t.Context())
			if err != nil || s == nil || s.RefreshError() != nil {
				t.Errorf("the next refresh: %v", err)
			}
		})
	})
}

// TestSnapshotMaxAge: reads inside the max age cost nothing; past it, the
// read returns at once and a background revalidation follows. In a
// synctest bubble, so that synctest.Wait tells when the background
// revalidation has ended.
func TestSnapshotMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		c, err := discovery.NewForHTTPClient(hc, base, discovery.WithClock(clk), discovery.WithMaxAge(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		first, _ := c.Snapshot(ctx)
		for range 5 {
			if s, _ := c.Snapshot(ctx); s != first {
				t.Fatal("a read inside the max age returned another snapshot")
			}
		}
		synctest.Wait()
		if n := srv.Stats().Requests; n != 2 {
			t.Fatalf("%d requests for six reads inside the max age, want 2", n)
		}
		// Past the max age, with the server slow to answer /apis.
		srv.InjectFault("/apis", docserver.Fault{Latency: 10 * time.Second, Times: 1})
		clk.Step(2 * time.Minute)
		start := time.Now()
		if s, _ := c.Snapshot(ctx); s != first || time.Since(start) != 0 {
			t.Fatalf("a read past the max age should return the current snapshot at once; took %v of bubble time", time.Since(start))
		}
		time.Sleep(10 * time.Second)
		synctest.Wait() // the background revalidation has ended
		if st := srv.Stats(); st.Requests != 4 || st.NotModified != 2 {
			t.Fatalf("background revalidation: %+v, want two more requests, both 304", st)
		}
		cur := c.Current()
		if cur == first || !cur.Validated().Equal(clk.Now()) {
			t.Errorf("revalidated snapshot validated at %v, want a new one at %v", cur.Validated(), clk.Now())
		}
		if cs := c.Stats(); cs.CacheHits != 6 {
			t.Errorf("cache hits %d, want 6", cs.CacheHits)
		}
	})
}

// TestNewFromRESTConfig: a client built from a client-go config sends what
// the config says (here a bearer token, impersonation and a user agent), and
// honours a path prefix in the host URL.
func TestNewFromRESTConfig(t *testing.T) {
	srv, err := docserver.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	ts := httptest.NewServer(http.StripPrefix("/prefix", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen["auth"], seen["as"], seen["ua"] = r.Header.Get("Authorization"), r.Header.Get("Impersonate-User"), r.Header.Get("User-Agent")
		mu.Unlock()
		srv.ServeHTTP(w, r)
	})))
	defer ts.Close()
	c, err := discovery.New(&rest.Config{
		Host:        ts.URL + "/prefix",
		BearerToken: "s3cret",
		Impersonate: rest.ImpersonationConfig{UserName: "alice"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Snapshot(context.Background())
	if err != nil || len(s.Groups()) < 10 {
		t.Fatalf("snapshot through the config: %v", err)
	}
	if seen["auth"] != "Bearer s3cret" || seen["as"] != "alice" || !strings.HasPrefix(seen["ua"], "kubeatlas") {
		t.Errorf("headers sent: %v", seen)
	}
}

// TestFailedRefreshesLogOnce: a dead server is logged once, not per refresh.
func TestFailedRefreshesLogOnce(t *testing.T) {
	srv, base := docserver.Start(t)
	var logs bytes.Buffer
	c := newClient(t, base, discovery.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.InjectFault("/apis", docserver.Fault{Status: http.StatusServiceUnavailable})
	for range 5 {
		if _, err := c.Refresh(context.Background()); err == nil {
			t.Fatal("refresh against a failing server succeeded")
		}
	}
	srv.ClearFaults()
	if _, err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "refresh failed"); n != 1 {
		t.Errorf("%d failure lines for five failed refreshes, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "works again") {
		t.Errorf("recovery not logged")
	}
}

// TestAbandonedRefreshIsCancelled: when every caller has given up, the
// shared refresh is cancelled rather than left running to its timeout. In
// a synctest bubble: once it settles, the refresh has ended or is stuck.
func TestAbandonedRefreshIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := docserver.StartInProcess(t)
		srv.InjectFault("/apis", docserver.Fault{Latency: time.Minute})
		c, err := discovery.NewForHTTPClient(hc, base)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := c.Refresh(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("refresh: %v", err)
		}
		// The server's handler ends when its request is cancelled (and is
		// logged then); it would wait a minute otherwise.
		synctest.Wait()
		if !slices.ContainsFunc(srv.Requests(), func(r docserver.Request) bool { return r.Path == "/apis" }) {
			t.Fatal("the abandoned refresh is still running")
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("the abandoned refresh ended after %v of bubble time, want the caller's 50ms", d)
		}
		srv.ClearFaults()
		if _, err := c.Refresh(t.Context()); err != nil {
			t.Errorf("the next refresh inherited the cancelled one: %v", err)
		}
	})
}

// TestNewForConfigAndClient: a client built on a framework's HTTP client
// sends through that client (the config's token is not added again), keeps
// the config's path prefix, asks for gzip only when the config allows
// compression, and hands adapters the config (Connection).
func TestNewForConfigAndClient(t *testing.T) {
	srv, err := docserver.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var auth, encoding []string
	ts := httptest.NewServer(http.StripPrefix("/prefix", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth, encoding = append(auth, r.Header.Get("Authorization")), append(encoding, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		srv.ServeHTTP(w, r)
	})))
	defer ts.Close()
	// One transport adds nothing of its own; Go's default one asks for
	// gzip unless the request says otherwise: DisableCompression holds
	// with either.
	for _, tc := range []struct {
		hc      *http.Client
		disable bool
	}{
		{&http.Client{Transport: &http.Transport{DisableCompression: true}}, false},
		{&http.Client{Transport: &http.Transport{DisableCompression: true}}, true},
		{&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}, true},
	} {
		hc, disable := tc.hc, tc.disable
		mu.Lock()
		auth, encoding = nil, nil
		mu.Unlock()
		cfg := &rest.Config{Host: ts.URL + "/prefix", BearerToken: "s3cret", DisableCompression: disable}
		c, err := discovery.NewForConfigAndClient(cfg, hc)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := c.Snapshot(context.Background()); err != nil || len(s.Groups()) < 10 {
			t.Fatalf("snapshot through the prefix: %v", err)
		}
		mu.Lock()
		for i := range auth {
			want := "gzip"
			if disable {
				want = "identity"
			}
			if auth[i] != "" || encoding[i] != want {
				t.Errorf("DisableCompression %v: request %d had Authorization %q, Accept-Encoding %q; want none, %q", disable, i, auth[i], encoding[i], want)
			}
		}
		mu.Unlock()
		if hcGot, cfgGot := c.Connection(); hcGot == nil || cfgGot.BearerToken != "s3cret" || cfgGot.Host != cfg.Host {
			t.Errorf("Connection: %v, %+v", hcGot, cfgGot)
		}
	}
}
