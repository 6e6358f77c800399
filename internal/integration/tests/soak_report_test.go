//go:build linux

package tests

// The soak's measurements and report (issue 47): memory each minute, the
// requests each client kind sent, and the report with its SVG picture.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// memSample is the process's memory at one moment.
type memSample struct {
	at         time.Duration // since the soak began
	heap       uint64        // HeapAlloc after a GC: the least of heapReadings
	heapFirst  uint64        // the first of those readings
	goFirst    int           // goroutines at the first reading (goroutines: the least)
	rss        uint64        // VmRSS, bytes
	goroutines int
	sockets    int // open file descriptors that are sockets
}

// writeProfiles writes the heap's profile to path (after the GC
// sampleMemory made): heap-from.pprof at the sample growth is judged from
// and heap-end.pprof at the last, so that growth can be told apart as the
// library's or the soak's own records (go tool pprof -sample_index=
// inuse_space -diff_base heap-from.pprof heap-end.pprof).
//
// Beside it goes the goroutines' profile as text, counted by stack
// (goroutines-from.txt, ...): the count moved between about 260 and 290
// all through one 30-minute run, which a count alone cannot attribute.
func writeProfiles(t *testing.T, path string) {
	for _, p := range []struct{ name, path string }{
		{"heap", path},
		{"goroutine", filepath.Join(filepath.Dir(path), strings.Replace(strings.TrimSuffix(filepath.Base(path), ".pprof")+".txt", "heap-", "goroutines-", 1))},
	} {
		f, err := os.Create(p.path)
		if err != nil {
			t.Errorf("%s profile: %v", p.name, err)
			continue
		}
		debug := 0
		if p.name == "goroutine" {
			debug = 1
		}
		if err := pprof.Lookup(p.name).WriteTo(f, debug); err != nil {
			t.Errorf("%s profile: %v", p.name, err)
		}
		f.Close()
	}
}

// heapReadings is how many readings of the heap after a GC (and of the
// goroutines), heapApart apart, a sample takes the least of. One reading counts what the soak's
// goroutines hold in flight at that instant (the checker's ten compares a
// second, the served API's poll every 200 ms, the controllers' lists):
// one 30-minute run's readings moved 12.4-16.6 MiB within a single phase,
// and the profiles put the difference in those goroutines' in-flight
// lists and decodes, not in anything kept. The least of five readings
// over five seconds is what the process keeps; a leak raises it too.
//
// The readings are 1.3 s apart, not 1 s: the 429s' pressure holds six
// lists on each server for 500 ms of each second, about 30 goroutines
// (the tiny server's handlers and the client streams), and readings a
// second apart all fell in the same phase of it. The goroutine profiles
// of one 30-minute run put its two levels, about 260 and 290, on exactly
// those goroutines.
const (
	heapReadings = 5
	heapApart    = 1300 * time.Millisecond
)

func sampleMemory(since time.Time) memSample {
	var ms runtime.MemStats
	var heap, first uint64
	var gs, gFirst int
	for i := range heapReadings {
		if i > 0 {
			time.Sleep(heapApart)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		g := runtime.NumGoroutine()
		if i == 0 {
			first, gFirst = ms.HeapAlloc, g
		}
		if i == 0 || ms.HeapAlloc < heap {
			heap = ms.HeapAlloc
		}
		if i == 0 || g < gs {
			gs = g
		}
	}
	s := memSample{at: time.Since(since), heap: heap, heapFirst: first, goroutines: gs, goFirst: gFirst}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				s.rss = kb << 10
			}
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
				s.sockets++
			}
		}
	}
	return s
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// requestCounts counts requests a minute by client kind and by class:
// "library" (discovery, OpenAPI, and the lists and watches of CRDs and
// APIServices a discovery watch makes) and "work" (everything else).
type requestCounts struct {
	start time.Time
	mu    sync.Mutex
	n     map[string]map[string][]int // kind → class → per minute
	// observe, when set before the proxies start, serves each request
	// through next itself (to see its answer) after it is counted.
	observe func(kind string, w http.ResponseWriter, r *http.Request, next http.Handler)
	// ledger breaks the counts down by identity, path and status
	// (soak_cost_test.go).
	ledger *requestLedger
}

