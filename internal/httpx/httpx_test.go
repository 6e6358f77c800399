package httpx

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

func TestCheckRedirect(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the other host received %s with Authorization %q", r.URL, r.Header.Get("Authorization"))
	}))
	defer other.Close()
	var hops atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/loop":
			hops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusMovedPermanently)
		case "/here":
			http.Redirect(w, r, "/there", http.StatusMovedPermanently)
		case "/there":
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	hc := WithRedirectPolicy(srv.Client(), 3)
	for _, tc := range []struct {
		path    string
		wantErr bool
	}{{"/away", true}, {"/loop", true}, {"/here", false}} {
		resp, err := hc.Get(srv.URL + tc.path)
		if tc.wantErr {
			if !errors.Is(err, ErrRedirect) {
				t.Errorf("%s: err = %v, want ErrRedirect", tc.path, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		resp.Body.Close()
	}
	if n := hops.Load(); n != 4 {
		t.Errorf("a redirect loop was followed %d times, want the first request and 3 redirects", n)
	}
	// Another bound than the default (whose policy is made once).
	hops.Store(0)
	if _, err := WithRedirectPolicy(srv.Client(), 1).Get(srv.URL + "/loop"); !errors.Is(err, ErrRedirect) {
		t.Errorf("/loop with 1 redirect: err = %v, want ErrRedirect", err)
	}
	if n := hops.Load(); n != 2 {
		t.Errorf("a redirect loop with 1 redirect allowed was followed %d times, want the first request and 1 redirect", n)
	}
}

func TestDoRetriesAfterRetryAfter(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/twice":
			if calls.Add(1) <= 2 {
				w.Header().Set("Retry-After", "0")
				http.Error(w, "too many requests", http.StatusTooManyRequests)
				return
			}
			io.WriteString(w, "ok")
		case "/always":
			calls.Add(1)
			w.Header().Set("Retry-After", "0")
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		case "/long":
			calls.Add(1)
			w.Header().Set("Retry-After", "3600")
			http.Error(w, "come back in an hour", http.StatusTooManyRequests)
		case "/plain":
			calls.Add(1)
			http.Error(w, "no Retry-After", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	get := func(ctx context.Context, path string) (int, string, int32) {
		t.Helper()
		calls.Store(0)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		resp, err := Do(ctx, srv.Client(), req, 3)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b)), calls.Load()
	}
	ctx := context.Background()
	if code, body, n := get(ctx, "/twice"); code != 200 || body != "ok" || n != 3 {
		t.Errorf("/twice: %d %q after %d requests, want 200 after 3", code, body, n)
	}
	if code, body, n := get(ctx, "/always"); code != 503 || body != "unavailable" || n != 4 {
		t.Errorf("/always: %d %q after %d requests, want the server's 503 after 1+3", code, body, n)
	}
	if code, _, n := get(ctx, "/plain"); code != 500 || n != 1 {
		t.Errorf("/plain: %d after %d requests, want 500 at once (no Retry-After)", code, n)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if code, body, n := get(short, "/long"); code != 429 || body != "come back in an hour" || n != 1 {
		t.Errorf("/long with a 5s deadline: %d %q after %d requests, want the 429 at once", code, body, n)
	}
}

func TestRetryAfterForms(t *testing.T) {
	for _, tc := range []struct {
		code   int
		header string
		want   time.Duration
		ok     bool
	}{
		{429, "2", 2 * time.Second, true},
		{503, "0", 0, true},
		{500, "1", time.Second, true},
		{404, "1", 0, false},
		{429, "", 0, false},
		{429, "-1", 0, false},
		{429, "soon", 0, false},
		{429, time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, true},
	} {
		resp := &http.Response{StatusCode: tc.code, Header: http.Header{}}
		if tc.header != "" {
			resp.Header.Set("Retry-After", tc.header)
		}
		got, ok := RetryAfter(resp)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%d Retry-After %q: %v %v, want %v %v", tc.code, tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

// endless is a body that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func response(body io.Reader, contentLength int64, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(body), ContentLength: contentLength}
}

func TestReadBody(t *testing.T) {
	ctx := context.Background()
	doc := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(doc)
	zw.Close()
	lying := bytes.Clone(gz.Bytes())
	binary.LittleEndian.PutUint32(lying[len(lying)-4:], 10) // claims 10 bytes; gzip checks ISIZE
	for _, tc := range []struct {
		name    string
		resp    *http.Response
		limit   int64
		want    []byte
		tooBig  bool
		anyFail bool
	}{
		{"known length", response(bytes.NewReader(doc), int64(len(doc))), 2 << 20, doc, false, false},
		{"unknown length", response(bytes.NewReader(doc), -1), 2 << 20, doc, false, false},
		{"exactly the limit", response(bytes.NewReader(doc), -1), int64(len(doc)), doc, false, false},
		{"one byte over", response(bytes.NewReader(doc), -1), int64(len(doc)) - 1, nil, true, false},
		{"Content-Length over the limit", response(endless{}, 1<<40), 1 << 20, nil, true, false},
		{"endless", response(endless{}, -1), 1 << 20, nil, true, false},
		{"gzip", response(bytes.NewReader(gz.Bytes()), -1, "Content-Encoding", "gzip"), 2 << 20, doc, false, false},
		{"gzip over the limit", response(bytes.NewReader(gz.Bytes()), -1, "Content-Encoding", "gzip"), 1 << 19, nil, true, false},
		{"gzip with a lying trailer", response(bytes.NewReader(lying), -1, "Content-Encoding", "gzip"), 2 << 20, nil, false, true},
		{"not gzip", response(strings.NewReader("plain"), -1, "Content-Encoding", "gzip"), 1 << 20, nil, false, true},
		{"shorter than announced", response(strings.NewReader("short"), 1000), 1 << 20, []byte("short"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := ReadBody(ctx, tc.resp, Options{Limit: tc.limit})
			switch {
			case tc.tooBig:
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("err = %v, want ErrTooLarge", err)
				}
			case tc.anyFail:
				if err == nil {
					t.Fatal("no error")
				}
			case err != nil:
				t.Fatal(err)
			case !bytes.Equal(got, tc.want):
				t.Fatalf("got %d bytes, want %d", len(got), len(tc.want))
			}
		})
	}
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestReadBodyMemoryIsBoundedByTheLimit(t *testing.T) {
	const limit = 32 << 20
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		resp func() *http.Response
		most uint64
	}{
		// Without a length the body is read to just past the limit: the
		// chunks add up to the limit, never more.
		{"endless body", func() *http.Response { return response(endless{}, -1) }, limit + limit/4},
		// A claim of 60 MB (within a 64 MB limit) that sends 1 KB costs the
		// presize bound, not the claim.
		{"large claim, small body", func() *http.Response { return response(strings.NewReader("tiny"), 60<<20) }, presizeMax + 1<<20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := int64(limit)
			if tc.name == "large claim, small body" {
				lim = 64 << 20
			}
			n := allocated(func() { ReadBody(ctx, tc.resp(), Options{Limit: lim}) })
			if n > tc.most {
				t.Errorf("allocated %d MB, want at most %d MB", n>>20, tc.most>>20)
			}
		})
	}
	t.Run("a body just within the limit costs about twice its size", func(t *testing.T) {
		body := bytes.Repeat([]byte("y"), limit)
		n := allocated(func() {
			got, _, err := ReadBody(ctx, response(bytes.NewReader(body), -1), Options{Limit: limit})
			if err != nil || len(got) != limit {
				t.Errorf("%d bytes, %v", len(got), err)
			}
		})
		if n > 2*limit+limit/4 {
			t.Errorf("allocated %d MB for a %d MB body", n>>20, limit>>20)
		}
	})
}

func TestReadBodyLargeGate(t *testing.T) {
	gate := semaphore.NewWeighted(1)
	gate.Acquire(context.Background(), 1) // another reader holds it
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// A small body never asks for the gate.
	if _, _, err := ReadBody(ctx, response(strings.NewReader("small"), -1), Options{Limit: 1 << 30, Large: gate}); err != nil {
		t.Fatalf("small body: %v", err)
	}
	// A large one waits for it, and gives up with ctx.
	_, _, err := ReadBody(ctx, response(endless{}, -1), Options{Limit: 1 << 30, Large: gate})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("large body while the gate is held: %v, want the context's deadline", err)
	}
	gate.Release(1)
	if !gate.TryAcquire(1) {
		t.Fatal("the gate was not released by the reader that gave up")
	}
}

