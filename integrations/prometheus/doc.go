// Package prometheus exposes kubeatlas's own metrics to Prometheus: a
// [Collector] reads the counters kubeatlas's packages already keep —
// discovery.Client.Stats (requests, bytes, 304s, refreshes and their
// outcome, disk loads), the current snapshot (generation, age,
// completeness), discovery/watch's Watcher.Stats (its requests, events,
// and whether it watches),
// restmapper.Mapper.Stats (hits, misses, the refreshes misses made) and
// diskcache.Cache.Stats (hits, misses, writes, corrupt entries,
// evictions, usage) — when scraped, labelled by the name each source was
// added under.
//
//	col := prometheus.NewCollector()
//	_ = col.Add("prod", prometheus.Source{Discovery: dc, Watch: w, Mapper: m, DiskCache: cache})
//	registry.MustRegister(col)
//
// integrations/controllerruntime registers one with controller-runtime's
// registry for the mappers it makes, so a manager's /metrics has them.
//
// kubeatlas's HTTP requests are counted elsewhere too, where client-go's
// are: they are reported to client-go's metrics adapters
// (k8s.io/client-go/tools/metrics) as client-go's rest.Request reports its
// own, so a program's rest_client_requests_total (controller-runtime's, or
// component-base's) includes them, with no collector at all.
//
// It lives in the integrations module, so that the core does not link
// Prometheus's client.
//
// # Files
//
// collector.go: [Collector], [Source], the metrics and their help.
package prometheus