func newRequestCounts(start time.Time) *requestCounts {
	return &requestCounts{start: start, n: map[string]map[string][]int{}, ledger: newRequestLedger(start)}
}

// libraryPath says whether a request is one a discovery, mapping or
// OpenAPI library makes on its own account, rather than the work its
// user asked for.
func libraryPath(path string) bool {
	if path == "/api" || path == "/apis" || path == "/api/v1" || strings.HasPrefix(path, "/openapi/") || path == "/openapi/v3" {
		return true
	}
	if rest, ok := strings.CutPrefix(path, "/apis/"); ok {
		if strings.Count(rest, "/") <= 1 { // /apis/g or /apis/g/v
			return true
		}
		return strings.HasPrefix(rest, "apiextensions.k8s.io/v1/customresourcedefinitions") || strings.HasPrefix(rest, "apiregistration.k8s.io/v1/apiservices")
	}
	return false
}

func (r *requestCounts) add(kind, path string) {
	class := "work"
	if libraryPath(path) {
		class = "library"
	}
	m := int(time.Since(r.start) / time.Minute)
	r.mu.Lock()
	defer r.mu.Unlock()
	byClass := r.n[kind]
	if byClass == nil {
		byClass = map[string][]int{}
		r.n[kind] = byClass
	}
	for len(byClass[class]) <= m {
		byClass[class] = append(byClass[class], 0)
	}
	byClass[class][m]++
}

// snapshot returns a copy of the counts.
func (r *requestCounts) snapshot() map[string]map[string][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]map[string][]int{}
	for k, byClass := range r.n {
		out[k] = map[string][]int{}
		for c, v := range byClass {
			out[k][c] = append([]int(nil), v...)
		}
	}
	return out
}

// perMinute is a count's mean a minute over the run's minutes.
func perMinute(v []int, d time.Duration) float64 {
	var sum int
	for _, n := range v {
		sum += n
	}
	return float64(sum) / d.Minutes()
}

