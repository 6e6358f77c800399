package diskcache

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
)

// ErrHashMismatch is the error of an OpenAPI document whose bytes are not
// the ones its ?hash= names: damaged on the way, or not what the server
// meant to send.
var ErrHashMismatch = errors.New("the document's SHA-512 is not the ?hash= of its URL")

// VerifyHash checks a JSON OpenAPI v3 document against the ?hash= of the
// URL it was served at. kube-openapi's handler3, which serves /openapi/v3 in
// every kube-apiserver and in aggregated API servers built on
// k8s.io/apiserver, names each document by the uppercase hexadecimal
// SHA-512 of its JSON bytes (the ETag is the same digest). A hash of
// another form, from a server that names documents its own way, cannot be
// checked: verified is false and err nil. The protobuf form of a document
// shares the JSON's URL and hash but not its bytes, so it cannot be checked
// this way either.
func VerifyHash(u *url.URL, body []byte) (verified bool, err error) {
	want := u.Query().Get("hash")
	if len(want) != 2*sha512.Size {
		return false, nil
	}
	var wantSum [sha512.Size]byte
	if _, err := hex.Decode(wantSum[:], []byte(want)); err != nil {
		return false, nil
	}
	if sha512.Sum512(body) != wantSum {
		return false, fmt.Errorf("%w (%s)", ErrHashMismatch, u.Path)
	}
	return true, nil
}
