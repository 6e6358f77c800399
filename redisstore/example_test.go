package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/redisstore"
)

// Replicas of a controller share OpenAPI documents through the Redis they
// already run: each replica makes its own client and store on the same
// Redis, and a document one of them fetched costs the others no request to
// the API server. (Not run: it needs a Redis and an API server.)
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "redis.gitops.svc:6379",
		ContextTimeoutEnabled: true, // so that WithTimeout bounds every call
	})
	defer rdb.Close()
	const server = "https://prod-eu-1.example.com:6443"
	store, err := redisstore.New(rdb, server, // a key space of its own for each server
		redisstore.WithTTL(6*time.Hour),
		redisstore.WithLogger(slog.Default()),
	)
	if err != nil {
		log.Fatal(err)
	}
	oc, err := openapi3.NewForHTTPClient(nil, server, openapi3.WithDiskCache(store))
	if err != nil {
		log.Fatal(err)
	}
	docs, err := oc.FetchAll(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	st := store.Stats()
	fmt.Printf("%d documents, %d from Redis\n", len(docs), st.Hits)
}
