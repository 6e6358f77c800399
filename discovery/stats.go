package discovery

import (
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
	// DiskLoads counts snapshots read from the disk cache (warm starts),
	// also one from a store other than a *diskcache.Cache that is read
	// but not yet confirmed by the server (see WithDiskCache).
	DiskLoads int64
	// SurfaceHits counts cold starts that the server confirmed (two 304s)
	// for a surface its Surfaces table offered (WithSurfaces).
	SurfaceHits int64
	// Resamples counts refreshes whose discovery differed from the one
	// before and that asked again on a new connection, to tell a change
	// from servers that disagree behind one URL (see Snapshot.Mixed).
	Resamples int64
}

type counters struct {
	requests, bytes, notModified, cacheHits, refreshes, refreshErrors, refreshNanos, surfaceHits, resamples atomic.Int64
}

// diskLoads is Stats.DiskLoads: none without a disk cache.
func (c *Client) diskLoads() int64 {
	if c.disk == nil {
		return 0
	}
	return c.disk.loads.Load()
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		Requests:      c.stats.requests.Load(),
		Bytes:         c.stats.bytes.Load(),
		NotModified:   c.stats.notModified.Load(),
		CacheHits:     c.stats.cacheHits.Load(),
		Refreshes:     c.stats.refreshes.Load(),
		RefreshErrors: c.stats.refreshErrors.Load(),
		RefreshTime:   time.Duration(c.stats.refreshNanos.Load()),
		DiskLoads:     c.diskLoads(),
		SurfaceHits:   c.stats.surfaceHits.Load(),
		Resamples:     c.stats.resamples.Load(),
	}
}
