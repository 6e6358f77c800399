package discovery

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// ErrStale is the cause of a GroupVersionError for a group-version the
// server marked Stale: its aggregated API server could not be reached.
var ErrStale = errors.New("stale: the aggregated API server serving it could not be reached")

// GroupVersionError says why one group-version's resources could not be
// read. Err is ErrStale, or the request's error (an *apierrors.StatusError
// for an HTTP error status, so apierrors.IsServiceUnavailable and friends
// work on it).
type GroupVersionError struct {
	GroupVersion schema.GroupVersion
	Err          error
}

func (e *GroupVersionError) Error() string {
	return fmt.Sprintf("discovery of %s: %v", e.GroupVersion, e.Err)
}

func (e *GroupVersionError) Unwrap() error { return e.Err }

// PartialError is the error of a snapshot that is usable but incomplete.
// errors.As finds each *GroupVersionError inside it.
type PartialError struct {
	Errors []*GroupVersionError
}

func (e *PartialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "discovery incomplete: %d group-version(s) failed:", len(e.Errors))
	for i, gve := range e.Errors {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(e.Errors)-5)
			break
		}
		fmt.Fprintf(&b, " %s (%v);", gve.GroupVersion, gve.Err)
	}
	return strings.TrimSuffix(b.String(), ";")
}

func (e *PartialError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, gve := range e.Errors {
		out[i] = gve
	}
	return out
}

// ResponseError is a response whose body could not be used: too large, of
// the wrong content type, or not what its content type says.
type ResponseError struct {
	Path        string
	ContentType string
	Err         error
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("discovery: GET %s (Content-Type %q): %v", e.Path, e.ContentType, e.Err)
}

func (e *ResponseError) Unwrap() error { return e.Err }

// ErrTooLarge is the cause of a ResponseError for a body over the limit set
// by WithMaxResponseBytes.
// It is the same error as openapi3.ErrTooLarge.
var ErrTooLarge = httpx.ErrTooLarge

// ErrRedirect is the cause of the error for a redirect that is not
// followed: more than 3, or to another host (the
// credentials that the HTTP client adds must not leave the server's host).
var ErrRedirect = httpx.ErrRedirect
