package discoverytest

import (
	"net/http/httptest"
	"testing"
)

// Start serves a new Server on loopback for the rest of the test, as
// httptest.NewServer does, and returns it with its base URL. Each backend
// is served on a loopback listener of its own too (see Backend.URL).
func Start(tb testing.TB, opts ...Option) (*Server, string) {
	tb.Helper()
	srv, err := NewServer(opts...)
	if err != nil {
		tb.Fatalf("discoverytest: %v", err)
	}
	var servers []*httptest.Server
	for _, b := range srv.backends {
		// The URL is known, and stored, before anything is served.
		bs := httptest.NewUnstartedServer(srv.backendHandler(b))
		u := "http://" + bs.Listener.Addr().String()
		b.url.Store(&u)
		bs.Start()
		servers = append(servers, bs)
	}
	ts := httptest.NewServer(srv)
	tb.Cleanup(func() {
		srv.StopWatches() // or Close would wait for the watches of clients still running
		ts.Close()
		for _, bs := range servers {
			bs.Close()
		}
	})
	return srv, ts.URL
}
