// Package httpx is the HTTP behaviour that discovery and openapi3 share, so
// that it is decided once: which redirects are followed (CheckRedirect),
// when a request is sent again after a 429 or 503 (Do), and how a body is
// read within a size limit whatever the server sends (ReadBody).
//
// Files: redirect.go (CheckRedirect), retry.go (Do, RetryAfter), body.go
// (ReadBody, ErrTooLarge).
package httpx
