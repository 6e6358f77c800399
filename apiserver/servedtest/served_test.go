package servedtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/apiserver/servedtest"
)

const (
	servedGroup  = v1alpha1.GroupName
	acceptV2JSON = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)

// get sends a GET with the given header name/value pairs and reads the body.
func get(t testing.TB, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp, body
}

// servedVersion returns the served group's v1alpha1 in base's aggregated
// discovery, or nil.
func servedVersion(t *testing.T, base string) *apidiscoveryv2.APIVersionDiscovery {
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
		if g.Name != servedGroup {
			continue
		}
		for i := range g.Versions {
			if g.Versions[i].Version == "v1alpha1" {
				return &g.Versions[i]
			}
		}
	}
	return nil
}

// apiGroupNames lists the served apigroups objects' names.
func apiGroupNames(t *testing.T, base string) (int, []string) {
	t.Helper()
	resp, body := get(t, base+"/apis/"+servedGroup+"/v1alpha1/apigroups")
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var list struct {
		Items []metav1.PartialObjectMetadata
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range list.Items {
		names = append(names, o.Name)
	}
	return resp.StatusCode, names
}

// TestServedAPI: WithServedAPI lists discovery.kubeatlas.io/v1alpha1 in
// aggregated and legacy discovery, with the served server's resources and
// verbs, Current, and serves apigroups, which follow a CRD added to the
// fake although WithWatchForbidden refuses CRDs to clients; the feed's own
// requests are not in the request log.
func TestServedAPI(t *testing.T) {
	srv, base := discoverytest.Start(t, servedtest.WithServedAPI(), discoverytest.WithWatchForbidden())
	v := servedVersion(t, base)
	if v == nil {
		t.Fatal("aggregated discovery does not list discovery.kubeatlas.io/v1alpha1")
	}
	if v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Errorf("freshness %q", v.Freshness)
	}
	got := map[string][]string{}
	for _, r := range v.Resources {
		got[r.Resource] = r.Verbs
		if r.Scope != apidiscoveryv2.ScopeCluster {
			t.Errorf("%s: scope %q", r.Resource, r.Scope)
		}
	}
	for _, name := range []string{"apigroups", "apiservers", "clusterconsistencies"} {
		if verbs := got[name]; !slices.Contains(verbs, "list") || !slices.Contains(verbs, "watch") || !slices.Contains(verbs, "get") {
			t.Errorf("%s: verbs %v", name, verbs)
		}
	}
	if resp, body := get(t, base+"/apis"); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"`+servedGroup+`/v1alpha1"`) {
		t.Errorf("legacy /apis: %d, does not list the group", resp.StatusCode)
	}
	if resp, body := get(t, base+"/apis/"+servedGroup+"/v1alpha1"); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"apigroups"`) {
		t.Errorf("legacy /apis/%s/v1alpha1: %d %s", servedGroup, resp.StatusCode, body)
	}

	// The feed reads the fake's discovery after the group is listed: the
	// served group has an object of its own, as in a cluster.
	waitUntil(t, "the apigroups objects", func() bool {
		_, names := apiGroupNames(t, base)
		return slices.Contains(names, "apps") && slices.Contains(names, servedGroup)
	})
	if err := srv.AddCRD(discoverytest.CRD{Group: "served.example.com", Versions: []string{"v1"}, Kind: "Served"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the new CRD's group object", func() bool {
		_, names := apiGroupNames(t, base)
		return slices.Contains(names, "served.example.com")
	})
	// The consistency check feeds apiservers and the verdict.
	waitUntil(t, "the apiservers object and the verdict", func() bool {
		_, servers := get(t, base+"/apis/"+servedGroup+"/v1alpha1/apiservers")
		verdict, _ := get(t, base+"/apis/"+servedGroup+"/v1alpha1/clusterconsistencies/cluster")
		return strings.Contains(string(servers), `"hostname":"apiserver-0"`) && verdict.StatusCode == http.StatusOK
	})
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Path, "/apis/apiextensions.k8s.io/") || strings.HasPrefix(r.Path, "/apis/apiregistration.k8s.io/") ||
			strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/") {
			t.Errorf("the feed's request is in the log: %s %s", r.Method, r.Path)
		}
	}
}

