package httpx

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrRedirect is the cause of the error for a redirect that is not
// followed: one too many, or one to another host.
var ErrRedirect = errors.New("redirect not followed")

// CheckRedirect is an http.Client CheckRedirect policy that follows at most
// max redirects, and only to the same scheme and host (port included).
// Credentials are added to every request by the client's transport (a
// bearer token, an exec plugin's token), not by the request, so Go's own
// policy of dropping Authorization on a cross-host redirect does not protect
// them: a redirect to another host is refused instead.
func CheckRedirect(max int) func(*http.Request, []*http.Request) error {
	if max == DefaultMaxRedirects {
		return checkDefaultRedirect
	}
	return checkRedirect(max)
}

// checkDefaultRedirect is CheckRedirect(DefaultMaxRedirects), made once:
// a closure of each client would be 16 bytes of each (package shared
// holds a client per identity).
var checkDefaultRedirect = checkRedirect(DefaultMaxRedirects)

func checkRedirect(max int) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > max {
			return fmt.Errorf("%w: more than %d", ErrRedirect, max)
		}
		if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
			return fmt.Errorf("%w: from %s://%s to %s://%s, another host", ErrRedirect, via[0].URL.Scheme, via[0].URL.Host, req.URL.Scheme, req.URL.Host)
		}
		return nil
	}
}

// WithRedirectPolicy returns a shallow copy of hc (nil: http.DefaultClient)
// whose redirects follow CheckRedirect(max).
func WithRedirectPolicy(hc *http.Client, max int) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	c.CheckRedirect = CheckRedirect(max)
	return &c
}

// DefaultMaxRedirects is how many redirects discovery and openapi3 follow
// (on the server's own host only: CheckRedirect).
const DefaultMaxRedirects = 3
