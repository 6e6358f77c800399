package fleet

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// A cold start without a WithLike hint has to guess which held surface to
// offer: kube-apiserver accepts one ETag in If-None-Match, and a wrong
// guess costs the documents. So it first asks the server a cheap question
// whose answer differs between most surfaces: the size of its OpenAPI v3
// root, which lists every group-version with the SHA-512 of its document.
// GET /openapi/v3 with "Range: bytes=0-0" is answered 206 with one byte
// and a Content-Range that states the size (kube-openapi serves the root
// with http.ServeContent). The fleet's surfaces remember which surfaces each
// size turned out to be, and a client offers the most read of them.
//
// A fingerprint is a hint, never evidence: the conditional requests that
// follow still decide, so a stale or shared fingerprint costs what no hint
// costs (the documents), never a wrong snapshot. Surfaces that serve the
// same group-versions under other schemas (a patch release apart, an
// add-on's newer CRD schema) have roots of one size: the hashes differ,
// not their length. Nothing short of the whole root tells them apart, and
// a few sampled ranges would rarely land on the hash that differs, so the
// size is all that is asked. It also survives a fleet proxy that rewrites
// the root's URLs with each cluster's prefix, where clusters' IDs are of
// one length (as generated IDs are); where they are not, clusters of one
// surface have different fingerprints, and each is offered the most read
// surface instead.

// probeMaxBytes bounds the probe's answer: a server that ignores Range
// sends the whole root, which is read no further than this; there is then
// no fingerprint, and the fleet does not probe that host again.
const probeMaxBytes = 64 << 10

// probeTimeout bounds the probe, as does a quarter of the time the refresh
// has left: a server rebuilds its OpenAPI root after a CRD changes, which
// with thousands of CRDs can take seconds, and a cold start does not wait
// that long for a hint.
const probeTimeout = 2 * time.Second

// fingerprint probes the OpenAPI v3 root of c's server (see above), on
// c's own connection (the request counts in c's Stats.Requests). It
// returns "" when it cannot tell: no OpenAPI v3 (an old server, a 403),
// ranges not answered, any error. Only ctx's own end is returned as an
// error.
func (s *surfaces) fingerprint(ctx context.Context, c *discovery.Client) (string, error) {
	hc, cfg := c.Connection()
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", nil
	}
	host := base.Scheme + "://" + base.Host
	if s.rangesIgnored(host) {
		return "", nil
	}
	probe := httpx.NewClient(hc, base, httpx.DefaultMaxRedirects)
	probe.Gzip = !cfg.DisableCompression
	probe.Body = httpx.Options{Limit: probeMaxBytes}
	timeout := probeTimeout
	if deadline, ok := ctx.Deadline(); ok {
		// A quarter of what the refresh has left at most: the documents
		// still have to come.
		timeout = min(timeout, time.Until(deadline)/4)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := probe.Get(pctx, httpx.Request{Ref: "/openapi/v3", Accept: "application/json", Range: "bytes=0-0"})
	if resp != nil {
		s.probeBytes.Add(resp.Wire)
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if resp != nil && resp.StatusCode == http.StatusOK {
		// The whole root (up to probeMaxBytes): this host does not answer
		// ranges, and is not asked again.
		s.ignoreRanges(host)
	}
	if err != nil || resp.StatusCode != http.StatusPartialContent {
		return "", nil
	}
	// "bytes 0-0/612345": the size after the slash.
	_, size, _ := strings.Cut(resp.Header.Get("Content-Range"), "/")
	if n, err := strconv.ParseInt(size, 10, 64); err != nil || n <= 0 {
		return "", nil
	}
	return size, nil
}

func (s *surfaces) rangesIgnored(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noRanges[host]
}

func (s *surfaces) ignoreRanges(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noRanges[host] = true
}
