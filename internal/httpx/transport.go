package httpx

import (
	"net/http"
	"sync/atomic"
)

// Counting counts every request sent through it in N: retries and
// redirects too.
type Counting struct {
	Next http.RoundTripper
	N    *atomic.Int64
}

func (t Counting) RoundTrip(req *http.Request) (*http.Response, error) {
	t.N.Add(1)
	return t.Next.RoundTrip(req)
}

// WrappedRoundTripper is the transport below (utilnet.RoundTripperWrapper):
// utilnet.CloseIdleConnectionsFor reaches it through this, for requests
// that want a new connection, and discovery/watch counts its own requests
// below the client's counter.
func (t Counting) WrappedRoundTripper() http.RoundTripper { return t.Next }

// Closing closes each request's connection after it (req.Close), so that
// the next request opens a new one, which a load balancer may send to
// another server.
type Closing struct{ Next http.RoundTripper }

func (t Closing) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Close = true
	return t.Next.RoundTrip(req)
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the
// transport below.
func (t Closing) WrappedRoundTripper() http.RoundTripper { return t.Next }
