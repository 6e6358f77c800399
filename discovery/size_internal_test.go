package discovery

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

// TestClientHoldsNoDiskStateWithoutADiskCache: what the disk cache needs
// (the warm start, the writer's state, the unconfirmed snapshot, the
// count of disk loads) is held only with one (WithDiskCache), and a
// client is then 240 bytes (a size class of Go's allocator; 544, so 576
// held, when it kept them inline, 448 when it held its options rather
// than a pointer to them, 352 with its failure log, its subscribers'
// slice and the refresh machine's copies of what it reaches through the
// client, and 288 with its reader's and resamples' copies of its fields
// and the resamples' client inline): a process may hold thousands of
// clients, package shared's identities.
func TestClientHoldsNoDiskStateWithoutADiskCache(t *testing.T) {
	if size := unsafe.Sizeof(Client{}); size > 240 {
		t.Errorf("a Client is %d bytes, want at most 240", size)
	}
	c, err := NewForHTTPClient(nil, "https://size.invalid")
	if err != nil {
		t.Fatal(err)
	}
	if c.disk != nil {
		t.Error("a client without a disk cache holds its state")
	}
	if c, err = NewForHTTPClient(nil, "https://size.invalid", WithDiskCache(&diskcachetest.Memory{})); err != nil {
		t.Fatal(err)
	}
	if c.disk == nil {
		t.Error("a client with a disk cache holds no state for it")
	}
}

// TestTableClientsShareWhatIsAlike: clients of one Surfaces table given
// equal options hold one copy of them and of their base URL, the table's
// first (package shared's identities of one server); a client given
// others, or another server, holds its own, and reads it.
func TestTableClientsShareWhatIsAlike(t *testing.T) {
	tbl := NewSurfaces()
	l1, l2 := slog.New(slog.DiscardHandler), slog.New(slog.DiscardHandler)
	newClient := func(url string, opts ...Option) *Client {
		t.Helper()
		c, err := NewForHTTPClient(nil, url, append([]Option{WithSurfaces(tbl)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const here, there = "https://api.example:6443", "https://other.example:6443"
	a := newClient(here, WithMaxAge(time.Minute), WithLogger(l1))
	b := newClient(here, WithMaxAge(time.Minute), WithLogger(l1))
	if a.opts != b.opts || a.http.Base != b.http.Base {
		t.Errorf("two clients of a table with the same options and URL share options %v, base URL %v", a.opts == b.opts, a.http.Base == b.http.Base)
	}
	for name, c := range map[string]*Client{
		"another max age": newClient(here, WithMaxAge(time.Hour), WithLogger(l1)),
		"another logger":  newClient(here, WithMaxAge(time.Minute), WithLogger(l2)),
		"no max age":      newClient(here, WithLogger(l1)),
	} {
		if c.opts == a.opts {
			t.Errorf("a client with %s holds the table's options", name)
		}
	}
	if c := newClient(here, WithMaxAge(time.Hour)); c.opts.maxAge != time.Hour || c.opts.logger != discard {
		t.Errorf("a client's own options say max age %v, logger %p", c.opts.maxAge, c.opts.logger)
	}
	if c := newClient(there, WithMaxAge(time.Minute), WithLogger(l1)); c.http.Base == a.http.Base || c.http.Base.String() != there {
		t.Errorf("a client of another server has base URL %v (the table's: %v)", c.http.Base, c.http.Base == a.http.Base)
	}
}

// TestFailureLogAtFirstFailure: a client whose refreshes never failed
// holds no failure log; the first failure makes one, which logs it, and
// the refresh after it that works logs so.
func TestFailureLogAtFirstFailure(t *testing.T) {
	var down atomic.Bool
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if down.Load() {
			return nil, errors.New("connection refused")
		}
		body := `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[]}`
		h := http.Header{"Content-Type": {"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}}
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})}
	var logged strings.Builder
	c, err := NewForHTTPClient(hc, "https://log.invalid", WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c.log.Load() != nil || logged.Len() != 0 {
		t.Fatalf("refreshes that worked made a failure log (%v) and logged %q", c.log.Load() != nil, logged.String())
	}
	down.Store(true)
	if _, err := c.Refresh(ctx); err == nil {
		t.Fatal("a refresh of a server that is down worked")
	}
	if c.log.Load() == nil || !strings.Contains(logged.String(), "discovery refresh failed") {
		t.Fatalf("a failed refresh made no failure log or logged %q", logged.String())
	}
	down.Store(false)
	if _, err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "discovery refresh works again") {
		t.Errorf("a refresh that worked after a failure logged %q", logged.String())
	}
}

// TestNoFailureKeptWhenNoneFailed: a refresh in which every group-version
// was read leaves the failure log holding nothing (it held an empty map,
// 48 bytes of every client), and one in which some failed holds those,
// until a refresh without them.
func TestNoFailureKeptWhenNoneFailed(t *testing.T) {
	var l failureLog
	logger := slog.New(slog.DiscardHandler)
	l.versionsFailed(logger, &Snapshot{content: &content{}})
	if l.lastFailed != nil {
		t.Errorf("after a refresh without failures the log holds %v", l.lastFailed)
	}
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	l.versionsFailed(logger, &Snapshot{content: &content{err: &PartialError{Errors: []*GroupVersionError{{GroupVersion: gv, Err: errors.New("503")}}}}})
	if len(l.lastFailed) != 1 || l.lastFailed[gv.String()] != "503" {
		t.Errorf("after a refresh with one failure the log holds %v", l.lastFailed)
	}
	l.versionsFailed(logger, &Snapshot{content: &content{}})
	if l.lastFailed != nil {
		t.Errorf("after the failure was read again the log holds %v", l.lastFailed)
	}
}

// TestSnapshotHoldsWhatFewHaveApart: a snapshot is 64 bytes, 80 when it
// held whether it came from the disk cache and its refresh's error
// inline, which few snapshots have: every client holds one (package
// shared's identities, a thousand of a server).
func TestSnapshotHoldsWhatFewHaveApart(t *testing.T) {
	if size := unsafe.Sizeof(Snapshot{}); size > 64 {
		t.Errorf("a Snapshot is %d bytes, want at most 64", size)
	}
}
