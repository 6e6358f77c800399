package discoverytest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Fault is a misbehaviour injected on requests to one path. Zero fields do
// nothing, so a Fault states only what goes wrong; several may combine (a
// latency before a 503, say).
type Fault struct {
	// Latency delays the response (or the failure) by this long, or until
	// the request's context ends.
	Latency time.Duration
	// Status answers with this code and a short JSON Status body instead of
	// serving the request (500, 503, 429, ...).
	Status int
	// RetryAfter sets the Retry-After header (whole seconds) on a Status answer.
	RetryAfter time.Duration
	// ResetAfter, when positive, serves the real response but drops the
	// connection after this many body bytes, as a crashed server would.
	ResetAfter int
	// Truncate, when positive, serves only the first Truncate body bytes
	// while the Content-Length promises the whole body.
	Truncate int
	// ContentType replaces the response's Content-Type.
	ContentType string
	// Oversize appends this many bytes of JSON whitespace to the body, which
	// keeps a JSON document valid but larger than a client may accept.
	Oversize int
	// Times limits the fault to the next Times matching requests; 0 means
	// every request until the fault is cleared.
	Times int
}

type faultRule struct {
	path  string // exact path, or a prefix when it ends in "*"
	fault Fault
	left  int // requests left when Times > 0
}

func (r *faultRule) matches(path string) bool {
	if prefix, ok := strings.CutSuffix(r.path, "*"); ok {
		return strings.HasPrefix(path, prefix)
	}
	return path == r.path
}

type faults struct {
	mu    sync.Mutex
	rules []*faultRule
}

func (f *faults) add(path string, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &faultRule{path: path, fault: fault, left: fault.Times})
}

func (f *faults) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// take returns the first active fault for path and counts it used.
func (f *faults) take(path string) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.rules {
		if !r.matches(path) {
			continue
		}
		if r.fault.Times > 0 {
			r.left--
			if r.left <= 0 {
				f.rules = append(f.rules[:i:i], f.rules[i+1:]...)
			}
		}
		return r.fault, true
	}
	return Fault{}, false
}

func (f *faults) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault, ok := f.take(r.URL.Path)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if fault.Latency > 0 {
			t := time.NewTimer(fault.Latency)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		if fault.Status != 0 {
			if fault.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(fault.RetryAfter/time.Second)))
			}
			// The Status a real server sends for the code, as JSON.
			status := apierrors.NewGenericServerResponse(fault.Status, r.Method, schema.GroupResource{}, "", "injected fault",
				int(fault.RetryAfter/time.Second), false).ErrStatus
			status.APIVersion, status.Kind = "v1", "Status"
			body, _ := json.Marshal(status)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(fault.Status)
			_, _ = w.Write(body)
			return
		}
		if fault.ResetAfter <= 0 && fault.Truncate <= 0 && fault.ContentType == "" && fault.Oversize <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		// Buffer the real response, then deliver it damaged.
		rec := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		body := rec.body.Bytes()
		if fault.Oversize > 0 {
			body = append(body, bytes.Repeat([]byte(" "), fault.Oversize)...)
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		if fault.ContentType != "" {
			w.Header().Set("Content-Type", fault.ContentType)
		}
		switch {
		case fault.ResetAfter > 0:
			w.Header().Del("Content-Length")
			abortAfter(w, rec.code, body[:min(fault.ResetAfter, len(body))])
		case fault.Truncate > 0:
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			abortAfter(w, rec.code, body[:min(fault.Truncate, len(body))])
		default:
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(rec.code)
			_, _ = w.Write(body)
		}
	})
}

// abortAfter sends the status and part of a body, then drops the connection:
// aborting the handler makes net/http close it without finishing the body.
func abortAfter(w http.ResponseWriter, code int, part []byte) {
	w.WriteHeader(code)
	_, _ = w.Write(part)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	panic(http.ErrAbortHandler)
}

type bufferedResponse struct {
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(code int) {
	if !b.wrote {
		b.code, b.wrote = code, true
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}
