package httpx

import (
	"context"
	"errors"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// IsTransient reports whether err may not happen again if the request is
// repeated, as client-go's memory cache judges it: a 5xx or 429 status, a
// refused or reset connection, a context that ended.
func IsTransient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.ECONNREFUSED || errno == syscall.ECONNRESET) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return true
	}
	return apierrors.IsTooManyRequests(err)
}
