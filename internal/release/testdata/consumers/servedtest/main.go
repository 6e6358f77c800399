// A program that serves kubeatlas's discovery API on the fake API server,
// as a user's tests of a client of that API do: apiserver/servedtest is in
// the apiserver module, which requires the fake's.
package main

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/apiserver/servedtest"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

func main() {
	srv, err := discoverytest.NewServer(servedtest.WithServedAPI())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	url := ts.URL + "/apis/" + v1alpha1.GroupName + "/v1alpha1/apigroups/apps"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			fmt.Println("apigroups/apps served")
			return
		}
	}
	log.Fatal("apigroups/apps not served within 10s")
}
