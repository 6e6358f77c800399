package discovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// A cold start without a WithLike hint has to guess which held surface to
// offer: kube-apiserver accepts one ETag in If-None-Match, and a wrong
// guess costs the documents. So it first asks the server a cheap question
// whose answer differs between surfaces: a few small byte ranges of its
// OpenAPI v3 root (GET /openapi/v3 with a Range header), which lists every
// group-version with the SHA-512 of its document. kube-openapi serves the
// root with http.ServeContent, which answers ranges (206), so the answer
// is about 2 KiB whatever the surface's size. The size of the root and the
// bytes in the ranges are the surface's fingerprint; the Surfaces table
// remembers which surface each fingerprint turned out to be, and a client
// whose fingerprint is known offers that surface.
//
// A fingerprint is a hint, never evidence: the conditional requests that
// follow still decide, so a stale or colliding fingerprint costs what no
// hint costs (the documents), never a wrong snapshot. Behind a path prefix
// (a fleet proxy) the root may be rewritten with the cluster's own prefix
// in every URL, so there only the root's size, which a prefix of the same
// length shifts alike for every cluster, is kept.

// probeWindow is the size of each range asked for, and probeRanges the
// Range header: a window at 0 and at every power of two from 512 B to
// 16 MiB (a root of 3,000 CRD group-versions is about 600 KB), 18 windows
// of which http.ServeContent answers those inside the document.
const probeWindow = 64

var probeRanges = func() string {
	r := []string{fmt.Sprintf("bytes=0-%d", probeWindow-1)}
	for off := 512; off <= 16<<20; off *= 2 {
		r = append(r, fmt.Sprintf("%d-%d", off, off+probeWindow-1))
	}
	return strings.Join(r, ",")
}()

// probeMaxBytes bounds the probe's answer: a server that ignores Range
// sends the whole root, which is read no further than this; there is then
// no fingerprint, and the Surfaces table does not probe that host again.
const probeMaxBytes = 64 << 10

// fingerprint probes the server's OpenAPI v3 root (see above). It returns
// "" when it cannot tell: no OpenAPI v3 (an old server, a 403), ranges not
// answered, any error. Only ctx's own end is returned as an error.
func (c *Client) fingerprint(ctx context.Context) (string, error) {
	host := c.http.Base.Scheme + "://" + c.http.Base.Host
	if c.opts.surfaces.rangesIgnored(host) {
		return "", nil
	}
	hc := *c.http
	hc.Body = httpx.Options{Limit: probeMaxBytes}
	resp, err := hc.Get(ctx, httpx.Request{Ref: "/openapi/v3", Accept: "application/json", Range: probeRanges})
	if resp != nil {
		c.stats.bytes.Add(resp.Wire)
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if resp != nil && resp.StatusCode == http.StatusOK {
		// The whole root (up to probeMaxBytes): this host does not answer
		// ranges, and is not asked again.
		c.opts.surfaces.ignoreRanges(host)
	}
	if err != nil || resp.StatusCode != http.StatusPartialContent {
		return "", nil
	}
	withBytes := c.http.Base.Path == ""
	f, ok := rangesFingerprint(resp.Header, resp.Body, withBytes)
	if !ok {
		return "", nil
	}
	return f, nil
}

// rangesFingerprint digests a 206: one range (Content-Range and the body)
// or several (multipart/byteranges). It keeps the document's size, and,
// with withBytes, each range and its bytes.
func rangesFingerprint(h http.Header, body []byte, withBytes bool) (string, bool) {
	d := sha256.New()
	size := ""
	add := func(contentRange string, r io.Reader) bool {
		// "bytes 0-63/612345": the size after the slash.
		_, total, ok := strings.Cut(contentRange, "/")
		if _, err := strconv.ParseInt(total, 10, 64); !ok || err != nil || size != "" && total != size {
			return false
		}
		size = total
		if withBytes {
			fmt.Fprintf(d, "%s\n", contentRange)
			if _, err := io.Copy(d, r); err != nil {
				return false
			}
		}
		return true
	}
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err == nil && mt == "multipart/byteranges" {
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil || !add(p.Header.Get("Content-Range"), p) {
				return "", false
			}
		}
	} else if !add(h.Get("Content-Range"), bytes.NewReader(body)) {
		return "", false
	}
	if size == "" {
		return "", false
	}
	return size + ":" + hex.EncodeToString(d.Sum(nil)[:16]), true
}

func (s *Surfaces) rangesIgnored(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noRanges[host]
}

func (s *Surfaces) ignoreRanges(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noRanges[host] = true
}