// unread fails a test if anything reads it.
type unread struct{ t *testing.T }

func (u unread) Read([]byte) (int, error) {
	u.t.Error("a body over the limit by its Content-Length was read")
	return 0, io.EOF
}

// held is a body already in memory, as diskcache's StoredBody is.
type held struct {
	*bytes.Reader
	b []byte
}

func (h held) Bytes() []byte { return h.b }
func (h held) Close() error  { return nil }

// TestReadBodyPromises pins what ReadBody's doc says: a Content-Length over
// the limit is refused before a byte is read, and a body that is already
// in memory is taken as it is, without a copy, within the limit.
func TestReadBodyPromises(t *testing.T) {
	ctx := context.Background()
	if _, _, err := ReadBody(ctx, &http.Response{Header: http.Header{}, Body: io.NopCloser(unread{t}), ContentLength: 2 << 20}, Options{Limit: 1 << 20}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v, want ErrTooLarge", err)
	}
	doc := []byte(`{"openapi":"3.0.0"}`)
	got, _, err := ReadBody(ctx, &http.Response{Header: http.Header{}, Body: held{bytes.NewReader(doc), doc}, ContentLength: -1}, Options{Limit: 1 << 20})
	if err != nil || len(got) != len(doc) || &got[0] != &doc[0] {
		t.Errorf("a body in memory was copied (or lost): %q, %v", got, err)
	}
	if _, _, err := ReadBody(ctx, &http.Response{Header: http.Header{}, Body: held{bytes.NewReader(doc), doc}, ContentLength: -1}, Options{Limit: 4}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a body in memory over the limit: %v, want ErrTooLarge", err)
	}
}

