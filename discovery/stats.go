package discovery

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/internal/httpx"
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

	// Watch (see discovery/watch.Run): its list and watch requests (not
	// counted in Requests), the events they brought, the events that
	// could change discovery and so asked for a refresh, and whether
	// watching was refused (403), so that it polls instead.
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
	watching                                                                                                           atomic.Int32 // watches watching (not polling), synced
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

// Watching reports whether a discovery/watch.Run is keeping the snapshot
// current by watching (not by its fallback poll), its informers synced.
func (c *Client) Watching() bool { return c.stats.watching.Load() > 0 }

// WatchHook is the one hook of package discovery/watch: what it needs of a
// Client beyond the public API to keep it current by watching what changes
// discovery. Watching lives in that package so that a program that imports
// only discovery does not link client-go's informers and dynamic and
// metadata clients; what it does is reported here, in Stats and Watching,
// beside the rest of the client's work. It is for that package: other code
// has no use for it.
type WatchHook struct{ c *Client }

// WatchHook returns c's hook for discovery/watch.
func (c *Client) WatchHook() WatchHook { return WatchHook{c} }

// Connection is the client's HTTP client for watches, with a config for
// client-go's dynamic and metadata clients over it: no overall timeout (a
// watch lasts minutes), and its requests counted in Stats.WatchRequests
// instead of Requests.
func (h WatchHook) Connection() (*http.Client, *rest.Config) {
	c := h.c
	hc := *c.http.HC
	hc.Timeout = 0
	next := hc.Transport
	if ct, ok := next.(countingTransport); ok {
		next = ct.next
	}
	hc.Transport = countingTransport{next: next, n: &c.stats.watchRequests}
	cfg := &rest.Config{Host: c.http.Base.String(), UserAgent: httpx.UserAgent}
	if c.config != nil {
		cfg.UserAgent = c.config.UserAgent
	}
	return &hc, cfg
}

// Logger is the client's logger (WithLogger).
func (h WatchHook) Logger() *slog.Logger { return h.c.opts.logger }

// Count adds to Stats.WatchEvents and Stats.WatchTriggers.
func (h WatchHook) Count(events, triggers int64) {
	h.c.stats.watchEvents.Add(events)
	h.c.stats.watchTriggers.Add(triggers)
}

// Forbidden sets Stats.WatchForbidden: watching was refused.
func (h WatchHook) Forbidden() { h.c.stats.watchForbidden.Store(true) }

// Watching counts a watch that starts (+1) or stops (-1) watching, its
// informers synced, for Client.Watching.
func (h WatchHook) Watching(delta int32) { h.c.stats.watching.Add(delta) }
