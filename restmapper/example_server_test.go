package restmapper_test

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"time"
)

// newExampleServer answers /api and /apis as a kube-apiserver v1.36.3 did:
// testdata/k8s-v1.36.3 holds the protobuf documents it served and their
// response headers (ETag included); a request naming the ETag gets a 304.
func newExampleServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		file := "testdata/k8s-v1.36.3" + r.URL.Path + ".v2.pb"
		body, err := os.ReadFile(file)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		raw, err := os.ReadFile(file + ".headers")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
		_, _ = tp.ReadLine() // the status line
		h, _ := tp.ReadMIMEHeader()
		for _, k := range []string{"Content-Type", "Etag", "Cache-Control", "Vary"} {
			w.Header().Set(k, h.Get(k))
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
}
