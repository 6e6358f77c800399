package discoverytest

import (
	"net/http"
	"sync"
	"time"
)

// Request is one request the Server answered, as a test asserts on it.
type Request struct {
	Method      string
	Path        string
	Query       string // raw query, without "?"
	Accept      string
	IfNoneMatch string
	Status      int
	Bytes       int64  // body bytes written
	Backend     string // ID of the backend that answered
	Aborted     bool   // the connection was dropped (an injected reset or truncation)
	Duration    time.Duration
}

// Stats counts what a Server answered since it started or was last reset.
type Stats struct {
	Requests    int
	NotModified int // 304s
	Errors      int // status >= 400, or aborted
	Bytes       int64
}

type requestLog struct {
	mu      sync.Mutex
	entries []Request
}

func (l *requestLog) record(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, r)
}

func (l *requestLog) snapshot() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.entries...)
}

func (l *requestLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}

// backendHeader carries the answering backend's ID from the router to the
// log, inside this process only; it is removed before the response leaves.
const backendHeader = "X-Discoverytest-Backend"

// wrap logs every request. The response is buffered and sent only after
// its entry is logged, so a client that has seen any of a response finds the
// request in the log (the log is what tests count requests with).
func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
		entry := Request{
			Method:      r.Method,
			Path:        r.URL.Path,
			Query:       r.URL.RawQuery,
			Accept:      r.Header.Get("Accept"),
			IfNoneMatch: r.Header.Get("If-None-Match"),
		}
		var aborted any
		func() {
			defer func() { aborted = recover() }()
			next.ServeHTTP(rec, r)
		}()
		entry.Status, entry.Bytes, entry.Backend = rec.code, int64(rec.body.Len()), rec.header.Get(backendHeader)
		entry.Aborted = aborted != nil
		entry.Duration = time.Since(start)
		l.record(entry)

		rec.header.Del(backendHeader)
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.code)
		_, _ = w.Write(rec.body.Bytes())
		if aborted != nil {
			// An injected reset or truncation: the partial body goes out,
			// then the connection is dropped.
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			panic(aborted)
		}
	})
}
