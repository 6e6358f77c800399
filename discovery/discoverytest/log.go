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

func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cw := &countingWriter{ResponseWriter: w}
		entry := Request{
			Method:      r.Method,
			Path:        r.URL.Path,
			Query:       r.URL.RawQuery,
			Accept:      r.Header.Get("Accept"),
			IfNoneMatch: r.Header.Get("If-None-Match"),
		}
		defer func() {
			entry.Status, entry.Bytes, entry.Backend = cw.status(), cw.bytes, cw.backend
			entry.Duration = time.Since(start)
			if p := recover(); p != nil {
				entry.Aborted = true
				l.record(entry)
				panic(p)
			}
			l.record(entry)
		}()
		next.ServeHTTP(cw, r)
	})
}

type countingWriter struct {
	http.ResponseWriter
	code    int
	bytes   int64
	backend string
}

func (c *countingWriter) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

func (c *countingWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
		c.backend = c.Header().Get(backendHeader)
		c.Header().Del(backendHeader)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.WriteHeader(http.StatusOK)
	}
	n, err := c.ResponseWriter.Write(b)
	c.bytes += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