// memorySVG draws the memory samples in two panels over the same minutes:
// above, RSS in MiB on the left axis and goroutines and sockets on the
// right; below, the heap after a GC in MiB on an axis of its own (a tenth
// of RSS or less, it would lie flat on RSS's axis), from 0 to its largest
// sample.
func memorySVG(samples []memSample) string {
	const w, left, right, top, gap, bottom = 760.0, 60.0, 60.0, 30.0, 40.0, 40.0
	const ph1, ph2 = 220.0, 140.0 // the panels' heights
	h := top + ph1 + gap + ph2 + bottom
	pw := w - left - right
	var maxT time.Duration
	var maxRSS, maxHeap, maxCount float64 = 1, 1, 1
	for _, s := range samples {
		maxT = max(maxT, s.at)
		maxRSS = max(maxRSS, float64(s.rss)/(1<<20))
		maxHeap = max(maxHeap, float64(s.heap)/(1<<20))
		maxCount = max(maxCount, float64(s.goroutines), float64(s.sockets))
	}
	if maxT == 0 {
		maxT = time.Minute
	}
	x := func(at time.Duration) float64 { return left + pw*float64(at)/float64(maxT) }
	// y maps v of a scale whose top is full onto the panel from y0 down
	// to y0+ph.
	y := func(v, full, y0, ph float64) float64 { return y0 + ph - ph*v/full }
	top2 := top + ph1 + gap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="13">kubeatlas soak: memory each minute</text>`+"\n", left)
	line := func(x1, y1, x2, y2 float64) {
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", x1, y1, x2, y2)
	}
	for _, p := range []struct{ y0, ph float64 }{{top, ph1}, {top2, ph2}} {
		line(left, p.y0+p.ph, left+pw, p.y0+p.ph)
		line(left, p.y0, left, p.y0+p.ph)
	}
	line(left+pw, top, left+pw, top+ph1)
	for i := 0; i <= 4; i++ {
		v := float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f MiB</text>`+"\n", left-4, y(v, 1, top, ph1)+4, v*maxRSS)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%.0f</text>`+"\n", left+pw+4, y(v, 1, top, ph1)+4, v*maxCount)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.1f MiB</text>`+"\n", left-4, y(v, 1, top2, ph2)+4, v*maxHeap)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%.1f min</text>`+"\n", x(time.Duration(v*float64(maxT))), top2+ph2+16, v*maxT.Minutes())
	}
	series := []struct {
		name, color string
		value       func(memSample) float64
		scale       float64
		y0, ph      float64
	}{
		{"RSS (MiB, left)", "#ff7f0e", func(s memSample) float64 { return float64(s.rss) / (1 << 20) }, maxRSS, top, ph1},
		{"goroutines (right)", "#2ca02c", func(s memSample) float64 { return float64(s.goroutines) }, maxCount, top, ph1},
		{"sockets (right)", "#d62728", func(s memSample) float64 { return float64(s.sockets) }, maxCount, top, ph1},
		{"heap after a GC (MiB, below)", "#1f77b4", func(s memSample) float64 { return float64(s.heap) / (1 << 20) }, maxHeap, top2, ph2},
	}
	for i, se := range series {
		var pts []string
		for _, s := range samples {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.at), y(se.value(s), se.scale, se.y0, se.ph)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", se.color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", left+10+float64(i)*160, h-6, se.color, se.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// memTrend is how much of value the samples gained from the first to the
// last on the least-squares line through them all (fittedGrowth), each at
// its time.
func memTrend(samples []memSample, value func(memSample) float64) float64 {
	xs, ys := make([]float64, len(samples)), make([]float64, len(samples))
	for i, m := range samples {
		xs[i], ys[i] = m.at.Seconds(), value(m)
	}
	return fittedGrowth(xs, ys)
}

// fittedGrowth fits the least-squares line through the points (xs[i],
// ys[i]) and returns its rise from the first x to the last, over its
// value at the first: a steady grower shows whole, while a reading high
// or low by chance moves it by its share of the fit, not all of it. Fewer
// than two points, or a line at or below zero at the first x, grow 0.
func fittedGrowth(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i] / n
		my += ys[i] / n
	}
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	slope := sxy / sxx
	first := my + slope*(xs[0]-mx)
	if first <= 0 {
		return 0
	}
	return slope * (xs[len(xs)-1] - xs[0]) / first
}

// growth is how much v grew from a to b, as a fraction of a.
func growth(a, b float64) float64 {
	if a == 0 {
		return 0
	}
	return (b - a) / a
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestFittedGrowth: the growth the soak judges is the fitted line's. Run
// E's heap (a 30-minute run, minutes 5 to the end, MiB) rose 12.9% from
// its minute-5 reading to its last, with no trend (+0.4% on the line);
// the same readings with 1% a minute added grow about 25%; a flat series
// whose first reading is high by chance does not shrink by its gap.
func TestFittedGrowth(t *testing.T) {
	runE := []float64{12.1, 12.2, 14.9, 14.0, 15.2, 12.3, 14.4, 14.3, 14.0, 12.6, 12.5, 12.7, 13.0, 13.2, 13.5, 14.8, 13.6, 13.1, 12.9, 13.9, 13.2, 13.4, 13.8, 13.6}
	xs := make([]float64, len(runE))
	grown := make([]float64, len(runE))
	for i := range runE {
		xs[i] = float64(5 + i)
		grown[i] = runE[i] * (1 + 0.01*float64(i))
	}
	flat := []float64{20, 10, 10, 10, 10, 10, 10, 10}
	for _, c := range []struct {
		name     string
		xs, ys   []float64
		min, max float64
	}{
		{"run E's heap", xs, runE, -0.05, 0.05},
		{"run E's heap, 1% a minute added", xs, grown, 0.2, 0.3},
		{"flat, the first reading high", xs[:len(flat)], flat, -0.5, -0.1},
		{"one point", xs[:1], runE[:1], 0, 0},
	} {
		if g := fittedGrowth(c.xs, c.ys); g < c.min || g > c.max {
			t.Errorf("%s: growth %.3f, want within [%.2f, %.2f]", c.name, g, c.min, c.max)
		}
	}
	if g := growth(runE[0], runE[len(runE)-1]); g < 0.12 {
		t.Errorf("run E's end points grew %.3f; the test's premise is 0.124", g)
	}
}
