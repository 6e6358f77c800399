package httpx

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxRetries is how many times Do sends a request again after a
// 429 or 5xx with Retry-After, unless told otherwise.
const DefaultMaxRetries = 5

// Do sends req through hc and, while the answer is a 429 or a 5xx carrying
// Retry-After (API Priority and Fairness sends 429 with Retry-After: 1), waits
// as asked and sends it again, at most maxRetries times. It never waits past
// ctx's deadline: when the wait would end after it, or ctx ends while
// waiting, the last answer is returned as it is (its body read, at most
// 64 KiB, and replayed), so that the caller reports the server's own status.
// This is client-go's rule (rest.Request's checkWait), bounded by the
// caller's deadline instead of a count of ten. Each attempt is reported to
// client-go's metrics adapters as rest.Request reports its own
// (recordAttempt).
func Do(ctx context.Context, hc *http.Client, req *http.Request, maxRetries int) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := hc.Do(req.Clone(ctx))
		recordAttempt(ctx, req, resp, attempt)
		if err != nil {
			return nil, err
		}
		wait, ok := RetryAfter(resp)
		if !ok || attempt >= maxRetries {
			return resp, nil
		}
		// The answer is kept to hand back if there is no retry after all.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		if deadline, has := ctx.Deadline(); has && time.Until(deadline) < wait {
			return resp, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return resp, nil
		}
	}
}

// RetryAfter is how long a response asks to be waited for before its
// request is sent again: a 429 or 5xx with a Retry-After header, in seconds
// or as an HTTP date.
func RetryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && (resp.StatusCode < 500 || resp.StatusCode > 599) {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
