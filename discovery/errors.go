package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// GroupVersions lists the failed group-versions.
func (e *PartialError) GroupVersions() []schema.GroupVersion {
	out := make([]schema.GroupVersion, len(e.Errors))
	for i, gve := range e.Errors {
		out[i] = gve.GroupVersion
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
// followed: more than DefaultMaxRedirects, or to another host (the
// credentials that the HTTP client adds must not leave the server's host).
var ErrRedirect = httpx.ErrRedirect

// statusError turns an HTTP error response into the apimachinery error a
// client-go user expects: the server's own Status when it sent one, else a
// generic error for the code (with Retry-After for 429 and 5xx).
func statusError(resp *http.Response, body []byte) error {
	retryAfter, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Code != 0 {
		if retryAfter > 0 && (st.Details == nil || st.Details.RetryAfterSeconds == 0) {
			if st.Details == nil {
				st.Details = &metav1.StatusDetails{}
			}
			st.Details.RetryAfterSeconds = int32(retryAfter)
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	err := apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet, schema.GroupResource{}, "", msg, retryAfter, true)
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "json") && !strings.Contains(ct, "protobuf") && resp.Request != nil {
		// A Kubernetes API server answers errors with a Status; anything
		// else (an HTML 404 from a web server, a proxy's page) says that
		// the URL is probably not one, which "the server could not find
		// the requested resource" alone does not.
		err.ErrStatus.Message += fmt.Sprintf(" (GET %s answered %s with Content-Type %q, not a Kubernetes Status: is this a Kubernetes API server?)",
			resp.Request.URL.Redacted(), resp.Status, ct)
	}
	return err
}
