// Package redisstore is a diskcache.Store in Redis, for replicas of a
// sharded controller, or any processes on several hosts, that share
// discovery and OpenAPI documents through a Redis they already run
// (GitOps engines do): what one replica fetched, the others read, so that a
// fleet fetches each distinct document from the API server once.
//
// It lives in its own module, github.com/kubeatlas/kubeatlas/redisstore,
// so that users of the core module do not inherit go-redis.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(rdb, restConfig.Host)
//	oc, err := openapi3.New(restConfig, openapi3.WithDiskCache(store))
//
// A store is for one API server (New names it): a hash of it follows the
// prefix (WithPrefix) in every Redis key, and the server is part of every
// value, so that two clusters never share an entry. A key's Name is hashed
// (SHA-256) after them, so any Name is fine; as in diskcache, a Name holds
// one value, in one Version, so that a new Version replaces the old value
// (openapi3 names an OpenAPI document by its path and Accept, with its
// ?hash= as the Version). Values are verified on every read: a header with
// a magic number and version, the server, the full key, the lengths, and a
// SHA-256 of it all; a value of another Version is a plain miss; a
// damaged, truncated, oversized or foreign value (another Name's or
// server's, another program's, not a string) is a miss, and is removed,
// unless another process has written a good value meanwhile. As anyone
// who can write to the Redis can write a value that passes those checks, a
// value whose key names its content is checked against it too (WithVerify;
// by default VerifyContent: the SHA-512 of a JSON OpenAPI document at a
// ?hash= URL). What a value holds is used only once the API server has
// confirmed it, since a value can be another cluster's true documents
// filed under this server's key: discovery checks every document it reads
// back from a store other than a *diskcache.Cache against its ETag, and
// answers it only after the server answered 304 to its own requests
// conditional on those ETags (a warm start costs /api and /apis, both 304
// when nothing changed); openapi3 reads the root from the server (it names
// the ?hash= each document is checked against) and keeps no protobuf
// document here, whose bytes no hash names. Like diskcache, the store does
// not deduplicate identical values under different keys.
//
// Reads and removals are bounded whatever another program wrote: Get reads
// no more of a value than Put may have stored for its key (the limit, the
// key, the header; a longer value costs one read of 1 MiB before it is
// dropped), and a removal does bounded work on the Redis side (a length
// and at most 4 KiB compared in a short script, then UNLINK, which frees
// the memory off Redis's main thread), so that a foreign 400 MB value
// neither costs a reader 400 MB nor blocks the Redis's other clients.
//
// The bound is the TTL (WithTTL, 24 h by default), renewed by every read,
// so that what a fleet uses stays and the rest goes, together with the
// server's maxmemory and maxmemory-policy: with an evicting policy
// (allkeys-lru, volatile-lru, ...) Redis makes room by itself; with
// noeviction, the default, a full Redis refuses writes and Put returns its
// error. Puts over WithMaxValueBytes (64 MiB by default) are refused.
//
// Store's methods take no context: each is bounded by WithTimeout (2 s by
// default), if the client honours contexts (ContextTimeoutEnabled), else by
// the client's own timeouts. A Redis that does not answer makes Get a miss
// and Delete a no-op, logged when the trouble starts and when it ends; Put
// returns the error. The store holds no lock and starts no goroutine.
// It needs Redis 4.0 or later (UNLINK).
package redisstore
