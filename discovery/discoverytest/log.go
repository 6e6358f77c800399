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
	// Watch is true for a watch (?watch=true or 1). A watch is logged when its
	// status line goes out; Bytes grows as it sends, and Bytes and Duration
	// are final when it ends.
	Watch    bool
	Duration time.Duration
}

// Stats counts what a Server answered since it started or was last reset.
type Stats struct {
	Requests    int
	NotModified int // 304s
	Errors      int // status >= 400, or aborted
	Bytes       int64
	Watches     int // watch requests, open or ended
}

type requestLog struct {
	mu      sync.Mutex
	entries []*Request // a watch's entry changes while it streams
}

func (l *requestLog) record(r Request) *Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &r
	l.entries = append(l.entries, e)
	return e
}

// update changes a logged entry (still logged or reset away).
func (l *requestLog) update(e *Request, fn func(e *Request)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(e)
}

func (l *requestLog) snapshot() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Request, len(l.entries))
	for i, e := range l.entries {
		out[i] = *e
	}
	return out
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
// request in the log (the log is what tests count requests with). A watch
// cannot be buffered: it is logged as its status line goes out, and streams.
func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		entry := Request{
			Method:      r.Method,
			Path:        r.URL.Path,
			Query:       r.URL.RawQuery,
			Accept:      r.Header.Get("Accept"),
			IfNoneMatch: r.Header.Get("If-None-Match"),
		}
		if isWatch(r) {
			entry.Watch = true
			l.stream(next, w, r, entry, start)
			return
		}
		rec := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
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

// stream serves a watch through a writer that logs the entry when the
// status line goes out and passes every write and flush straight through.
func (l *requestLog) stream(next http.Handler, w http.ResponseWriter, r *http.Request, entry Request, start time.Time) {
	sw := &streamingResponse{ResponseWriter: w, log: l, template: entry, start: start}
	var aborted any
	func() {
		defer func() { aborted = recover() }()
		next.ServeHTTP(sw, r)
	}()
	switch {
	case sw.entry != nil:
	case aborted != nil:
		sw.template.Status, sw.template.Backend = http.StatusOK, w.Header().Get(backendHeader)
		sw.entry = l.record(sw.template) // nothing went out: the connection just drops
	default:
		sw.WriteHeader(http.StatusOK) // what net/http sends for a handler that wrote nothing
	}
	l.update(sw.entry, func(e *Request) {
		e.Bytes = sw.bytes
		e.Aborted = aborted != nil
		e.Duration = time.Since(start)
	})
	if aborted != nil {
		panic(aborted)
	}
}

// streamingResponse logs a watch at its status line and counts its bytes.
// It is used by one handler goroutine only.
type streamingResponse struct {
	http.ResponseWriter
	log      *requestLog
	template Request
	start    time.Time
	entry    *Request // nil until the status line is written
	bytes    int64
}

func (s *streamingResponse) WriteHeader(code int) {
	if s.entry != nil {
		return
	}
	h := s.ResponseWriter.Header()
	e := s.template
	e.Status, e.Backend, e.Duration = code, h.Get(backendHeader), time.Since(s.start)
	h.Del(backendHeader)
	s.entry = s.log.record(e)
	s.ResponseWriter.WriteHeader(code)
}

func (s *streamingResponse) Write(p []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	n, err := s.ResponseWriter.Write(p)
	s.bytes += int64(n)
	s.log.update(s.entry, func(e *Request) { e.Bytes = s.bytes })
	return n, err
}

func (s *streamingResponse) Flush() {
	s.WriteHeader(http.StatusOK)
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *streamingResponse) Unwrap() http.ResponseWriter { return s.ResponseWriter }
