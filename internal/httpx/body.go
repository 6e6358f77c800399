package httpx

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"strings"
	"sync"
)

// ErrTooLarge is the cause of the error for a body over the size limit.
var ErrTooLarge = errors.New("response body exceeds the size limit")

// Sizes that bound what a body costs beyond its own bytes.
const (
	// presizeMax bounds the buffer allocated on a server's word (a
	// Content-Length or a gzip trailer): a 60 MB claim followed by 1 KB
	// costs this much, not 60 MB.
	presizeMax = 8 << 20
	// chunkMax bounds one read buffer; a body is read into chunks of
	// doubling size and joined once at the end, so reading a body costs at
	// most about twice its size, never the repeated regrowth of a single
	// buffer.
	chunkMax = 8 << 20
	// LargeBody is the size past which ReadBody takes Options.Large.
	LargeBody = 16 << 20
)

// Options says how ReadBody reads.
type Options struct {
	// Limit is the most a body may hold, after decompression.
	Limit int64
	// Large, when not nil, is acquired (weight 1) while a body grows past
	// LargeBody, so that concurrent readers of oversized bodies (FetchAll
	// against a server that sends nothing but huge documents) hold one
	// limit's worth at a time instead of one each.
	Large Semaphore
	// Recyclable lets a body of firstChunk bytes or more come back in a
	// buffer of chunkPools (its capacity less than twice its length), for
	// the caller to give back with Response.Recycle once nothing points
	// into it: a caller that decodes a body into copies and drops it
	// (discovery without a disk cache) then costs the collector no body
	// per read. A caller that keeps bodies leaves it off, so that what it
	// keeps has no spare capacity. A body a caching transport keeps (its
	// Handover) or holds already (Bytes) is never pooled.
	Recyclable bool
}

// Semaphore is what Options.Large needs of a *semaphore.Weighted
// (golang.org/x/sync), which openapi3 passes. An interface, not that type,
// so that discovery, which has no use for it, does not link the package.
type Semaphore interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}

// ReadBody reads resp's body within o.Limit, decompressing it when its
// Content-Encoding is gzip (the caller asked for gzip itself, so Go's
// transport left it compressed). A body over the limit is an error wrapping
// ErrTooLarge; a Content-Length over the limit is refused before a byte is
// read. Whatever the server sends, reading costs about twice the limit at
// most, plus presizeMax. wire is the number of bytes received (compressed).
func ReadBody(ctx context.Context, resp *http.Response, o Options) (body []byte, wire int64, err error) {
	body, wire, _, err = readBody(ctx, resp, o)
	return body, wire, err
}

// readBody is ReadBody, and says whether body is a buffer of chunkPools
// (Options.Recyclable) that the caller may give back once done with it.
func readBody(ctx context.Context, resp *http.Response, o Options) (body []byte, wire int64, pooled bool, err error) {
	gzipped := strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip")
	if resp.ContentLength > o.Limit {
		return nil, 0, false, fmt.Errorf("%w (%d bytes; Content-Length %d)", ErrTooLarge, o.Limit, resp.ContentLength)
	}
	if b, ok := resp.Body.(interface{ Bytes() []byte }); ok && !gzipped {
		// A body already in memory (diskcache's StoredBody): taken as it is.
		body = b.Bytes()
		if int64(len(body)) > o.Limit {
			return nil, 0, false, fmt.Errorf("%w (%d bytes)", ErrTooLarge, o.Limit)
		}
		return body, 0, false, nil
	}
	// A caching transport's body (diskcache's) that would keep a copy of
	// its own, outside the limit, is handed the one read here instead.
	var handover func([]byte)
	if h, ok := resp.Body.(interface{ Handover() func([]byte) }); ok && !gzipped {
		handover = h.Handover()
		o.Recyclable = false // the transport keeps it
	}
	body, err = readAtMost(ctx, resp.Body, o, resp.ContentLength)
	if err != nil {
		return nil, 0, false, err
	}
	if handover != nil {
		handover(body)
	}
	wire = int64(len(body))
	if gzipped {
		compressed := body
		body, err = gunzip(ctx, compressed, o)
		if pooledBuffer(compressed, o) {
			putChunk(compressed) // read by gunzip into body, and no longer
		}
		if err != nil {
			return nil, wire, false, err
		}
	}
	return body, wire, pooledBuffer(body, o), nil
}

// pooledBuffer says whether b, read by readAtMost under o, is a buffer of
// chunkPools: under Recyclable, every buffer of a pooled size is (read
// into one from getChunk, or joined into one), and no other is.
func pooledBuffer(b []byte, o Options) bool {
	return o.Recyclable && chunkClass(cap(b)) >= 0
}

