package docserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// InProcessURL is the base URL StartInProcess returns. Its host does not
// resolve: only the returned client reaches the server.
const InProcessURL = "http://docserver.invalid"

// StartInProcess is discoverytest.StartInProcess for this server: a new
// Server, an HTTP client that reaches it, and the base URL to use with
// that client (InProcessURL). The client's transport calls the server's
// handler in the caller's goroutine, with no sockets and no goroutine of
// its own, so it works inside a testing/synctest bubble: Fault.Latency
// runs on the bubble's clock, and once synctest.Wait returns every request
// has been answered (and logged) or is waiting on that clock. A request
// whose context ends while the handler waits returns the context's error,
// as net/http's transport does; a Fault.ResetAfter or Truncate gives a
// body that ends in io.ErrUnexpectedEOF after its part. The test's cleanup
// closes the server, as discoverytest's closes its connections: requests
// under way end with an error, later ones fail at once, so that nothing
// the server holds outlives the test (or its bubble).
func StartInProcess(tb testing.TB, opts ...Option) (*Server, *http.Client, string) {
	tb.Helper()
	s, err := NewServer(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	open, closeServer := context.WithCancel(context.Background())
	tb.Cleanup(closeServer)
	return s, &http.Client{Transport: handlerTransport{h: s, open: open}}, InProcessURL
}

// handlerTransport serves requests with a handler in the caller's
// goroutine while open lasts.
type handlerTransport struct {
	h    http.Handler
	open context.Context
}

var errClosed = errors.New("docserver: in-process server closed")

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	if t.open.Err() != nil {
		return nil, errClosed
	}
	// The handler sees the request cancelled when its caller gives up or
	// the server closes.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(t.open, cancel)()
	rec := httptest.NewRecorder()
	aborted := false
	func() {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				aborted = true
			}
		}()
		t.h.ServeHTTP(rec, r.WithContext(ctx))
	}()
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	if t.open.Err() != nil {
		return nil, errClosed
	}
	resp := rec.Result()
	resp.Request = r
	if aborted {
		resp.Body = io.NopCloser(io.MultiReader(resp.Body, errReader{}))
	}
	return resp, nil
}

// errReader is the end of a dropped connection's body.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
