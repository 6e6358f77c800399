package openapi3

import (
	"github.com/kubeatlas/kubeatlas/internal/weakmap"
)

// Documents is a table of OpenAPI v3 documents that the clients given it
// (WithDocuments) share by content: a document is named by its
// group-version path and the ?hash= of its URL, which is the SHA-512 of
// its JSON, checked by the client (on every read, from the server or a
// disk cache). A document that a 301 led to is named by the hash it was
// verified against, the final URL's, never by the one asked for. Clusters of a fleet that serve the same schemas then
// hold each document, and what was parsed of it, once; and a client asks
// its server for none that another client has read. Documents at URLs
// without a verified hash are not shared. A document no client holds any
// more is forgotten. It is safe for concurrent use.
type Documents struct {
	docs weakmap.Map[docKey, Document]
}

type docKey struct{ path, hash string }

// NewDocuments returns an empty table.
func NewDocuments() *Documents { return &Documents{} }

// Len is how many documents the table holds now.
func (t *Documents) Len() int { return t.docs.Len() }

// WithDocuments shares documents with the other clients given t. Default:
// the client's own.
func WithDocuments(t *Documents) Option {
	return named("WithDocuments", func(o *options) error { o.documents = t; return nil })
}

// keyFor names the document at the server-relative URL u of path, if u
// has a hash.
func keyFor(path, u string) (docKey, bool) {
	h := hashOf(u)
	return docKey{path: path, hash: h}, h != ""
}

// get returns the held document of path at u (read from u), or nil.
func (t *Documents) get(path, u string) *Document {
	k, ok := keyFor(path, u)
	if !ok {
		return nil
	}
	d := t.docs.Get(k)
	if d == nil {
		return nil
	}
	return d.at(u)
}

// put holds d unless the table holds its content already, and returns the
// document to use. hash is the one d's bytes were verified against: that
// of the URL they came from, which after a 301 (a stale ?hash=, during a
// rolling upgrade) is not d.URL's; d is held under it alone, so that a
// cluster asking for d.URL's hash asks its own server.
func (t *Documents) put(d *Document, hash string) *Document {
	if hash == "" {
		return d
	}
	return t.docs.Put(docKey{path: d.Path, hash: hash}, d).at(d.URL)
}