// TestServedAPIUnavailable: the fault answers the aggregator's 503 and
// turns the group Stale; undone, the API is served again and Current.
func TestServedAPIUnavailable(t *testing.T) {
	srv, base := discoverytest.Start(t, servedtest.WithServedAPI())
	if err := srv.SetAggregatedAPIUnavailable(servedGroup, true); err != nil {
		t.Fatal(err)
	}
	if code, _ := apiGroupNames(t, base); code != http.StatusServiceUnavailable {
		t.Errorf("unavailable: %d, want 503", code)
	}
	if v := servedVersion(t, base); v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessStale {
		t.Errorf("unavailable: discovery %+v, want Stale", v)
	}
	if err := srv.SetAggregatedAPIUnavailable(servedGroup, false); err != nil {
		t.Fatal(err)
	}
	// Served again: 200, or 429 with Retry-After while the served store
	// has not had its feed's first snapshot yet (the API server's answer
	// while its watch cache initializes; a client retries it), and 200
	// once it has: never the 503 of the fault.
	waitUntil(t, "the served API to answer 200", func() bool {
		code, _ := apiGroupNames(t, base)
		if code != http.StatusOK && code != http.StatusTooManyRequests {
			t.Fatalf("available again: %d, want 200 (or 429 while the store initializes)", code)
		}
		return code == http.StatusOK
	})
	if v := servedVersion(t, base); v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Errorf("available again: discovery %+v, want Current", v)
	}
	plain, _ := discoverytest.Start(t)
	if err := plain.SetAggregatedAPIUnavailable(servedGroup, true); err == nil {
		t.Error("SetAggregatedAPIUnavailable without WithServedAPI: no error")
	}
}

// TestServedAPIWatchEndsWhenUnavailable: an open watch of the served API
// ends when it becomes unavailable, as a proxied connection does.
func TestServedAPIWatchEndsWhenUnavailable(t *testing.T) {
	srv, base := discoverytest.Start(t, servedtest.WithServedAPI())
	waitUntil(t, "the apigroups objects", func() bool { _, names := apiGroupNames(t, base); return len(names) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/apis/"+servedGroup+"/v1alpha1/apigroups?watch=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	dec := json.NewDecoder(resp.Body)
	var first struct{ Type string }
	if err := dec.Decode(&first); err != nil || first.Type != "ADDED" {
		t.Fatalf("first event %+v, %v; want ADDED", first, err)
	}
	if err := srv.SetAggregatedAPIUnavailable(servedGroup, true); err != nil {
		t.Fatal(err)
	}
	for {
		var ev map[string]any
		if err := dec.Decode(&ev); err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		t.Error("the watch did not end when the API became unavailable")
	}
}

// TestServedAPICloseLeavesNothingBehind: Close stops the served API and
// its feed, ending an open watch of it, and every goroutine they started
// ends; a Fleet refuses the option.
func TestServedAPICloseLeavesNothingBehind(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	srv, err := discoverytest.NewServer(servedtest.WithServedAPI())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	client := &http.Client{Transport: &http.Transport{}}
	waitUntil(t, "the apigroups objects", func() bool { _, names := apiGroupNames(t, ts.URL); return len(names) > 0 })
	resp, err := client.Get(ts.URL + "/apis/" + servedGroup + "/v1alpha1/apigroups?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("no first event: %v", err)
	}
	srv.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // to the end: Close ended the watch
	resp.Body.Close()
	if code, _ := apiGroupNames(t, ts.URL); code != http.StatusServiceUnavailable {
		t.Errorf("after Close: %d, want 503", code)
	}
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	ts.Close()
	goleak.VerifyNone(t, ignore)

	if _, err := discoverytest.NewFleet([]string{"a"}, []discoverytest.Surface{{servedtest.WithServedAPI()}}); err == nil {
		t.Error("a Fleet with WithServedAPI: no error")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestServedAPIInProcess: StartInProcess serves the served API too, to
// the client it returns.
func TestServedAPIInProcess(t *testing.T) {
	_, hc, base := discoverytest.StartInProcess(t, servedtest.WithServedAPI())
	waitUntil(t, "the apigroups objects", func() bool {
		resp, err := hc.Get(base + "/apis/" + servedGroup + "/v1alpha1/apigroups/apps")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
