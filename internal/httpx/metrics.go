package httpx

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/metrics"
)

// Requests are reported to client-go's metrics adapters
// (k8s.io/client-go/tools/metrics, a package of interfaces that links
// nothing but the standard library) as rest.Request reports its own, with
// the same labels, so that whatever a program registered there
// (controller-runtime's rest_client_requests_total, component-base's) counts
// kubeatlas's requests beside client-go's. Watches (discovery/watch) go
// through client-go's metadata client, which reports them itself.

// recordAttempt reports one attempt of req, as rest.Request does after
// each (its withRetry.After): RequestResult for every attempt, RequestRetry
// for every one after the first, with the status code as a string, or
// "<error>" when no response came back (client-go's label for an
// error of any kind, whose text would make labels unbounded; a refused
// redirect comes back with its response, and so its code).
func recordAttempt(ctx context.Context, req *http.Request, resp *http.Response, attempt int) {
	code := "<error>"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	metrics.RequestResult.Increment(ctx, code, req.Method, req.URL.Host)
	if attempt > 0 {
		metrics.RequestRetry.IncrementRetry(ctx, code, req.Method, req.URL.Host)
	}
}

// recordRequest reports a request's whole latency, retries and the body
// read included (rest.Request.request's), and the size of the body read
// when there is one or the answer was a success (rest.Request.Do's).
func recordRequest(ctx context.Context, base, u *url.URL, start time.Time, resp *Response) {
	metrics.RequestLatency.Observe(ctx, http.MethodGet, metricURL(base, u), time.Since(start))
	if resp != nil && (len(resp.Body) > 0 || resp.StatusCode/100 == 2) {
		metrics.ResponseSize.Observe(ctx, http.MethodGet, u.Host, float64(len(resp.Body)))
	}
}

// metricURL is u as rest.Request reports it to RequestLatency (its
// unexported finalURLTemplate, ported: the label must be the same for the
// same request whichever client sent it): every query value is "{value}",
// a resource's namespace and name in an /api or /apis path are
// "{namespace}" and "{name}", and any other path (/openapi/v3/...) is
// "/{prefix}", so that the label takes few values. client-go's base path
// always ends in "/" (rest.NewRESTClient adds it); base's may not.
func metricURL(base, u *url.URL) url.URL {
	t := *u
	t.RawPath, t.Fragment = "", ""
	q := u.Query()
	for k := range q {
		q[k] = []string{"{value}"}
	}
	t.RawQuery = q.Encode()

	basePath := strings.TrimSuffix(base.Path, "/") + "/"
	segments := strings.Split(t.Path, "/")
	groupIndex, trimmed := 0, ""
	if strings.Contains(t.Path, basePath) {
		p := strings.TrimPrefix(t.Path, basePath)
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		trimmed = basePath
		segments = strings.Split(p, "/")
		groupIndex = 1
	}
	if len(segments) <= 2 {
		return t
	}
	var index int
	switch segments[groupIndex] {
	case "api":
		index = groupIndex + 2
	case "apis":
		index = groupIndex + 3
	default:
		t.Path, t.RawQuery = "/{prefix}", ""
		return t
	}
	switch n := len(segments) - index; {
	case n == 2:
		segments[index+1] = "{name}"
	case n == 3:
		if segments[index+2] == "finalize" || segments[index+2] == "status" {
			segments[index+1] = "{name}"
		} else {
			segments[index+1] = "{namespace}"
		}
	case n >= 4:
		segments[index+1] = "{namespace}"
		if segments[index+3] != "finalize" && segments[index+3] != "status" {
			segments[index+3] = "{name}"
		}
	}
	t.Path = path.Join(trimmed, path.Join(segments...))
	return t
}