// emptyBlocks is a gzip stream that never ends and decompresses to
// nothing: a header, then empty stored deflate blocks, none final.
type emptyBlocks struct{ sent int }

func (e *emptyBlocks) Read(p []byte) (int, error) {
	header := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	block := []byte{0, 0, 0, 0xff, 0xff}
	n := 0
	for n < len(p) {
		if e.sent < len(header) {
			p[n] = header[e.sent]
		} else {
			p[n] = block[(e.sent-len(header))%len(block)]
		}
		n++
		e.sent++
	}
	return n, nil
}

// TestReadBodyBoundsCompressedBytes: the limit also bounds what is read of
// a gzip body compressed: a stream that decompresses to nothing ends at the
// limit, not never.
func TestReadBodyBoundsCompressedBytes(t *testing.T) {
	ctx := context.Background()
	src := &emptyBlocks{}
	_, _, err := ReadBody(ctx, response(src, -1, "Content-Encoding", "gzip"), Options{Limit: 1 << 20})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if src.sent > 2<<20 {
		t.Errorf("read %d bytes of an endless stream with a 1 MiB limit", src.sent)
	}
}

// TestReadBodyUnsizedReusesChunks: a body read without a length (chunked,
// or decompressed by Go's transport) is joined from chunks that go back to
// their pools, so that reading such bodies over and over allocates about
// their size each, not twice it; and every byte arrives, whatever the
// sizes (one chunk, several, one byte past a chunk).
func TestReadBodyUnsizedReusesChunks(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{0, 1, firstChunk - 1, firstChunk, firstChunk + 1, 3 << 20, chunkMax + 5} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i * 7)
		}
		for range 2 {
			got, _, err := ReadBody(ctx, response(bytes.NewReader(body), -1), Options{Limit: 64 << 20})
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("a %d-byte body: %d bytes back, equal %v, %v", n, len(got), bytes.Equal(got, body), err)
			}
			if cap(got) != len(got) {
				t.Errorf("a %d-byte body came back in a buffer of %d", n, cap(got))
			}
		}
	}
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	const size = 3 << 20
	body := bytes.Repeat([]byte("z"), size)
	read := func() {
		if _, _, err := ReadBody(ctx, response(bytes.NewReader(body), -1), Options{Limit: 64 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	read()
	// Ten reads: a collection while chunks are out of their pools (which
	// a pool then forgets over two) is not what is measured.
	if n := allocated(func() {
		for range 10 {
			read()
		}
	}); n > 10*(size+size/2) {
		t.Errorf("reading a %d MB body without a length 10 times allocated %.1f MB, want about its size each (twice it before the pools)", size>>20, float64(n)/(1<<20))
	}
}

// TestReadBodyRecyclable: under Options.Recyclable a body arrives whole,
// sized, unsized or gzipped, in a buffer less than twice its length (a
// small one in a buffer of its size), and bodies given back with Recycle
// are read into again, so that reading over and over allocates almost
// nothing (TestReadBodyUnsizedReusesChunks pins that without it, bodies
// have no spare capacity); a caller that does not give them back only drops them.
func TestReadBodyRecyclable(t *testing.T) {
	ctx := context.Background()
	o := Options{Limit: 64 << 20, Recyclable: true}
	for _, n := range []int{0, 1, firstChunk - 1, firstChunk, firstChunk + 1, 1<<20 + 3, chunkMax + 5} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i * 7)
		}
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		zw.Write(body)
		zw.Close()
		for _, tc := range []struct {
			name string
			resp func() *http.Response
		}{
			{"sized", func() *http.Response { return response(bytes.NewReader(body), int64(n)) }},
			{"unsized", func() *http.Response { return response(bytes.NewReader(body), -1) }},
			{"gzip", func() *http.Response {
				return response(bytes.NewReader(zipped.Bytes()), int64(zipped.Len()), "Content-Encoding", "gzip")
			}},
		} {
			for round := range 3 {
				got, _, pooled, err := readBody(ctx, tc.resp(), o)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("%s %d-byte body: %d bytes back, equal %v, %v", tc.name, n, len(got), bytes.Equal(got, body), err)
				}
				// (A sized body's buffer has room for one more byte, to see
				// its end.)
				if n < firstChunk && cap(got) > len(got)+1 || n >= firstChunk && cap(got) >= 2*len(got) {
					t.Errorf("%s %d-byte body came back in a buffer of %d", tc.name, n, cap(got))
				}
				// Pooled: every buffer of a pooled size, and so every body
				// from firstChunk up to chunkMax.
				if pooled != (chunkClass(cap(got)) >= 0) || n >= firstChunk && n < chunkMax && !pooled {
					t.Errorf("%s %d-byte body: pooled %v in a buffer of %d", tc.name, n, pooled, cap(got))
				}
				if round > 0 && pooled {
					putChunk(got)
				}
			}
		}
	}
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	// Just under 1 MiB, so that a sized read's buffer (one more byte) is
	// of the 1 MiB class, as an unsized read's join is.
	const size = 1<<20 - 64
	body := bytes.Repeat([]byte("r"), size)
	for _, length := range []int64{size, -1} {
		read := func() {
			got, _, pooled, err := readBody(ctx, response(bytes.NewReader(body), length), o)
			if err != nil || !pooled {
				t.Fatal(pooled, err)
			}
			putChunk(got)
		}
		read()
		if n := allocated(func() {
			for range 10 {
				read()
			}
		}); n > 3*size {
			// (Three: a collection during the reads, which another test's
			// garbage may start, can empty the pools once; without
			// Recycle, ten reads allocate ten bodies or more.)
			t.Errorf("reading a 1 MB body (length %d) 10 times, each given back, allocated %.1f MB, want less than three bodies", length, float64(n)/(1<<20))
		}
	}
}

