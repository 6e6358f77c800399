package prometheus

import (
	"fmt"
	"slices"
	"sync"

	prom "github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Source is what one client of kubeatlas exposes; any field may be nil.
type Source struct {
	Discovery *discovery.Client
	// Watch is the discovery/watch Watcher that keeps Discovery current,
	// if any (watch.New, then Run).
	Watch     *watch.Watcher
	Mapper    *restmapper.Mapper
	DiskCache *diskcache.Cache
}

// Option configures a Collector.
type Option func(*Collector)

// WithClock sets the clock that snapshot ages are measured with. Default:
// the real clock.
func WithClock(c clock.PassiveClock) Option { return func(col *Collector) { col.clock = c } }

// Collector is a prometheus.Collector of the counters kubeatlas's packages
// keep (discovery.Client.Stats, restmapper.Mapper.Stats,
// diskcache.Cache.Stats) and of the current snapshot's generation and age,
// for the sources added to it, each labelled client="<its name>". It reads
// them when scraped: nothing is counted twice, and the clients do no work
// for it between scrapes.
type Collector struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	sources map[string]Source
}

var _ prom.Collector = (*Collector)(nil)

// NewCollector returns a Collector with no sources.
func NewCollector(opts ...Option) *Collector {
	c := &Collector{clock: clock.RealClock{}, sources: map[string]Source{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Add exposes s under the label client=name. A name already added is an
// error: two sources under one name would be two series with the same
// labels, which a scrape refuses.
func (c *Collector) Add(name string, s Source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sources[name]; ok {
		return fmt.Errorf("kubeatlas collector: a source named %q was already added", name)
	}
	c.sources[name] = s
	return nil
}

// Remove stops exposing the source added under name.
func (c *Collector) Remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sources, name)
}

type metric struct {
	desc *prom.Desc
	kind prom.ValueType
}

func newMetric(name, help string, kind prom.ValueType, labels ...string) metric {
	return metric{prom.NewDesc("kubeatlas_"+name, help, append([]string{"client"}, labels...), nil), kind}
}

var (
	discoveryRequests = newMetric("discovery_requests_total",
		"HTTP requests discovery sent (retries and redirects included; watches are in kubeatlas_discovery_watch_requests_total).", prom.CounterValue)
	discoveryBytes = newMetric("discovery_response_bytes_total",
		"Response body bytes discovery read.", prom.CounterValue)
	discoveryNotModified = newMetric("discovery_not_modified_total",
		"304 Not Modified answers to discovery's conditional requests.", prom.CounterValue)
	discoveryCacheHits = newMetric("discovery_snapshot_cache_hits_total",
		"Snapshot calls answered from the current snapshot without waiting for the network.", prom.CounterValue)
	discoveryRefreshes = newMetric("discovery_refreshes_total",
		"Discovery refreshes run, by result: success (a snapshot) or error (none).", prom.CounterValue, "result")
	discoveryRefreshSeconds = newMetric("discovery_refresh_seconds_total",
		"Time spent refreshing discovery.", prom.CounterValue)
	discoveryDiskLoads = newMetric("discovery_disk_loads_total",
		"Snapshots read from the disk cache (warm starts).", prom.CounterValue)
	discoveryResamples = newMetric("discovery_resamples_total",
		"Refreshes that asked again on a new connection to tell a change from API servers that disagree.", prom.CounterValue)
	snapshotGeneration = newMetric("discovery_snapshot_generation",
		"Generation of the current discovery snapshot (grows by one each time discovery changes).", prom.GaugeValue)
	snapshotAge = newMetric("discovery_snapshot_age_seconds",
		"Time since the server last confirmed the current discovery snapshot.", prom.GaugeValue)
	snapshotComplete = newMetric("discovery_snapshot_complete",
		"1 when the current discovery snapshot has every group-version, 0 when some failed.", prom.GaugeValue)
	watchRequests = newMetric("discovery_watch_requests_total",
		"List and watch requests of discovery/watch: each restart of a watch is one more.", prom.CounterValue)
	watchEvents = newMetric("discovery_watch_events_total",
		"CRD and APIService events discovery/watch received.", prom.CounterValue)
	watchTriggers = newMetric("discovery_watch_triggers_total",
		"Watch events that could change discovery and so asked for a refresh.", prom.CounterValue)
	watching = newMetric("discovery_watching",
		"1 while discovery/watch keeps discovery current by watching (synced), 0 otherwise (polling, or not running).", prom.GaugeValue)
	watchForbidden = newMetric("discovery_watch_forbidden",
		"1 when watching CRDs and APIServices was refused (403), so discovery is polled instead.", prom.GaugeValue)

	mapperLookups = newMetric("restmapper_lookups_total",
		"REST mapper lookups, by result: hit, miss (nothing found) or error (no discovery).", prom.CounterValue, "result")
	mapperMissRefreshes = newMetric("restmapper_miss_refreshes_total",
		"Discovery refreshes made by lookups that found nothing.", prom.CounterValue)
	mapperStaleRefreshes = newMetric("restmapper_stale_refreshes_total",
		"Discovery refreshes made by lookups without a version, when discovery was last validated more than the miss refresh interval before.", prom.CounterValue)

	diskHits   = newMetric("diskcache_hits_total", "Disk cache reads that found a valid entry.", prom.CounterValue)
	diskMisses = newMetric("diskcache_misses_total",
		"Disk cache reads that found no valid entry (corrupt ones included).", prom.CounterValue)
	diskWrites      = newMetric("diskcache_writes_total", "Disk cache entries written.", prom.CounterValue)
	diskWriteErrors = newMetric("diskcache_write_errors_total", "Disk cache writes that failed.", prom.CounterValue)
	diskCorrupt     = newMetric("diskcache_corrupt_total",
		"Disk cache entries found corrupt (torn, foreign or failing their checksum) and dropped.", prom.CounterValue)
	diskEvictions = newMetric("diskcache_evictions_total", "Disk cache entries evicted to stay within the cache's bounds.", prom.CounterValue)
	diskBytes     = newMetric("diskcache_bytes", "Size of the disk cache's entries, as this process knows them.", prom.GaugeValue)
	diskEntries   = newMetric("diskcache_entries", "Number of the disk cache's entries, as this process knows them.", prom.GaugeValue)

	allMetrics = []metric{
		discoveryRequests, discoveryBytes, discoveryNotModified, discoveryCacheHits, discoveryRefreshes,
		discoveryRefreshSeconds, discoveryDiskLoads, discoveryResamples, snapshotGeneration, snapshotAge,
		snapshotComplete, watchRequests, watchEvents, watchTriggers, watching, watchForbidden,
		mapperLookups, mapperMissRefreshes, mapperStaleRefreshes,
		diskHits, diskMisses, diskWrites, diskWriteErrors, diskCorrupt, diskEvictions, diskBytes, diskEntries,
	}
)

// Describe sends the descriptions of every metric the Collector may send.
func (c *Collector) Describe(ch chan<- *prom.Desc) {
	for _, m := range allMetrics {
		ch <- m.desc
	}
}

// Collect reads every source's counters. The sources are copied first, so
// that no lock is held while the channel is written to.
func (c *Collector) Collect(ch chan<- prom.Metric) {
	c.mu.Lock()
	names := make([]string, 0, len(c.sources))
	for name := range c.sources {
		names = append(names, name)
	}
	sources := make([]Source, len(names))
	slices.Sort(names)
	for i, name := range names {
		sources[i] = c.sources[name]
	}
	c.mu.Unlock()
	for i, s := range sources {
		name := names[i]
		send := func(m metric, v float64, labels ...string) {
			ch <- prom.MustNewConstMetric(m.desc, m.kind, v, append([]string{name}, labels...)...)
		}
		if d := s.Discovery; d != nil {
			st := d.Stats()
			send(discoveryRequests, float64(st.Requests))
			send(discoveryBytes, float64(st.Bytes))
			send(discoveryNotModified, float64(st.NotModified))
			send(discoveryCacheHits, float64(st.CacheHits))
			send(discoveryRefreshes, float64(st.Refreshes-st.RefreshErrors), "success")
			send(discoveryRefreshes, float64(st.RefreshErrors), "error")
			send(discoveryRefreshSeconds, st.RefreshTime.Seconds())
			send(discoveryDiskLoads, float64(st.DiskLoads))
			send(discoveryResamples, float64(st.Resamples))
			// No snapshot yet: no generation or age, rather than a
			// made-up zero that would read as "just confirmed".
			if snap := d.Current(); snap != nil {
				send(snapshotGeneration, float64(snap.Generation()))
				send(snapshotAge, max(c.clock.Since(snap.Validated()).Seconds(), 0))
				send(snapshotComplete, boolValue(snap.Err() == nil))
			}
		}
		if w := s.Watch; w != nil {
			st := w.Stats()
			send(watchRequests, float64(st.Requests))
			send(watchEvents, float64(st.Events))
			send(watchTriggers, float64(st.Triggers))
			send(watchForbidden, boolValue(st.Forbidden))
			send(watching, boolValue(st.Watching))
		}
		if m := s.Mapper; m != nil {
			st := m.Stats()
			send(mapperLookups, float64(st.Hits), "hit")
			send(mapperLookups, float64(st.Misses), "miss")
			send(mapperLookups, float64(st.Errors), "error")
			send(mapperMissRefreshes, float64(st.MissRefreshes))
			send(mapperStaleRefreshes, float64(st.StaleRefreshes))
		}
		if dc := s.DiskCache; dc != nil {
			st := dc.Stats()
			send(diskHits, float64(st.Hits))
			send(diskMisses, float64(st.Misses))
			send(diskWrites, float64(st.Writes))
			send(diskWriteErrors, float64(st.WriteErrors))
			send(diskCorrupt, float64(st.Corrupt))
			send(diskEvictions, float64(st.Evictions))
			bytes, entries := dc.Usage()
			send(diskBytes, float64(bytes))
			send(diskEntries, float64(entries))
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
