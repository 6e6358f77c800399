// Package httpx is the HTTP behaviour that discovery and openapi3 share, so
// that it is decided once: every request goes through [Client.Get], which
// resolves a server-relative reference under the base URL and its path
// prefix ([Client.URL], never to another host), follows redirects on the
// same host only ([CheckRedirect]), sends a request again after a 429 or
// 503 with Retry-After ([Do]), reads a body within a size limit whatever
// the server sends, gzip included ([ReadBody]), and turns an error status
// into the apimachinery error client-go users expect ([StatusError]).
// [FromConfig] builds what a client built from a rest.Config sends
// through, with kubeatlas's User-Agent unless the config names one. Every
// request is reported to client-go's metrics adapters
// (k8s.io/client-go/tools/metrics) as client-go's rest.Request reports its
// own, with the same labels, so that a program's rest_client_* metrics
// count kubeatlas's requests too.
//
// # Files
//
// One request runs through one file, in the order it reads:
//
//   - client.go: [Client] and [Client.Get]; [Do] and [RetryAfter] (the
//     retries); the counting and closing transports; what Get and Do report
//     to client-go's metrics adapters, and the URL template they report
//     (client-go's, ported); [ReadBody] and its buffer pools; [StatusError];
//     [FromConfig].
//   - redirect.go: [CheckRedirect], which only a redirect calls.
//   - transient.go: [IsTransient], which only a failure asks.
package httpx
