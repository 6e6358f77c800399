package discoverytest

import (
	"net"
	"net/http"
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
	stopBackends, err := srv.ServeBackends("127.0.0.1")
	if err != nil {
		tb.Fatalf("discoverytest: %v", err)
	}
	ts := httptest.NewServer(srv)
	tb.Cleanup(func() {
		srv.Close() // or ts.Close would wait for the watches of clients still running
		ts.Close()
		stopBackends()
	})
	return srv, ts.URL
}

// ServeBackends serves each backend on a listener of its own on host (an
// IP address; port chosen by the system), as Start does, and returns a
// function that stops them. It sets each Backend.URL, and so the
// peer-advertise-address of its identity lease; call it before serving
// the Server, and once.
func (s *Server) ServeBackends(host string) (stop func(), err error) {
	var servers []*httptest.Server
	stop = func() {
		for _, bs := range servers {
			bs.Close()
		}
	}
	for _, b := range s.backends {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			stop()
			return nil, err
		}
		// The URL is known, and stored, before anything is served.
		bs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: s.backendHandler(b)}}
		u := "http://" + ln.Addr().String()
		b.url.Store(&u)
		bs.Start()
		servers = append(servers, bs)
	}
	return stop, nil
}
