package discoverytest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

const widgetsGroup = "widgets.example.com"

// widgetsAPI is a tiny aggregated API server: widgets.example.com/v1
// widgets, a list of one item, and a watch that sends one event and stays
// open until its request ends. It records what its start function did
// with the fake's client.
type widgetsAPI struct {
	crdsStatus  int // the start function's LIST of CRDs through the fake's client
	baseGiven   string
	starts      atomic.Int32
	closes      atomic.Int32
	inFlight    atomic.Int32
	inFlightAtC int32 // handler calls still running when Close ran
}

func (w *widgetsAPI) start(fake *http.Client, base string) (*discoverytest.AggregatedAPI, error) {
	w.baseGiven = base
	w.starts.Add(1)
	resp, err := fake.Get(base + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	w.crdsStatus = resp.StatusCode
	return &discoverytest.AggregatedAPI{
		Group: apidiscoveryv2.APIGroupDiscovery{
			ObjectMeta: metav1.ObjectMeta{Name: widgetsGroup},
			Versions: []apidiscoveryv2.APIVersionDiscovery{{Version: "v1", Resources: []apidiscoveryv2.APIResourceDiscovery{{
				Resource: "widgets", Scope: apidiscoveryv2.ScopeCluster, Verbs: []string{"get", "list", "watch"},
				ResponseKind: &metav1.GroupVersionKind{Group: widgetsGroup, Version: "v1", Kind: "Widget"},
			}}}},
		},
		Handler: http.HandlerFunc(w.serve),
		Close: func() {
			w.inFlightAtC = w.inFlight.Load()
			w.closes.Add(1)
		},
	}, nil
}

func (w *widgetsAPI) serve(rw http.ResponseWriter, r *http.Request) {
	w.inFlight.Add(1)
	defer w.inFlight.Add(-1)
	if r.URL.Query().Get("watch") != "true" {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(rw, `{"kind":"WidgetList","items":[{"metadata":{"name":"one"}}]}`)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(rw, `{"type":"ADDED","object":{"metadata":{"name":"one"}}}`+"\n")
	_ = http.NewResponseController(rw).Flush()
	<-r.Context().Done()
	// Ending takes a moment, as a real server's watch does (it flushes,
	// unregisters): Close must wait for it.
	time.Sleep(50 * time.Millisecond)
}

// widgetsVersion returns widgets.example.com/v1 in base's aggregated
// discovery, or nil.
func widgetsVersion(t *testing.T, base string) *apidiscoveryv2.APIVersionDiscovery {
	t.Helper()
	resp, body := get(t, base+"/apis", "Accept", acceptV2JSON)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/apis: %d", resp.StatusCode)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	for _, g := range list.Items {
		if g.Name == widgetsGroup && len(g.Versions) > 0 {
			return &g.Versions[0]
		}
	}
	return nil
}

// TestAggregatedAPIServed: the group is listed in aggregated and legacy
// discovery, Current; requests under it reach the
// handler after the fake's log and authentication; the start function's
// client reaches the fake at the base it is given, in memory, unlogged,
// not refused by WithWatchForbidden, untouched by faults.
func TestAggregatedAPIServed(t *testing.T) {
	w := &widgetsAPI{}
	srv, base := discoverytest.Start(t, discoverytest.WithAggregatedAPI(w.start), discoverytest.WithWatchForbidden(),
		discoverytest.WithBearerToken("secret"))
	if w.baseGiven != discoverytest.InProcessURL {
		t.Errorf("start was given base %q, want %q", w.baseGiven, discoverytest.InProcessURL)
	}
	if w.crdsStatus != http.StatusOK {
		t.Errorf("the start function's LIST of CRDs: %d, want 200 (WithWatchForbidden does not apply to it)", w.crdsStatus)
	}
	auth := []string{"Authorization", "Bearer secret"}
	v := widgetsVersionAuth(t, base, auth)
	if v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent || len(v.Resources) != 1 || v.Resources[0].Resource != "widgets" {
		t.Fatalf("aggregated discovery: %+v, want v1 with widgets, Current", v)
	}
	if resp, body := get(t, base+"/apis", auth...); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"`+widgetsGroup+`/v1"`) {
		t.Errorf("legacy /apis: %d, does not list the group", resp.StatusCode)
	}
	if resp, body := get(t, base+"/apis/"+widgetsGroup+"/v1/widgets", auth...); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "WidgetList") {
		t.Errorf("widgets: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, base+"/apis/"+widgetsGroup+"/v1/widgets"); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("widgets without the token: %d, want the fake's refusal", resp.StatusCode)
	}
	srv.InjectFault("/apis/"+widgetsGroup+"/*", discoverytest.Fault{Status: http.StatusTeapot})
	if resp, _ := get(t, base+"/apis/"+widgetsGroup+"/v1/widgets", auth...); resp.StatusCode != http.StatusTeapot {
		t.Errorf("a fault on the group's path: %d, want 418", resp.StatusCode)
	}
	srv.ClearFaults()
	logged := 0
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Path, "/apis/apiextensions.k8s.io/") {
			t.Errorf("the start function's request is in the log: %s %s", r.Method, r.Path)
		}
		if r.Path == "/apis/"+widgetsGroup+"/v1/widgets" {
			logged++
		}
	}
	if logged != 3 {
		t.Errorf("%d requests for widgets in the log, want 3", logged)
	}
}

func widgetsVersionAuth(t *testing.T, base string, auth []string) *apidiscoveryv2.APIVersionDiscovery {
	t.Helper()
	resp, body := get(t, base+"/apis", append([]string{"Accept", acceptV2JSON}, auth...)...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/apis: %d", resp.StatusCode)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	for _, g := range list.Items {
		if g.Name == widgetsGroup && len(g.Versions) > 0 {
			return &g.Versions[0]
		}
	}
	return nil
}

// TestAggregatedAPIUnavailable: unavailable, the group answers the
// aggregator's 503, is Stale (its APIService not Available), and an open watch of it ends; available
// again, it is served and Current. A group no aggregated API serves is an
// error.
func TestAggregatedAPIUnavailable(t *testing.T) {
	w := &widgetsAPI{}
	srv, base := discoverytest.Start(t, discoverytest.WithAggregatedAPI(w.start))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/apis/"+widgetsGroup+"/v1/widgets?watch=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.Contains(line, "ADDED") {
		t.Fatalf("first event %q, %v", line, err)
	}

	if err := srv.SetAggregatedAPIUnavailable(widgetsGroup, true); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if ctx.Err() != nil {
		t.Error("the watch did not end when the API became unavailable")
	}
	if resp, body := get(t, base+"/apis/"+widgetsGroup+"/v1/widgets"); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(string(body), "service unavailable") {
		t.Errorf("unavailable: %d %s, want the aggregator's 503", resp.StatusCode, body)
	}
	if v := widgetsVersion(t, base); v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessStale {
		t.Errorf("unavailable: discovery %+v, want Stale", v)
	}
	if resp, body := get(t, base+"/apis/apiregistration.k8s.io/v1/apiservices/v1."+widgetsGroup); resp.StatusCode != http.StatusOK ||
		!strings.Contains(string(body), `"FailedDiscoveryCheck"`) {
		t.Errorf("unavailable: its APIService: %d %s, want Available False", resp.StatusCode, body)
	}

	if err := srv.SetAggregatedAPIUnavailable(widgetsGroup, false); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, base+"/apis/"+widgetsGroup+"/v1/widgets"); resp.StatusCode != http.StatusOK {
		t.Errorf("available again: %d", resp.StatusCode)
	}
	if v := widgetsVersion(t, base); v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Errorf("available again: discovery %+v, want Current", v)
	}

	for _, group := range []string{"apps", "example.com", widgetsGroup + "/v1"} {
		if err := srv.SetAggregatedAPIUnavailable(group, true); err == nil {
			t.Errorf("SetAggregatedAPIUnavailable(%q): no error", group)
		}
	}
}

// TestAggregatedAPICloseLeavesNothingBehind: Close ends an open watch of
// the API, calls its Close once, after every handler call returned, and
// answers 503 afterwards; every goroutine the fake started for it ends.
func TestAggregatedAPICloseLeavesNothingBehind(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	w := &widgetsAPI{}
	srv, err := discoverytest.NewServer(discoverytest.WithAggregatedAPI(w.start))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Get(ts.URL + "/apis/" + widgetsGroup + "/v1/widgets?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("no first event: %v", err)
	}
	srv.Close()
	srv.Close() // idempotent
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n := w.closes.Load(); n != 1 {
		t.Errorf("the API's Close ran %d times, want 1", n)
	}
	if w.inFlightAtC != 0 {
		t.Errorf("%d handler calls still running when the API's Close ran", w.inFlightAtC)
	}
	if resp, _ := get(t, ts.URL+"/apis/"+widgetsGroup+"/v1/widgets"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after Close: %d, want 503", resp.StatusCode)
	}
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	ts.Close()
	goleak.VerifyNone(t, ignore)
}

// TestAggregatedAPIInProcess: StartInProcess serves the API too, to the
// client it returns.
func TestAggregatedAPIInProcess(t *testing.T) {
	w := &widgetsAPI{}
	_, hc, base := discoverytest.StartInProcess(t, discoverytest.WithAggregatedAPI(w.start))
	resp, err := hc.Get(base + "/apis/" + widgetsGroup + "/v1/widgets")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("widgets in process: %d", resp.StatusCode)
	}
}

// TestAggregatedAPIRefused: what NewServer refuses, with the start
// functions it did start closed again.
func TestAggregatedAPIRefused(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	first := &widgetsAPI{}
	group := func(name string, versions ...string) func(*http.Client, string) (*discoverytest.AggregatedAPI, error) {
		return func(*http.Client, string) (*discoverytest.AggregatedAPI, error) {
			g := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: name}}
			for _, v := range versions {
				g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{Version: v})
			}
			return &discoverytest.AggregatedAPI{Group: g, Handler: http.NotFoundHandler()}, nil
		}
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		opts []discoverytest.Option
		want string
	}{
		{"no start function", []discoverytest.Option{discoverytest.WithAggregatedAPI(nil)}, "start function"},
		{"start fails", []discoverytest.Option{discoverytest.WithAggregatedAPI(first.start),
			discoverytest.WithAggregatedAPI(func(*http.Client, string) (*discoverytest.AggregatedAPI, error) { return nil, boom })}, "boom"},
		{"a group the fake serves", []discoverytest.Option{discoverytest.WithAggregatedAPI(group("apps", "v9"))}, "served twice"},
		{"one group twice", []discoverytest.Option{discoverytest.WithAggregatedAPI(first.start), discoverytest.WithAggregatedAPI(first.start)}, "served twice"},
		{"no versions", []discoverytest.Option{discoverytest.WithAggregatedAPI(group("empty.example.com"))}, "no versions"},
		{"no name", []discoverytest.Option{discoverytest.WithAggregatedAPI(group("", "v1"))}, "group name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starts, closes := first.starts.Load(), first.closes.Load()
			_, err := discoverytest.NewServer(tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if started, closed := first.starts.Load()-starts, first.closes.Load()-closes; closed != started {
				t.Errorf("%d APIs started, %d closed", started, closed)
			}
		})
	}
	if _, err := discoverytest.NewFleet([]string{"a"}, []discoverytest.Surface{{discoverytest.WithAggregatedAPI(first.start)}}); err == nil {
		t.Error("a Fleet with WithAggregatedAPI: no error")
	}
	goleak.VerifyNone(t, ignore)
}

// TestAggregatedAPIConcurrentUnavailable: flipping availability while
// requests run is safe (run with -race) and ends where the last call left
// it.
func TestAggregatedAPIConcurrentUnavailable(t *testing.T) {
	w := &widgetsAPI{}
	srv, base := discoverytest.Start(t, discoverytest.WithAggregatedAPI(w.start))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 20 {
				if i%2 == 0 {
					_ = srv.SetAggregatedAPIUnavailable(widgetsGroup, j%2 == 0)
				} else {
					resp, err := http.Get(base + "/apis/" + widgetsGroup + "/v1/widgets")
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			}
		})
	}
	wg.Wait()
	if err := srv.SetAggregatedAPIUnavailable(widgetsGroup, false); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, base+"/apis/"+widgetsGroup+"/v1/widgets"); resp.StatusCode != http.StatusOK {
		t.Errorf("available at the end: %d", resp.StatusCode)
	}
}
