// Package diskcache is a bounded, checksummed, multi-process-safe store of
// HTTP responses and documents on disk, the cache KEP-2896 promised for
// OpenAPI v3: kubectl's ~/.kube/cache/http keeps every superseded ?hash=
// document forever, and its discovery cache is hundreds of files.
//
// A Cache serves one API server from its own directory (ClusterDir names
// it from the server URL, so no server name can reach outside the root).
// Entries are written atomically (temporary file, then rename; no fsync),
// verified on every read (regular files only, never a link, FIFO or
// device; CRC-32C, lengths, the stored key), and a torn, truncated or
// foreign file is a miss that is removed. An OpenAPI document's file is
// named by its path and Accept, not its ?hash=, so a new hash replaces the
// old file in any process: one file per live document. Opening a cache
// tidies it (stale temporary files, files that are not entries). Total size
// and entry count are bounded: compaction, under an advisory lock so that
// one process compacts at a time, drops the least recently used entries.
// Recency of reads is kept in memory, not written to disk per read. Write
// failures are returned, counted, and logged once.
//
// Cache implements github.com/gregjones/httpcache.Cache; NewTransport puts
// an HTTP cache on it whose keys drop client-go's timeout= parameter and
// include the Accept header. OpenAPI documents at ?hash= URLs, immutable
// by KEP-2896, skip httpcache: a fresh entry is the answer, a new response
// is stored as it is read (without httpcache's three copies), and a stale
// one is revalidated by its ETag; the entries are in httpcache's form.
// Nothing is stored that fails its checks: a JSON document's SHA-512 must
// be its ?hash= (VerifyHash), other JSON must parse, an empty 200 is never
// stored, and WithCheck adds the caller's own. discovery.WithDiskCache keeps a cluster's
// discovery in one entry for warm starts; openapi3.WithDiskCache serves
// unchanged documents without a request. diskcachetest.Run is an
// acceptance suite any httpcache.Cache can run.
package diskcache