// handedOver is a caching transport's body that keeps what is read
// (diskcache's Handover).
type handedOver struct {
	io.Reader
	kept *[]byte
}

func (h handedOver) Close() error { return nil }
func (h handedOver) Handover() func([]byte) {
	return func(b []byte) { *h.kept = b }
}

// TestRecycleNeverGivesAwayWhatOthersHold: a body a caching transport
// keeps (Handover) or already holds (Bytes) is never a pooled buffer, even
// under Options.Recyclable and of a pooled size, so Response.Recycle
// leaves it alone; nor is a body read without Recyclable.
func TestRecycleNeverGivesAwayWhatOthersHold(t *testing.T) {
	ctx := context.Background()
	doc := bytes.Repeat([]byte("k"), 2*firstChunk) // a pooled size, joined or presized
	for _, length := range []int64{int64(len(doc)), -1} {
		var kept []byte
		resp := response(bytes.NewReader(doc), length)
		resp.Body = handedOver{bytes.NewReader(doc), &kept}
		got, _, pooled, err := readBody(ctx, resp, Options{Limit: 1 << 20, Recyclable: true})
		if err != nil || pooled || !bytes.Equal(kept, doc) || !bytes.Equal(got, doc) {
			t.Errorf("handed over (length %d): pooled %v, kept %d bytes, %v", length, pooled, len(kept), err)
		}
		(&Response{Body: got, pooled: pooled}).Recycle()
		if again, _, _, _ := readBody(ctx, response(bytes.NewReader(bytes.Repeat([]byte("x"), len(doc))), length), Options{Limit: 1 << 20, Recyclable: true}); !bytes.Equal(kept, doc) {
			t.Errorf("a later read (%d bytes) overwrote what the transport kept", len(again))
		}
		if _, _, pooled, _ := readBody(ctx, response(bytes.NewReader(doc), length), Options{Limit: 1 << 20}); pooled {
			t.Errorf("a body read without Recyclable (length %d) is pooled", length)
		}
	}
	stored := make([]byte, 2*firstChunk)
	_, _, pooled, err := readBody(ctx, &http.Response{Header: http.Header{}, Body: held{bytes.NewReader(stored), stored}, ContentLength: -1}, Options{Limit: 1 << 20, Recyclable: true})
	if err != nil || pooled {
		t.Errorf("a stored body: pooled %v, %v", pooled, err)
	}
}
