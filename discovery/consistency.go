package discovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubeatlas/kubeatlas/internal/httpx"
	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// View is one API server's own discovery, as a consistency check saw it.
type View struct {
	ETag     string
	Seen     int       // how many samples answered with it
	Snapshot *Snapshot // its named groups (/apis); Diff two views to see how they differ
}

// Consistency is what CheckConsistency found.
type Consistency struct {
	Samples int
	Views   []View // distinct views, in the order first seen
}

// Consistent is true when every sample saw the same discovery.
func (c *Consistency) Consistent() bool { return len(c.Views) <= 1 }

// CheckConsistency asks whether the API servers behind the client's URL
// serve the same discovery, as coordinated discovery was proposed to tell
// (during an upgrade they do not). It sends samples requests for /apis,
// each on a new connection so that a load balancer spreads them, asking
// each server for its own view (KEP-4020 profile=nopeer, which servers
// without peer aggregation ignore), and groups the answers by ETag. A
// server that answers with legacy discovery cannot be checked this way.
func (c *Client) CheckConsistency(ctx context.Context, samples int) (*Consistency, error) {
	if samples < 1 {
		return nil, fmt.Errorf("discovery: CheckConsistency needs at least one sample, got %d", samples)
	}
	accept := mediatype.Aggregated("v2", !c.opts.jsonOnly, "nopeer") + "," + mediatype.Aggregated("v2", false, "nopeer")
	out := &Consistency{Samples: samples}
	index := map[string]int{}
	for range samples {
		// A new connection for every sample.
		resp, err := c.get(ctx, httpx.Request{Ref: "/apis", Accept: accept, NewConnection: true})
		if err != nil {
			return nil, fmt.Errorf("discovery: consistency sample: %w", err)
		}
		body := resp.Body
		etag := resp.Header.Get("ETag")
		if etag == "" {
			return nil, errors.New("discovery: consistency: the server answered without an ETag (legacy discovery?)")
		}
		if i, ok := index[etag]; ok {
			out.Views[i].Seen++
			continue
		}
		mt, err := mediatype.ParseDiscovery(resp.Header.Get("Content-Type"))
		if err != nil || !mt.Aggregated {
			return nil, &ResponseError{Path: "/apis", ContentType: resp.Header.Get("Content-Type"), Err: fmt.Errorf("not aggregated discovery (%v)", err)}
		}
		named, err := aggregatedPart(body, mt, etag, false)
		if err != nil {
			return nil, &ResponseError{Path: "/apis", ContentType: resp.Header.Get("Content-Type"), Err: err}
		}
		s := &Snapshot{content: newContent(part{}, *named), fetched: c.opts.clock.Now()}
		index[etag] = len(out.Views)
		out.Views = append(out.Views, View{ETag: etag, Seen: 1, Snapshot: s})
	}
	return out, nil
}
