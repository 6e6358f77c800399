// Package diskcache is a bounded, checksummed, multi-process-safe store of
// HTTP responses and documents on disk, the cache KEP-2896 promised for
// OpenAPI v3: kubectl's ~/.kube/cache/http keeps every superseded ?hash=
// document forever, and its discovery cache is hundreds of files.
//
// A Cache serves one API server from its own directory (ClusterDir names
// it from the server URL, so no server name can reach outside the root).
// Entries are written atomically (temporary file, then rename; no fsync),
// verified on every read (CRC-32C, lengths, the stored key), and a torn,
// truncated or foreign file is a miss that is removed. Total size and
// entry count are bounded: compaction, under an advisory lock so that one
// process compacts at a time, first drops OpenAPI documents superseded by a
// newer ?hash= of the same path, then the least recently used entries.
// Recency of reads is kept in memory, not written to disk per read.
//
// Cache implements github.com/gregjones/httpcache.Cache; NewTransport puts
// an HTTP cache on it whose keys drop client-go's timeout= parameter and
// include the Accept header. OpenAPI documents at ?hash= URLs, immutable
// by KEP-2896, skip httpcache: a fresh entry is the answer, a new response
// is stored as it is read (without httpcache's three copies), and a stale
// one is revalidated by its ETag; the entries are in httpcache's form. discovery.WithDiskCache keeps a cluster's
// discovery in one entry for warm starts; openapi3.WithDiskCache serves
// unchanged documents without a request. diskcachetest.Run is an
// acceptance suite any httpcache.Cache can run.
package diskcache
