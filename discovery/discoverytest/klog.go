package discoverytest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// WithLogger sends the server's log to l: what the real k8s.io/apiserver
// handlers log while the server builds or changes its content, one
// "Adding GroupVersion <group> <version> to ResourceManager" line per
// group-version (about 28 for a start with no CRDs, more with CRDs).
// Default (or nil): discarded, so that a test or program that embeds the
// fake prints nothing it did not ask for.
//
// Those handlers log through klog, which is process-wide. The first Server
// built in a process therefore takes klog's output (klog.SetOutput; its
// header lines unchanged): what a Server's own calls log goes to that
// Server's logger, every other line to standard error as klog would print
// it by default. A program that sets klog's logger (klog.SetLogger) keeps
// it, and gets the handlers' lines there instead.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.logger = l; return nil }
}

// handlerLog is where klog's lines go once a Server was built: one per
// process, because klog's state is.
var handlerLog klogRouter

// klogRouter is klog's output for INFO (every line reaches it once: klog
// writes a line to its severity's output and each one below it; the
// outputs above INFO are discarded). Lines that the real handlers log
// inside collect go to the logger of the Server that called it, once it
// holds no lock (logged.to); the rest to standard error, as klog's
// default; ERROR and FATAL lines, klog also writes to standard error
// itself (its stderrthreshold), so they are not written twice.
type klogRouter struct {
	install sync.Once
	calls   sync.Mutex             // held by collect, one server's call at a time
	to      atomic.Pointer[logged] // set while collect runs
}

// collect runs fn, a call into the real handlers, and returns what they
// logged through klog meanwhile, for the caller to send to its logger
// (logged.to) once it holds no lock: a logger is the user's code, and a
// slow one must not hold up this process's other Servers (calls is
// process-wide) nor the requests that wait for the Backend's lock.
func (r *klogRouter) collect(fn func()) *logged {
	r.install.Do(func() {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
		klog.SetOutputBySeverity("INFO", r)
	})
	lines := &logged{}
	r.calls.Lock()
	defer r.calls.Unlock()
	r.to.Store(lines)
	defer r.to.Store(nil)
	fn()
	return lines
}

// logged is the handlers' lines of one collect call.
type logged struct {
	mu      sync.Mutex // klog may write from more than one goroutine
	records []slog.Record
}

func (l *logged) add(r slog.Record) {
	l.mu.Lock()
	l.records = append(l.records, r)
	l.mu.Unlock()
}

// to sends the lines to logger (nil: discarded). Call it holding no lock.
func (l *logged) to(logger *slog.Logger) {
	if l == nil || logger == nil {
		return
	}
	l.mu.Lock()
	records := l.records
	l.records = nil
	l.mu.Unlock()
	for _, r := range records {
		if logger.Enabled(context.Background(), r.Level) {
			_ = logger.Handler().Handle(context.Background(), r)
		}
	}
}

// Write takes one line as klog formats it: "I1129 02:59:01.123456   4711
// handler.go:309] Adding GroupVersion apps v1 to ResourceManager".
func (r *klogRouter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	severity := p[0]
	msg, source := p, []byte(nil)
	if i := bytes.Index(p, []byte("] ")); i > 0 {
		header := p[:i]
		source = header[bytes.LastIndexByte(header, ' ')+1:]
		msg = p[i+2:]
	}
	if l := r.to.Load(); l != nil && fromHandlers(source) {
		level := slog.LevelInfo
		switch severity {
		case 'W':
			level = slog.LevelWarn
		case 'E', 'F':
			level = slog.LevelError
		}
		rec := slog.NewRecord(time.Now(), level, string(bytes.TrimSpace(msg)), 0)
		rec.AddAttrs(slog.String("source", string(source)))
		l.add(rec)
		return len(p), nil
	}
	if severity == 'E' || severity == 'F' {
		return len(p), nil // klog wrote it to standard error already
	}
	return os.Stderr.Write(p)
}

// fromHandlers reports whether a klog line's file:line is in the real
// aggregated discovery handlers (k8s.io/apiserver's
// endpoints/discovery/aggregated), the only ones that log while a Server
// publishes its content.
func fromHandlers(source []byte) bool {
	file, _, _ := bytes.Cut(source, []byte(":"))
	return string(file) == "handler.go" || string(file) == "peer_aggregated_handler.go"
}
