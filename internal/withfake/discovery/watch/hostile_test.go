package watch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
)

const (
	crdPath        = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	apiServicePath = "/apis/apiregistration.k8s.io/v1/apiservices"
)

// runInBubble runs watch.Run on a client of the server hc reaches for d
// of bubble time, then stops it and waits for it to end. A Run that sends
// more than maxWatchRequests lists and watches is stopped at once (the
// test fails): a loop with no wait in it would never let bubble time pass.
func runInBubble(t *testing.T, hc *http.Client, base string, d time.Duration, maxWatchRequests int, during func(*discovery.Client, *watch.Watcher)) (*discovery.Client, *watch.Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	counted := &countingTransport{next: hc.Transport, max: maxWatchRequests, over: cancel}
	c, err := discovery.NewForHTTPClient(&http.Client{Transport: counted}, base)
	if err != nil {
		t.Fatal(err)
	}
	w, err := watch.New(c, watch.WithUpgradePoll(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	if during != nil {
		during(c, w)
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		t.Errorf("over %d list and watch requests before %v of bubble time had passed", maxWatchRequests, d)
	}
	cancel()
	<-done
	return c, w
}

// countingTransport counts the lists and watches of CRDs and APIServices,
// and calls over once there are more than max.
type countingTransport struct {
	next http.RoundTripper
	max  int
	over func()
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasPrefix(req.URL.Path, crdPath) || strings.HasPrefix(req.URL.Path, apiServicePath) {
		if c.n.Add(1) > int64(c.max) {
			c.over()
		}
	}
	return c.next.RoundTrip(req)
}

// count is how many requests srv logged whose path begins with one of
// prefixes.
func count(srv *discoverytest.Server, prefixes ...string) int {
	n := 0
	for _, r := range srv.Requests() {
		for _, p := range prefixes {
			if strings.HasPrefix(r.Path, p) {
				n++
				break
			}
		}
	}
	return n
}

// TestGoneOnEveryRequestBacksOff: a server that answers every list and
// watch of CRDs and APIServices with 410 Gone costs a few requests a
// second at most, not a loop (client-go's informers alone looped at about
// 10,000 requests a second). In a synctest bubble: 10 s of fake time.
func TestGoneOnEveryRequestBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := discoverytest.StartInProcess(t)
		for _, p := range []string{crdPath, apiServicePath} {
			srv.InjectFault(p, discoverytest.Fault{Status: http.StatusGone})
		}
		runInBubble(t, hc, base, 10*time.Second, 30, nil)
		n := count(srv, crdPath, apiServicePath)
		if n > 30 {
			t.Errorf("%d list and watch requests in 10s of 410s, want at most 30", n)
		}
		t.Logf("%d list and watch requests in 10s of 410s", n)
	})
}

// TestWatchGoneAfterListBacksOff: lists succeed, but every watch is Gone
// (the reflector relists after each): a few requests a second at most.
func TestWatchGoneAfterListBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := discoverytest.StartInProcess(t)
		stop := make(chan struct{})
		go func() {
			// The informers list first; from then on every watch is Gone.
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					srv.CompactWatchHistory()
					srv.DropWatches()
				}
			}
		}()
		runInBubble(t, hc, base, 10*time.Second, 40, nil)
		close(stop)
		n := count(srv, crdPath, apiServicePath)
		if n > 40 {
			t.Errorf("%d list and watch requests in 10s of dropped watches, want at most 40", n)
		}
		t.Logf("%d list and watch requests in 10s of dropped, compacted watches", n)
	})
}

