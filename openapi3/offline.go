package openapi3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// The root when the server cannot be reached. kube-apiserver sends the
// root with neither an ETag nor a lifetime, so the disk cache does not
// keep it, and a client with every document on disk could explain nothing
// while its server was down (where discovery answers from its cache and
// says so). WithStaleRootOnError keeps the last root read in the disk
// cache and answers from it when the server is unavailable; the documents
// it names are read from the cache at their ?hash= URLs, checked against
// their hash as always. StaleRoot says when that happened.

// WithStaleRootOnError keeps the last root read in the disk cache
// (WithDiskCache, which it needs: without one it is an error) and, when the
// root cannot be read because the server is unavailable (no connection, a
// 5xx or 429, no answer within the root timeout (WithRootTimeout, 20s by
// default), not a 4xx), answers from it: documents cached at the URLs it
// names are served, and StaleRoot returns why the root is stale. Meant for
// CLIs, which say so, as kubectl's cached discovery does. Only a
// *diskcache.Cache keeps the root: a store others may write (Redis, a
// fleet's) could hold a root naming documents of their choosing, which no
// server confirms while it is unavailable, so with one an unavailable
// server is an error, as without the option. Default: off (an
// unavailable server is an error).
func WithStaleRootOnError() Option {
	return named("WithStaleRootOnError", func(o *options) error { o.staleRoot = true; return nil })
}

// StaleRoot returns why the root in use is the one kept in the disk cache
// (WithStaleRootOnError): the error reading the server's; nil while the
// root in use is the server's.
func (c *Client) StaleRoot() error {
	c.rootMu.Lock()
	defer c.rootMu.Unlock()
	return c.rootStale
}

// rootKey names the kept root in the disk cache: not a URL the transport
// files anything under.
func (c *Client) rootKey() diskcache.Key {
	return diskcache.Key{Name: "openapi3 root\n" + c.http.Base.Path + "/openapi/v3", Version: "1"}
}

// keepRoot writes body, a root just read and parsed, to the disk cache
// unless it is the root kept already: the one this process wrote last, or
// on its first read the one the disk holds (a read of the disk per
// process; a write only when the root changed, so that a long-lived
// client keeps the root that names the documents on disk now). Only
// readRoot calls it, which rootFetch runs one at a time: rootKept needs
// no lock.
func (c *Client) keepRoot(body []byte) {
	if bytes.Equal(c.rootKept, body) {
		return
	}
	if c.rootKept == nil {
		if old, ok := c.opts.disk.Get(c.rootKey()); ok && bytes.Equal(old, body) {
			c.rootKept = body
			return
		}
	}
	if c.opts.disk.Put(c.rootKey(), body) == nil { // a cache: a failed write costs the fallback only
		c.rootKept = body
	}
}

// staleRoot is the kept root, when the root could not be read with err
// because the server is unavailable, else nil.
func (c *Client) staleRoot(err error) map[string]string {
	if !c.opts.staleRoot || !c.ownDisk || !unavailable(err) {
		return nil
	}
	body, ok := c.opts.disk.Get(c.rootKey())
	if !ok {
		return nil
	}
	root, perr := parseRoot(body, c.opts.limits.Paths)
	if perr != nil {
		c.opts.disk.Delete(c.rootKey())
		return nil
	}
	c.rootMu.Lock()
	c.root, c.rootStale = root, err
	c.rootMu.Unlock()
	return root
}

// RootTimeoutError is the cause of a root read's error when the server did
// not answer within the root timeout (WithRootTimeout).
type RootTimeoutError struct {
	Timeout time.Duration
}

func (e *RootTimeoutError) Error() string {
	return fmt.Sprintf("openapi3: the server did not answer the root within %v", e.Timeout)
}

// Unwrap makes the error a context.DeadlineExceeded, as a timeout is.
func (e *RootTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// unavailable says whether err says the server could not be reached or
// could not answer (no connection, a 5xx, a 429, no answer within the root
// timeout), rather than refusing (a 4xx) or the caller leaving.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.As(err, new(*RootTimeoutError)) {
		return true
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		code := int(se.Status().Code)
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests
	}
	var ue *url.Error
	return errors.As(err, &ue) && !errors.Is(err, ErrRedirect)
}

var errStaleRootNeedsCache = errors.New("openapi3: WithStaleRootOnError needs WithDiskCache")
