// Package flight runs a piece of work once for all the callers that want
// it at the same time. Unlike x/sync/singleflight, the work runs on a
// context of its own, bounded by a timeout, so one caller giving up does
// not fail the others with its context error; and work that every waiting
// caller has given up on is cancelled, not left running.
package flight
