package servedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"

	"github.com/kubeatlas/kubeatlas/apiserver"
	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// WithServedAPI makes the fake serve discovery.kubeatlas.io/v1alpha1, as
// discoverytest.WithAggregatedAPI serves an aggregated API: listed in
// aggregated and legacy discovery (and as an APIService) from the served
// server's own discovery, its requests answered after the fake's log,
// faults and authentication. Its feed, a discovery.Client on the fake,
// watches CRDs and APIServices through the fake's in-memory client for
// aggregated APIs: its requests are not in the request log, no fault
// touches them, and WithWatchForbidden does not refuse them (deploy/ gives
// the server the RBAC to list and watch CRDs and APIServices).
// Server.SetAggregatedAPIUnavailable(v1alpha1.GroupName, ...) takes the
// API away; Server.Close (Start and StartInProcess call it) stops it and
// its feed. The objects appear once the feed has read the fake's
// discovery, shortly after NewServer returns.
func WithServedAPI() discoverytest.Option {
	return discoverytest.WithAggregatedAPI(start)
}

// start builds the served API over a feed on the fake and runs it.
func start(fake *http.Client, base string) (*discoverytest.AggregatedAPI, error) {
	// A discarding logger: the feed's warnings (a check that failed while
	// a test made the fake misbehave) are not the test's business.
	quiet := slog.New(slog.DiscardHandler)
	client, err := discovery.NewForHTTPClient(fake, base, discovery.WithLogger(quiet))
	if err != nil {
		return nil, err
	}
	api, err := apiserver.NewUnlistened(&apiserver.Feed{Client: client, Stores: apiserver.NewStores(nil), Logger: quiet})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	group, err := groupDiscovery(api.Handler())
	if err != nil {
		cancel()
		_ = api.Run(ctx) // with ctx done, it only releases the server's storage
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = api.Run(ctx)
	}()
	return &discoverytest.AggregatedAPI{
		Group:   *group,
		Handler: api.Handler(),
		Close:   func() { cancel(); <-done },
	}, nil
}

// groupDiscovery reads the served API's group from its own aggregated
// discovery, as the kube-aggregator does from an APIService's server.
func groupDiscovery(h http.Handler) (*apidiscoveryv2.APIGroupDiscovery, error) {
	req := httptest.NewRequest(http.MethodGet, "/apis", nil)
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("the served API's /apis answered %d: %s", rec.Code, rec.Body.String())
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		return nil, fmt.Errorf("the served API's /apis: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Name == v1alpha1.GroupName {
			return &list.Items[i], nil
		}
	}
	return nil, errors.New("the served API's /apis does not list " + v1alpha1.GroupName)
}
