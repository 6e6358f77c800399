// Package lightcluster is the embedded fake cluster of the commands that
// read discovery only (api-resources): internal/docserver, the core
// module's light fake, served in this process on loopback. It serves what
// examples/fake-apiserver serves for --crds 200 --groups 20 on /api, /apis
// and /version, byte for byte with the same ETags (internal/withfake/docserver
// checks that), so that the command's output and its disk cache are the
// same on either; it links 83 packages more than the command would (for
// docserver's OpenAPI v3: kube-openapi's handler3, gnostic, protobuf), where
// the real-handler fake is about 570 more and a second build. See
// examples/internal/cli/embedded.go.
package lightcluster

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// CRDs and Groups are the synthetic CRDs the cluster adds to the recorded
// v1.36.3 discovery, as the child-process fake's --crds and --groups.
const (
	CRDs   = 200
	Groups = 20
)

// Start serves the cluster on a loopback port and returns its base URL and
// a function that stops it. stderr is not written to: the server logs
// nothing.
func Start(io.Writer) (url string, stop func(), err error) {
	s, err := docserver.NewServer(docserver.WithCRDs(CRDs, Groups))
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l) // http.ErrServerClosed, or a failed listener the command's requests then report
	}()
	return "http://" + l.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}