// TestModifiedFloodIsRateLimited: a CRD whose spec changes every 5ms (a
// MODIFIED event with a new generation each, each a real change of
// discovery) costs about one discovery refresh a second, not one per
// debounce (about 23 a second).
func TestModifiedFloodIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, hc, base := discoverytest.StartInProcess(t)
		crd := discoverytest.CRD{Group: "flood.example.com", Versions: []string{"v1"}, Kind: "Flood"}
		if err := srv.AddCRD(crd); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var before discovery.Stats
		var watchedBefore watch.Stats
		c, w := runInBubble(t, hc, base, 10*time.Second, 1000, func(c *discovery.Client, w *watch.Watcher) {
			time.Sleep(time.Second) // watching by now
			before, watchedBefore = c.Stats(), w.Stats()
			go func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
						crd.ShortNames = []string{"f" + strings.Repeat("l", i%7)}
						if err := srv.AddCRD(crd); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
		})
		close(stop)
		after, watchedAfter := c.Stats(), w.Stats()
		// 5 at once, then one a second.
		if n := after.Refreshes - before.Refreshes; n > 15 {
			t.Errorf("%d refreshes in 9s of a MODIFIED flood, want at most 15", n)
		}
		if n := watchedAfter.Events - watchedBefore.Events; n < 1000 {
			t.Errorf("%d watch events: the flood did not reach the watch", n)
		}
		t.Logf("%d refreshes (%d discovery requests), %d watch events in 9s of a MODIFIED flood",
			after.Refreshes-before.Refreshes, after.Requests-before.Requests, watchedAfter.Events-watchedBefore.Events)
	})
}

// floodCRDs serves what srv serves, except that a list of CRDs is empty
// and a watch of them streams ADDED events of distinct CRDs (metadata
// only, as Run watches them) as fast as the client reads, until the
// request ends; sent counts them.
func floodCRDs(srv http.Handler, sent *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != crdPath {
			srv.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if q := r.URL.Query().Get("watch"); q != "true" && q != "1" {
			fmt.Fprint(w, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[]}`)
			return
		}
		flusher, _ := w.(http.Flusher)
		buf := make([]byte, 0, 64<<10)
		for i := sent.Load(); r.Context().Err() == nil; i++ {
			buf = fmt.Appendf(buf, `{"type":"ADDED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"flood%d.flood.example.com","uid":"u%d","resourceVersion":"%d","generation":1,"labels":{"flood":"%0100d"}}}}`+"\n", i, i, i+2, i)
			if len(buf) > 60<<10 {
				if _, err := w.Write(buf); err != nil {
					return
				}
				if flusher != nil {
					flusher.Flush()
				}
				buf = buf[:0]
			}
			sent.Add(1)
		}
	})
}

// TestCRDFloodIsBounded floods until the server has streamed floodCount
// CRDs (about 65 MB of them, kept, on c7f0643), or for floodFor.
const (
	floodCount = 150000
	floodFor   = 20 * time.Second
)

// peakRSS is the process's peak resident set (VmHWM), where /proc says.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "peak RSS unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return "peak RSS " + strings.TrimSpace(v)
		}
	}
	return "peak RSS unknown"
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestCRDFloodIsBounded: a server whose CRD watch streams distinct CRDs
// as fast as it can does not grow the watch without bound: the watch
// holds at most its bound of objects (10,000), then the watch ends and is
// retried after a backoff. On c7f0643 every object streamed was kept
// (670 MB of RSS after 20 s; here the live heap grew by 60 MB or more
// over 150,000 CRDs); now it grows by about 15 MB while the server
// streams several times the bound.
func TestCRDFloodIsBounded(t *testing.T) {
	fake, err := discoverytest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	front := httptest.NewServer(floodCRDs(fake, &sent))
	defer front.Close()
	c, err := discovery.NewForHTTPClient(nil, front.URL)
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w, err := watch.New(c, watch.WithUpgradePoll(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(done); _ = w.Run(ctx) }()
	var peak uint64
	start := time.Now()
	for deadline := start.Add(floodFor); sent.Load() < floodCount && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		peak = max(peak, heapInUse())
	}
	peak = max(peak, heapInUse())
	cancel()
	<-done
	t.Logf("%v of flood: %d CRDs streamed, %d watch events; live heap %d MB before, %d MB at most during the flood; %s",
		time.Since(start).Round(time.Second), sent.Load(), w.Stats().Events, before>>20, peak>>20, peakRSS())
	if sent.Load() < 3*10000 {
		t.Fatalf("the server streamed %d CRDs in %v: the flood proves nothing", sent.Load(), floodFor)
	}
	if grown := int64(peak) - int64(before); grown > 40<<20 {
		t.Errorf("the live heap grew by %d MB during the flood, want at most 40 MB: the watch's memory bounded (10,000 slim objects are a few MB)", grown>>20)
	}
}
