package discovery

import (
	"time"

	"k8s.io/client-go/rest"
)

// This file is for packages that read API servers the client does not (the
// consistency package asks each API server of a cluster for its own view):
// they make their own requests, and need from discovery only the two things
// its other API does not give: the config to connect with on the user's
// behalf, and a Snapshot of the documents they read.

// Config is a copy of the rest.Config the client was built from (New,
// NewForConfigAndClient), or nil for a client built by NewForHTTPClient,
// whose credentials and TLS settings are inside an HTTP client that cannot
// be pointed at another address. (Connection, for adapters that talk to
// the client's own URL, gives a config with only the host then.)
func (c *Client) Config() *rest.Config {
	return c.config.copy()
}

// Document is a discovery document as a server sent it.
type Document struct {
	Body        []byte // decompressed
	ContentType string // the response's Content-Type
	ETag        string // the response's ETag header, quotes included
}

// NewSnapshot builds a snapshot of the aggregated discovery documents
// (KEP-3352, JSON or protobuf) that a server sent for /api (core) and /apis
// (named); its Fetched and Validated are at. Legacy discovery is an error
// (its root documents list no resources), and so is a document that does
// not decode: both are *ResponseError.
func NewSnapshot(core, named Document, at time.Time) (*Snapshot, error) {
	c, err := documentPart("/api", core)
	if err != nil {
		return nil, err
	}
	n, err := documentPart("/apis", named)
	if err != nil {
		return nil, err
	}
	return &Snapshot{content: newContent(*c, *n), fetched: at, validated: at}, nil
}

func documentPart(path string, d Document) (*part, error) {
	p, _, err := aggregatedPart(d.Body, d.ContentType, d.ETag, verifyNone)
	if err != nil {
		return nil, &ResponseError{Path: path, ContentType: d.ContentType, Err: err}
	}
	return p, nil
}
