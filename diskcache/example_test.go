package diskcache_test

import (
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// An HTTP cache on disk for one API server: a document at an immutable
// ?hash= URL is read from disk on the second request.
func ExampleNewTransport() {
	root, _ := os.MkdirTemp("", "kubeatlas-example")
	defer os.RemoveAll(root)

	srv := newExampleServer() // serves /openapi/v3/apis/apps/v1?hash=... as immutable
	defer srv.Close()
	cache, err := diskcache.Open(root, srv.URL, diskcache.WithMaxBytes(64<<20))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: diskcache.NewTransport(nil, cache)}
	for range 2 {
		resp, err := client.Get(srv.URL + "/openapi/v3/apis/apps/v1?hash=ABC")
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println("from cache:", resp.Header.Get("X-From-Cache") == "1")
	}
	_, entries := cache.Usage()
	fmt.Println("entries:", entries)
	// Output:
	// from cache: false
	// from cache: true
	// entries: 1
}