// gunzip decompresses a gzip body into a buffer of the size its trailer
// states (trusted only up to presizeMax), reading at most limit+1 bytes.
func gunzip(ctx context.Context, compressed []byte, o Options) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	defer zr.Close()
	var hint int64
	if n := len(compressed); n >= 4 {
		hint = int64(binary.LittleEndian.Uint32(compressed[n-4:]))
	}
	out, err := readAtMost(ctx, zr, o, hint)
	if err != nil && !errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return out, err
}

// readAtMost reads r to its end, or fails with ErrTooLarge as soon as it
// has read more than the limit, starting with a buffer of hint bytes (bounded by presizeMax).
// Without a hint, the body is read into chunks taken from chunkPools and
// copied into one buffer of its size at the end.
func readAtMost(ctx context.Context, r io.Reader, o Options, hint int64) ([]byte, error) {
	want := o.Limit + 1
	var buf []byte
	if hint > 0 {
		// One more, to see the end without another buffer.
		n := min(hint+1, presizeMax, want)
		if o.Recyclable {
			buf = getChunk(pooledSize(n))
		} else {
			buf = make([]byte, 0, n)
		}
	} else {
		buf = getChunk(min(firstChunk, want))
	}
	var chunks [][]byte
	var total int64
	large := false
	defer func() {
		if large {
			o.Large.Release(1)
		}
		for _, c := range chunks {
			putChunk(c)
		}
	}()
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		total += int64(n)
		if total >= want {
			putChunk(buf)
			return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, o.Limit)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			putChunk(buf)
			return nil, err
		}
		if len(buf) < cap(buf) {
			continue
		}
		if total > LargeBody && o.Large != nil && !large {
			if err := o.Large.Acquire(ctx, 1); err != nil {
				putChunk(buf)
				return nil, err
			}
			large = true
		}
		chunks = append(chunks, buf)
		buf = getChunk(min(max(2*int64(cap(buf)), firstChunk), chunkMax, want-total))
	}
	if chunks == nil && (chunkClass(cap(buf)) < 0 || o.Recyclable && 2*len(buf) > cap(buf)) {
		return buf, nil // presized, sized by the limit, or recyclable: the caller's
	}
	var out []byte
	if o.Recyclable && total >= firstChunk {
		out = getChunk(pooledSize(total))
	} else {
		out = make([]byte, 0, total)
	}
	for _, c := range chunks {
		out = append(out, c...)
	}
	out = append(out, buf...)
	putChunk(buf)
	return out, nil
}

// firstChunk is the first buffer of a body read without a size hint.
const firstChunk = 32 << 10

// chunkPools keep the chunks of bodies read without a size (a chunked
// response, or one Go's transport decompressed), one pool per size from
// firstChunk doubling to chunkMax. Such a body is joined into one buffer
// at the end, and its chunks, about its own size again (3 MB of a cold
// discovery read at 3,000 CRDs), were garbage for the collector to find
// on every read. sync.Pool rather than a free list of our own: it drops
// what stays unused over two collections, so an idle process holds none.
var chunkPools [chunkClasses]sync.Pool

const chunkClasses = 9 // 32 KiB .. 8 MiB (chunkMax)

// chunkClass is the pool of a buffer of capacity c, or -1.
func chunkClass(c int) int {
	if c < firstChunk || c > chunkMax || c&(c-1) != 0 {
		return -1
	}
	return bits.TrailingZeros(uint(c)) - bits.TrailingZeros(firstChunk)
}

// pooledSize is the capacity of the pooled buffer that holds n bytes: the
// smallest class at least n, or n itself when none is (below firstChunk,
// past chunkMax).
func pooledSize(n int64) int64 {
	if n < firstChunk || n > chunkMax {
		return n
	}
	return 1 << bits.Len64(uint64(n-1))
}

// getChunk is an empty buffer of capacity n, from its pool when n is a
// pooled size.
func getChunk(n int64) []byte {
	if i := chunkClass(int(n)); i >= 0 {
		if p, ok := chunkPools[i].Get().(*[]byte); ok {
			return (*p)[:0]
		}
	}
	return make([]byte, 0, n)
}

// putChunk gives b back to its pool, when it is of a pooled size: the
// caller no longer holds it, nor anything that points into it.
func putChunk(b []byte) {
	if i := chunkClass(cap(b)); i >= 0 {
		b = b[:0]
		chunkPools[i].Put(&b)
	}
}

// DefaultMaxResponseBytes is discovery's default limit of one response body
// (discovery.WithMaxResponseBytes).
const DefaultMaxResponseBytes = 64 << 20
