package discovery

import (
	"context"
	"crypto/sha512"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

// TestNoLockHeldAcrossUsersCode pins "no lock of ours is held across a
// call into code we do not own": the logger's handler, the disk store and
// subscribers each check, when called, that every lock of the client is
// free (TryLock). Before, failureLog held its lock across the handler and
// the disk writes held a turn across Store.Put.
func TestNoLockHeldAcrossUsersCode(t *testing.T) {
	var client atomic.Pointer[Client]
	var checks atomic.Int64
	free := func(where string) {
		c := client.Load()
		if c == nil {
			return
		}
		checks.Add(1)
		locks := map[string]*sync.Mutex{"the refresher's": &c.machine.mu, "the disk writer's": &c.disk.written.mu}
		if l := c.log.Load(); l != nil {
			locks["the failure log's"] = &l.mu
		}
		c.machine.mu.Lock()
		for i, s := range c.machine.subscribers() {
			locks[fmt.Sprintf("subscriber %d's", i)] = &s.mu
		}
		c.machine.mu.Unlock()
		for name, mu := range locks {
			if !lockedWithin(mu, time.Second) {
				t.Errorf("%s lock is held while %s runs", name, where)
				continue
			}
			mu.Unlock()
		}
	}
	var down atomic.Bool
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if down.Load() {
			return nil, fmt.Errorf("connection refused")
		}
		body := `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[{"metadata":{"name":"example.com"},"versions":[{"version":"v1","resources":[{"resource":"things","responseKind":{"kind":"Thing"},"scope":"Namespaced","verbs":["get"]}]}]}]}`
		if r.URL.Path == "/api" {
			body = `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[]}`
		}
		h := http.Header{"Content-Type": {"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}, "Etag": {fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512([]byte(body))))}}
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})}
	store := &diskcachetest.Memory{Before: func(op string, _ diskcache.Key) { free("the store's " + op) }}
	logger := slog.New(handlerFunc(func() { free("the log handler") }))
	c, err := NewForHTTPClient(hc, "https://locks.invalid", WithDiskCache(store), WithLogger(logger), WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	client.Store(c)
	done := make(chan struct{}, 8)
	c.Subscribe(func(Change) { free("a subscriber"); done <- struct{}{} })
	ctx := context.Background()
	if _, err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	down.Store(true)
	if _, err := c.Refresh(ctx); err == nil {
		t.Fatal("a refresh of a server that is down did not fail")
	}
	down.Store(false)
	if _, err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := checks.Load(); n < 5 {
		t.Errorf("only %d calls of users' code were checked; the test no longer reaches them", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// handlerFunc is a slog handler that calls fn on each record.
type handlerFunc func()

func (h handlerFunc) Enabled(context.Context, slog.Level) bool  { return true }
func (h handlerFunc) Handle(context.Context, slog.Record) error { h(); return nil }
func (h handlerFunc) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h handlerFunc) WithGroup(string) slog.Handler             { return h }

// lockedWithin locks mu, trying until d has passed. Another goroutine may
// hold a lock for a moment while users' code runs on this one (the disk
// writer's, while a subscriber runs): it lets go. A lock held by the
// goroutine that runs users' code, the fault the test is after, is never
// let go while that code (this check) runs. A single TryLock failed 2 runs
// in 150 under -race on the first.
func lockedWithin(mu *sync.Mutex, d time.Duration) bool {
	for deadline := time.Now().Add(d); !mu.TryLock(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
