// Replicas sharing OpenAPI documents through Redis.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/redisstore"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	const server = "https://127.0.0.1:6443"
	store, err := redisstore.New(rdb, server, redisstore.WithTTL(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	c, err := openapi3.NewForHTTPClient(nil, server, openapi3.WithDiskCache(store))
	if err != nil {
		log.Fatal(err)
	}
	docs, err := c.FetchAll(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(docs), "documents,", store.Stats().Hits, "from Redis")
}
