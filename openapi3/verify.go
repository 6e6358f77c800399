package openapi3

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// ErrHashMismatch is the cause of the error for a JSON document whose
// SHA-512 is not the ?hash= of its URL (diskcache.VerifyHash says when a
// hash can be checked). It is never used nor stored.
var ErrHashMismatch = diskcache.ErrHashMismatch

// verify checks a JSON document that did not come from the disk cache
// against the ?hash= it was served at. What the disk cache serves was
// checked before it was stored and is checksummed on disk; the transport
// removes a server's own X-From-Cache, so the header cannot be forged.
//
// verified says the body is the one its URL's ?hash= names: checked now,
// or by the disk cache when it stored it (which stores no JSON document
// that fails the check).
func (c *Client) verify(resp *http.Response, body []byte) (verified bool, err error) {
	if resp.Request == nil {
		return false, nil
	}
	if c.opts.disk != nil && resp.Header.Get(diskcache.FromCache) == "1" {
		return resp.Request.URL.Query().Get("hash") != "", nil
	}
	return diskcache.VerifyHash(resp.Request.URL, body)
}

// checkBeforeStoring is what the disk cache checks, besides the hash of
// JSON documents, before it stores a response: the root must parse, and a
// protobuf document (whose bytes no hash vouches for) must decode.
func checkBeforeStoring(resp *http.Response, body []byte) error {
	if resp.Request != nil && strings.HasSuffix(strings.TrimSuffix(resp.Request.URL.Path, "/"), "/openapi/v3") {
		_, err := parseRoot(body)
		return err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == ProtobufType || mt == ProtobufTypeDeprecated {
		if err := proto.Unmarshal(body, &openapi_v3.Document{}); err != nil {
			return fmt.Errorf("not an OpenAPI v3 protobuf document: %w", err)
		}
	}
	return nil
}
