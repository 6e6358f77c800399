package discovery

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Stats counts what a Client did since it was built.
type Stats struct {
	Requests    int64 // HTTP requests sent, retries and redirects included
	Bytes       int64 // response body bytes read
	NotModified int64 // 304 answers
	// CacheHits counts Snapshot calls answered from the current snapshot
	// without waiting for the network.
	CacheHits     int64
	Refreshes     int64 // refreshes run (shared by their concurrent callers)
	RefreshErrors int64 // refreshes that produced no snapshot
	RefreshTime   time.Duration
	DiskLoads     int64 // snapshots read from the disk cache (warm starts)
	// SurfaceHits counts cold starts that the server confirmed (two 304s)
	// for a surface the WithShared hook guessed.
	SurfaceHits int64
	// Resamples counts refreshes whose discovery differed from the one
	// before and that asked again on a new connection, to tell a change
	// from servers that disagree behind one URL (see Snapshot.Mixed).
	Resamples int64

	// Watch (see Client.Watch): its list and watch requests (not counted
	// in Requests), the events they brought, the events that could change
	// discovery and so asked for a refresh, and whether watching was
	// refused (403), so that Watch polls instead.
	WatchRequests  int64
	WatchEvents    int64
	WatchTriggers  int64
	WatchForbidden bool
}

// countingTransport counts every request sent: retries and redirects too.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(req)
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the
// transport below, for requests that want a new connection.
func (t countingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

type counters struct {
	requests, bytes, notModified, cacheHits, refreshes, refreshErrors, refreshNanos, diskLoads, surfaceHits, resamples atomic.Int64
	watchRequests, watchEvents, watchTriggers                                                                          atomic.Int64
	watchForbidden                                                                                                     atomic.Bool
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		Requests:       c.stats.requests.Load(),
		Bytes:          c.stats.bytes.Load(),
		NotModified:    c.stats.notModified.Load(),
		CacheHits:      c.stats.cacheHits.Load(),
		Refreshes:      c.stats.refreshes.Load(),
		RefreshErrors:  c.stats.refreshErrors.Load(),
		RefreshTime:    time.Duration(c.stats.refreshNanos.Load()),
		DiskLoads:      c.stats.diskLoads.Load(),
		SurfaceHits:    c.stats.surfaceHits.Load(),
		Resamples:      c.stats.resamples.Load(),
		WatchRequests:  c.stats.watchRequests.Load(),
		WatchEvents:    c.stats.watchEvents.Load(),
		WatchTriggers:  c.stats.watchTriggers.Load(),
		WatchForbidden: c.stats.watchForbidden.Load(),
	}
}
