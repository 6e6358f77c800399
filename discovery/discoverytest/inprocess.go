package discoverytest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// InProcessURL is the base URL StartInProcess returns. Its host does not
// resolve: only the returned client reaches the server.
const InProcessURL = "http://discoverytest.invalid"

// StartInProcess serves a new Server for the rest of the test over
// in-memory connections (net.Pipe) instead of loopback, and returns it
// with an HTTP client that reaches it and the base URL to use with that
// client (InProcessURL). Requests go through a real http.Server and
// http.Transport, so faults, watches, gzip and dropped connections behave
// as with Start.
//
// Use it inside a testing/synctest bubble, where Start cannot be used: a
// goroutine waiting on a loopback socket is not durably blocked, so
// synctest.Wait never returns and fake time never advances. Over the pipe
// the server's handlers, the client's connections and the server's timers
// (Fault.Latency, WithDiscoveryDelay, bookmarks) all live in the bubble and
// run on its fake clock. Call StartInProcess inside the function given to
// synctest.Test, with that function's t, so that everything it starts
// belongs to the bubble; its cleanup (run in the bubble before
// synctest.Test returns) stops the watches, closes the server and the
// client's idle connections, and every goroutine it started ends. Outside
// a bubble it works too, but Start is the ordinary choice there.
//
// Build clients with the returned client (discovery.NewForHTTPClient(hc,
// base), or a rest.Config with hc's Transport); http.DefaultClient cannot
// reach the server. Each connection has a RemoteAddr of its own
// ("pipe-1", "pipe-2", ...), so Sticky routing pins each connection to a
// backend as it does over TCP.
func StartInProcess(tb testing.TB, opts ...Option) (*Server, *http.Client, string) {
	tb.Helper()
	srv, err := NewServer(opts...)
	if err != nil {
		tb.Fatalf("discoverytest: %v", err)
	}
	l := newPipeListener()
	hs := &http.Server{Handler: srv}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(l) // http.ErrServerClosed once the cleanup closes hs
	}()
	tr := &http.Transport{DialContext: l.dial} // no Proxy: the host is not real
	tb.Cleanup(func() {
		srv.Close()    // open watches end, so their handlers return
		_ = hs.Close() // closes l and every connection; Serve returns
		tr.CloseIdleConnections()
		<-served
	})
	return srv, &http.Client{Transport: tr}, InProcessURL
}

// pipeListener is a net.Listener whose connections are net.Pipes made by
// dial.
type pipeListener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	n         atomic.Uint64
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

var errListenerClosed = errors.New("discoverytest: in-process server closed")

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr("discoverytest") }

// dial hands the server one end of a new pipe and returns the other.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	remote := pipeAddr("pipe-" + strconv.FormatUint(l.n.Add(1), 10))
	select {
	case l.conns <- addrConn{Conn: server, local: l.Addr(), remote: remote}:
		return addrConn{Conn: client, local: remote, remote: l.Addr()}, nil
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	case <-l.closed:
		client.Close()
		server.Close()
		return nil, errListenerClosed
	}
}

type pipeAddr string

func (pipeAddr) Network() string  { return "pipe" }
func (a pipeAddr) String() string { return string(a) }

// addrConn gives a pipe end the addresses of its connection.
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr  { return c.local }
func (c addrConn) RemoteAddr() net.Addr { return c.remote }
