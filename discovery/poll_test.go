package discovery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestPollReturnsWhenItsContextEnds: Poll returns within a moment of its
// context ending while a refresh of its is in flight on a server that
// never answers (accepts, sends no headers), and leaves nothing running.
func TestPollReturnsWhenItsContextEnds(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		<-r.Context().Done()
	}))
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	before := runtime.NumGoroutine()
	c, err := discovery.NewForHTTPClient(&http.Client{Transport: tr}, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Poll(ctx, 10*time.Millisecond) }()
	for deadline := time.Now().Add(10 * time.Second); requests.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Poll sent no request within 10s")
		}
	}
	cancel()
	ended := time.Now()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Poll did not return within 30s of its context ending")
	}
	took := time.Since(ended)
	t.Logf("Poll returned %v after its context ended", took)
	if took > 500*time.Millisecond {
		t.Errorf("Poll returned %v after its context ended, want within 500ms (the aim: 100ms)", took)
	}
	tr.CloseIdleConnections()
	// The server's goroutines end once the client's connections close.
	for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before Poll, %d a second after it returned:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
	}
}
