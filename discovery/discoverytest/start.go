package discoverytest

import (
	"net/http/httptest"
	"testing"
)

// Start serves a new Server on loopback for the rest of the test, as
// httptest.NewServer does, and returns it with its base URL.
func Start(tb testing.TB, opts ...Option) (*Server, string) {
	tb.Helper()
	srv, err := NewServer(opts...)
	if err != nil {
		tb.Fatalf("discoverytest: %v", err)
	}
	ts := httptest.NewServer(srv)
	tb.Cleanup(func() {
		srv.StopWatches() // or Close would wait for the watches of clients still running
		ts.Close()
	})
	return srv, ts.URL
}
