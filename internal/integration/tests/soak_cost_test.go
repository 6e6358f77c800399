//go:build linux

package tests

// The soak's cost ledger (issue 47): where the controllers' library
// requests go, by identity, path and status, minute by minute, and what
// led to each 404 the controllers got through kubeatlas (the CRD watch's
// events, the identity's discovery reads, and when each server's
// discovery stopped listing the resource).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/shared"
)

// soakRequestLogVar, set to anything, makes the soak write requests.log
// into its report directory: one line per request of a kubeatlas client
// kind (and per soakGroup request of controller-runtime's defaults), and
// one per chunk of the CRD watches they hold open.
const soakRequestLogVar = "KUBEATLAS_SOAK_REQUEST_LOG"

// ledgerMaxLines bounds the entries kept until the end (a 30-minute run
// makes about 40,000). They are kept on disk, not in the heap (spill):
// held in memory they were the soak's own heap growth, about 2 MB in 22
// minutes, which the growth target would have charged to the library.
const ledgerMaxLines = 400_000

// ledgerKey is one cell of the breakdown.
type ledgerKey struct {
	kind, identity, class, status string
}

// ledgerEntry is one request (or watch chunk) the 404 timelines read.
type ledgerEntry struct {
	at       time.Duration
	server   string
	kind     string
	identity string
	class    string
	path     string
	status   int
	// crds names the CRDs a watch chunk tells of, with its event types
	// ("DELETED gadgets.soak.kubeatlas.test").
	crds string
}

// requestLedger records the proxies' requests: counts by ledgerKey a
// minute, and the entries of the kubeatlas clients' requests.
type requestLedger struct {
	start time.Time

	mu      sync.Mutex
	cells   map[ledgerKey][]int
	spill   *ledgerSpill // the entries, on disk; nil before the first
	kept    int          // entries written to spill
	dropped int
	// listed: server name → "group/version/resource" → offsets at which
	// the checker's read of that server's aggregated discovery began
	// listing it (even index) and stopped (odd index).
	listed map[string]map[string][]time.Duration
}

func newRequestLedger(start time.Time) *requestLedger {
	return &requestLedger{start: start, cells: map[ledgerKey][]int{}, listed: map[string]map[string][]time.Duration{}}
}

// identityOf is who a request through the proxies is: the user it
// impersonates, or "admin" without one (identityName).
func identityOf(r *http.Request) string {
	if id := r.Header.Get("Impersonate-User"); id != "" {
		return id
	}
	return "admin"
}

// requestClass is the part of the API a request reads: the breakdown's
// path column.
func requestClass(r *http.Request) string {
	p := r.URL.Path
	switch {
	case p == "/api" || p == "/apis":
		if strings.Contains(r.Header.Get("Accept"), "apidiscovery.k8s.io") {
			return p + " (aggregated)"
		}
		return p
	case p == "/api/v1" || strings.HasPrefix(p, "/apis/") && strings.Count(p, "/") <= 3:
		return "group-version"
	case p == "/openapi/v3":
		return "openapi root"
	case strings.HasPrefix(p, "/openapi/"):
		return "openapi document"
	case strings.HasPrefix(p, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"):
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			return "crd watch"
		}
		return "crd list"
	case strings.HasPrefix(p, "/apis/apiregistration.k8s.io/v1/apiservices"):
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			return "apiservice watch"
		}
		return "apiservice list"
	}
	return "work"
}

// observe wraps w, the proxy's writer for r to server's proxy, so that
// the response's status (and a watch's chunks) are recorded.
func (l *requestLedger) observe(w http.ResponseWriter, r *http.Request, server string) http.ResponseWriter {
	if l == nil {
		return w
	}
	kind, _, _ := strings.Cut(r.Header.Get("User-Agent"), " ")
	identity := identityOf(r)
	class := requestClass(r)
	keep := strings.HasPrefix(kind, "kubeatlas-") || strings.Contains(r.URL.Path, soakGroup)
	return &ledgerWriter{ResponseWriter: w, l: l, kind: kind, identity: identity, class: class, server: server, path: r.URL.RequestURI(), keep: keep}
}

// ledgerWriter records its response's status at WriteHeader (a watch's
// lasts as long as the watch) and, for a CRD watch, each chunk.
type ledgerWriter struct {
	http.ResponseWriter
	l                                   *requestLedger
	kind, identity, class, server, path string
	keep                                bool
	wrote                               bool
}

func (w *ledgerWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.l.add(w, code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *ledgerWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.keep && w.class == "crd watch" {
		if crds := watchChunk(p); crds != "" {
			w.l.chunk(w, crds)
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *ledgerWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *ledgerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// watchChunk names the soak CRDs a chunk of a CRD watch tells of, with
// the event types in it, in JSON or protobuf alike (both carry the type
// and the name as plain bytes); "" for a chunk that names none.
func watchChunk(p []byte) string {
	var names []string
	for _, plural := range []string{"widgets", "gadgets"} {
		if bytes.Contains(p, []byte(plural+"."+soakGroup)) {
			names = append(names, plural)
		}
	}
	if names == nil {
		return ""
	}
	var types []string
	for _, t := range []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK"} {
		if bytes.Contains(p, []byte(t)) {
			types = append(types, t)
		}
	}
	deleting := ""
	if bytes.Contains(p, []byte("deletionTimestamp")) {
		deleting = " (deleting)"
	}
	return strings.Join(types, ",") + " " + strings.Join(names, ",") + deleting
}

func (l *requestLedger) add(w *ledgerWriter, code int) {
	at := time.Since(l.start)
	m := int(at / time.Minute)
	k := ledgerKey{kind: w.kind, identity: w.identity, class: w.class, status: fmt.Sprint(code)}
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.cells[k]
	for len(v) <= m {
		v = append(v, 0)
	}
	v[m]++
	l.cells[k] = v
	if w.keep {
		l.entry(ledgerEntry{at: at, server: w.server, kind: w.kind, identity: w.identity, class: w.class, path: w.path, status: code})
	}
}

func (l *requestLedger) chunk(w *ledgerWriter, crds string) {
	at := time.Since(l.start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entry(ledgerEntry{at: at, server: w.server, kind: w.kind, identity: w.identity, class: "crd watch event", path: w.path, crds: crds})
}

// entry keeps e; l.mu is held.
func (l *requestLedger) entry(e ledgerEntry) {
	if l.kept >= ledgerMaxLines {
		l.dropped++
		return
	}
	if l.spill == nil {
		sp, err := newLedgerSpill()
		if err != nil {
			l.dropped++
			return
		}
		l.spill = sp
	}
	if err := l.spill.write(e); err != nil {
		l.dropped++
		return
	}
	l.kept++
}

// entries reads back every entry kept, in order; l.mu is held. For the
// report, after the run.
func (l *requestLedger) entries() []ledgerEntry {
	if l.spill == nil {
		return nil
	}
	es, err := l.spill.readAll()
	if err != nil {
		l.dropped += l.kept - len(es)
	}
	return es
}

// close removes the spill's file.
func (l *requestLedger) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spill != nil {
		l.spill.remove()
		l.spill = nil
	}
}

// ledgerSpill is the ledger's entries in a temporary file, a JSON object
// a line, written through a buffer.
type ledgerSpill struct {
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
}

// spilled is a ledgerEntry as a line of the spill.
type spilled struct {
	At       time.Duration `json:"a"`
	Server   string        `json:"s,omitempty"`
	Kind     string        `json:"k,omitempty"`
	Identity string        `json:"i,omitempty"`
	Class    string        `json:"c,omitempty"`
	Path     string        `json:"p,omitempty"`
	Status   int           `json:"t,omitempty"`
	CRDs     string        `json:"d,omitempty"`
}

func newLedgerSpill() (*ledgerSpill, error) {
	f, err := os.CreateTemp("", "soak-ledger-*.jsonl")
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	return &ledgerSpill{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

func (sp *ledgerSpill) write(e ledgerEntry) error {
	return sp.enc.Encode(spilled{e.at, e.server, e.kind, e.identity, e.class, e.path, e.status, e.crds})
}

func (sp *ledgerSpill) readAll() ([]ledgerEntry, error) {
	if err := sp.w.Flush(); err != nil {
		return nil, err
	}
	f, err := os.Open(sp.f.Name())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ledgerEntry
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var x spilled
		if err := dec.Decode(&x); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, err
		}
		out = append(out, ledgerEntry{at: x.At, server: x.Server, kind: x.Kind, identity: x.Identity, class: x.Class, path: x.Path, status: x.Status, crds: x.CRDs})
	}
}

func (sp *ledgerSpill) remove() {
	sp.f.Close()
	os.Remove(sp.f.Name())
}

// truth records what server's discovery listed of soakGroup at a
// checker's read begun at at: kinds maps "group/version/Kind" to the
// resource.
func (l *requestLedger) truth(server string, at time.Time, kinds map[string]string) {
	if l == nil {
		return
	}
	now := map[string]bool{}
	for gvk, res := range kinds {
		if g, rest, _ := strings.Cut(gvk, "/"); g == soakGroup {
			v, _, _ := strings.Cut(rest, "/")
			now[g+"/"+v+"/"+res] = true
		}
	}
	off := at.Sub(l.start)
	l.mu.Lock()
	defer l.mu.Unlock()
	byRes := l.listed[server]
	if byRes == nil {
		byRes = map[string][]time.Duration{}
		l.listed[server] = byRes
	}
	for gvr := range now {
		if len(byRes[gvr])%2 == 0 {
			byRes[gvr] = append(byRes[gvr], off)
		}
	}
	for gvr, v := range byRes {
		if !now[gvr] && len(v)%2 == 1 {
			byRes[gvr] = append(v, off)
		}
	}
}

// report writes the breakdown of kind's library requests by identity,
// path and status, each minute, and the timelines of the first limit
// 404s kind's work got.
func (l *requestLedger) report(b *strings.Builder, kind string, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(b, "\n== %s's library requests by identity, path and status, each minute\n", kind)
	var keys []ledgerKey
	for k := range l.cells {
		if k.kind == kind && k.class != "work" {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b ledgerKey) int {
		return strings.Compare(a.identity+" "+a.class+" "+a.status, b.identity+" "+b.class+" "+b.status)
	})
	for _, k := range keys {
		sum := 0
		for _, n := range l.cells[k] {
			sum += n
		}
		fmt.Fprintf(b, "  %-7s %-22s %s %6d  %v\n", k.identity, k.class, k.status, sum, l.cells[k])
	}
	var byStatus []string
	for k, v := range l.cells {
		if k.kind == kind && k.class == "work" && k.status != "200" {
			byStatus = append(byStatus, fmt.Sprintf("%s %s %v", k.identity, k.status, v))
		}
	}
	slices.Sort(byStatus)
	fmt.Fprintf(b, "  work answered other than 200, by identity: %s\n", strings.Join(byStatus, "; "))

	entries := l.entries()
	var notFound []ledgerEntry
	for _, e := range entries {
		if e.kind == kind && e.class == "work" && e.status == http.StatusNotFound {
			notFound = append(notFound, e)
		}
	}
	l.notFoundSummary(b, kind, notFound)
	fmt.Fprintf(b, "\n== timelines of %s's first %d 404s (of %d): what led to each\n", kind, min(limit, len(notFound)), len(notFound))
	for _, e := range notFound[:min(limit, len(notFound))] {
		l.timeline(b, e, entries)
	}
	if l.dropped > 0 {
		fmt.Fprintf(b, "(%d requests not kept: more than %d)\n", l.dropped, ledgerMaxLines)
	}
}

// notFoundSummary sorts kind's 404s by identity and by how long before
// each the server that answered it had stopped listing its resource in
// its discovery (the checker's reads, a second apart: "stopped" is the
// first read that did not list it). A 404 while the server's discovery
// still listed the resource is the server's (its handler ahead of its
// discovery); one after is the client's answer lagging the server.
func (l *requestLedger) notFoundSummary(b *strings.Builder, kind string, notFound []ledgerEntry) {
	buckets := []struct {
		name string
		max  time.Duration
	}{{"while listed", 0}, {"<1s after", time.Second}, {"1-2s", 2 * time.Second}, {"2-5s", 5 * time.Second}, {"5-20s", 20 * time.Second}, {">20s", 1 << 60}, {"never listed there", 1 << 62}}
	byIdentity := map[string][]int{}
	for _, e := range notFound {
		gvr := soakResourceOf(e.path)
		v := l.listed[e.server][gvr]
		i := sort.Search(len(v), func(i int) bool { return v[i] > e.at }) // transitions up to e.at: v[:i]
		var late time.Duration
		switch {
		case i == 0:
			late = 1 << 61 // never listed on that server before
		case i%2 == 1:
			late = 0 // listed at the last read before
		default:
			late = max(e.at-v[i-1], 1)
		}
		counts := byIdentity[e.identity]
		if counts == nil {
			counts = make([]int, len(buckets))
			byIdentity[e.identity] = counts
		}
		for j, bk := range buckets {
			if late <= bk.max {
				counts[j]++
				break
			}
		}
	}
	var names []string
	for _, bk := range buckets {
		names = append(names, bk.name)
	}
	fmt.Fprintf(b, "\n== %s's 404s by identity and by when the server that answered had stopped listing the resource (checker's reads, 1 s apart): %s\n", kind, strings.Join(names, ", "))
	for _, id := range sortedKeys(byIdentity) {
		fmt.Fprintf(b, "  %-7s %v\n", id, byIdentity[id])
	}
}

// timeline writes what led to 404 e: the CRD watch's events of its CRD in
// the 20 s before, its identity's discovery reads in that time, and when
// each server's discovery stopped listing its resource.
func (l *requestLedger) timeline(b *strings.Builder, e ledgerEntry, entries []ledgerEntry) {
	gvr := soakResourceOf(e.path)
	fmt.Fprintf(b, "+%s  %s %s through %s: %d (%s)\n", fmtOffsetMs(e.at), e.identity, strings.SplitN(e.path, "?", 2)[0], e.server, e.status, gvr)
	from := e.at - 20*time.Second
	plural := ""
	if parts := strings.Split(gvr, "/"); len(parts) == 3 {
		plural = parts[2]
	}
	for _, x := range entries {
		if x.at < from || x.at > e.at {
			continue
		}
		switch {
		case x.class == "crd watch event" && plural != "" && strings.Contains(x.crds, plural):
			fmt.Fprintf(b, "    +%s  watch event at %s's %s: %s\n", fmtOffsetMs(x.at), x.identity, x.server, x.crds)
		case x.kind == e.kind && x.identity == e.identity && x.class != "work" && x.class != "crd watch event" && !strings.HasPrefix(x.class, "openapi"):
			fmt.Fprintf(b, "    +%s  %s read %s from %s: %d\n", fmtOffsetMs(x.at), x.identity, x.class, x.server, x.status)
		}
	}
	for _, server := range sortedKeys(l.listed) {
		v := l.listed[server][gvr]
		var spans []string
		for i := 0; i < len(v); i += 2 {
			end := "on"
			if i+1 < len(v) {
				end = "+" + fmtOffsetMs(v[i+1])
			}
			if i+1 < len(v) && v[i+1] < from {
				continue
			}
			spans = append(spans, "+"+fmtOffsetMs(v[i])+" to "+end)
		}
		fmt.Fprintf(b, "    %s's discovery (the checker's reads, each second) listed %s: %s\n", server, gvr, strings.Join(spans, ", "))
	}
}

// soakResourceOf is "group/version/resource" of a request path of
// soakGroup's, "" for another.
func soakResourceOf(path string) string {
	p := strings.SplitN(path, "?", 2)[0]
	rest, ok := strings.CutPrefix(p, "/apis/"+soakGroup+"/")
	if !ok {
		return ""
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) >= 4 && parts[1] == "namespaces":
		return soakGroup + "/" + parts[0] + "/" + parts[3]
	case len(parts) >= 2:
		return soakGroup + "/" + parts[0] + "/" + parts[1]
	}
	return ""
}

func fmtOffsetMs(d time.Duration) string {
	d = d.Round(time.Millisecond)
	return fmt.Sprintf("%d:%06.3f", int(d.Minutes()), (d % time.Minute).Seconds())
}

// writeLog writes requests.log into dir when soakRequestLogVar is set.
func (l *requestLedger) writeLog(dir string) error {
	if os.Getenv(soakRequestLogVar) == "" {
		return nil
	}
	l.mu.Lock()
	var b bytes.Buffer
	for _, e := range l.entries() {
		fmt.Fprintf(&b, "+%s %s %s %s %s %d %s %s\n", fmtOffsetMs(e.at), e.server, e.kind, e.identity, strings.ReplaceAll(e.class, " ", "_"), e.status, e.path, e.crds)
	}
	l.mu.Unlock()
	return os.WriteFile(filepath.Join(dir, "requests.log"), b.Bytes(), 0o644)
}

// TestSoakLedger pins what the ledger tells apart: the path classes of
// the breakdown, the resource of a 404, a CRD watch's chunk, and the
// spans the checker's reads give.
func TestSoakLedger(t *testing.T) {
	for path, want := range map[string]string{
		"/apis": "/apis (aggregated)", "/api": "/api (aggregated)", "/api/v1": "group-version",
		"/apis/soak.kubeatlas.test/v1": "group-version", "/openapi/v3": "openapi root",
		"/openapi/v3/apis/soak.kubeatlas.test/v1?hash=1":                     "openapi document",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=true": "crd watch",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions?limit=500":  "crd list",
		"/apis/apiregistration.k8s.io/v1/apiservices?watch=1":                "apiservice watch",
		"/apis/soak.kubeatlas.test/v1/namespaces/default/gadgets":            "work",
	} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("Accept", discoveryV2)
		if got := requestClass(r); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if got := soakResourceOf("/apis/soak.kubeatlas.test/v1/namespaces/default/gadgets?limit=1"); got != soakGroup+"/v1/gadgets" {
		t.Errorf("soakResourceOf: %q", got)
	}
	if got := watchChunk([]byte(`{"type":"DELETED","object":{"metadata":{"name":"gadgets.soak.kubeatlas.test"}}}`)); got != "DELETED gadgets" {
		t.Errorf("watchChunk: %q", got)
	}
	if got := watchChunk([]byte(`{"type":"MODIFIED","object":{"metadata":{"name":"other.example.com"}}}`)); got != "" {
		t.Errorf("watchChunk of another CRD: %q", got)
	}
	start := time.Now()
	l := newRequestLedger(start)
	l.truth("kas-0", start.Add(time.Second), map[string]string{soakGroup + "/v1/Gadget": "gadgets"})
	l.truth("kas-0", start.Add(2*time.Second), map[string]string{soakGroup + "/v1/Gadget": "gadgets"})
	l.truth("kas-0", start.Add(3*time.Second), map[string]string{})
	if got := l.listed["kas-0"][soakGroup+"/v1/gadgets"]; len(got) != 2 || got[0] != time.Second || got[1] != 3*time.Second {
		t.Errorf("listed spans: %v, want [1s 3s]", got)
	}
	var b strings.Builder
	path := "/apis/" + soakGroup + "/v1/namespaces/default/gadgets"
	l.notFoundSummary(&b, "k", []ledgerEntry{
		{at: 2500 * time.Millisecond, server: "kas-0", identity: "admin", path: path},  // listed at the read before
		{at: 4500 * time.Millisecond, server: "kas-0", identity: "admin", path: path},  // 1.5 s after the read that did not list it
		{at: 4500 * time.Millisecond, server: "kas-1", identity: "user-1", path: path}, // never listed there
	})
	if !strings.Contains(b.String(), "admin   [1 0 1 0 0 0 0]") || !strings.Contains(b.String(), "user-1  [0 0 0 0 0 0 1]") {
		t.Errorf("notFoundSummary:\n%s", b.String())
	}

	// The entries are kept on disk, not in the heap, and come back whole
	// for the report: a 404 and the watch event before it.
	defer l.close()
	crdWatch := &ledgerWriter{l: l, kind: "kubeatlas-controller", identity: "admin", class: "crd watch", server: "kas-0", path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=1", keep: true}
	l.chunk(crdWatch, "DELETED gadgets")
	l.add(&ledgerWriter{l: l, kind: "kubeatlas-controller", identity: "user-1", class: "work", server: "kas-0", path: path + "?limit=1", keep: true}, http.StatusNotFound)
	l.add(&ledgerWriter{l: l, kind: "kubeatlas-controller", identity: "user-1", class: "work", server: "kas-0", path: path, keep: false}, http.StatusOK)
	if l.spill == nil || l.kept != 2 {
		t.Fatalf("kept %d entries (spill %v), want 2 on disk", l.kept, l.spill != nil)
	}
	b.Reset()
	l.report(&b, "kubeatlas-controller", 1)
	for _, want := range []string{"user-1 " + path + " through kas-0: 404", "watch event at admin's kas-0: DELETED gadgets"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	name := l.spill.f.Name()
	l.close()
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Errorf("the spill %s is left after close: %v", name, err)
	}
}

// followSampler samples, each second, whether each controller identity's
// discovery client (package shared's, the one its reconciles use) is
// followed (discovery.Client.Following: it holds the content of the
// leader whose watch runs) and whether its snapshot, and the leader's,
// joins disagreeing servers' views (Snapshot.Mixed), minute by minute: a
// follower not followed proves its view at the lookups that need it.
type followSampler struct {
	start time.Time

	mu      sync.Mutex
	samples map[string][][3]int // name → minute → samples, following, mixed
}

// sampleFollowing starts the sampler over the controllers' identities
// (configs, acquired from reg as their reconciles acquire them) and the
// leader's handle, until ctx ends.
func sampleFollowing(ctx context.Context, s *soak, wg *sync.WaitGroup, reg *shared.Registry, configs []*rest.Config, leader *shared.Handle) *followSampler {
	f := &followSampler{start: s.start, samples: map[string][][3]int{}}
	handles := map[string]*shared.Handle{"leader": leader}
	for i, cfg := range configs {
		h, err := reg.Acquire(cfg)
		if err != nil {
			s.t.Fatal(err)
		}
		handles[identityName(i)] = h
	}
	s.goSafe(wg, "follow sampler", func() {
		defer func() {
			for name, h := range handles {
				if name != "leader" {
					h.Release()
				}
			}
		}()
		for sleepCtx(ctx, time.Second) {
			m := int(time.Since(f.start) / time.Minute)
			f.mu.Lock()
			for name, h := range handles {
				dc := h.Discovery()
				v := f.samples[name]
				for len(v) <= m {
					v = append(v, [3]int{})
				}
				v[m][0]++
				if name != "leader" && dc.Following() {
					v[m][1]++
				}
				if c := dc.Current(); c != nil && c.Mixed() {
					v[m][2]++
				}
				f.samples[name] = v
			}
			f.mu.Unlock()
		}
	})
	return f
}

func (f *followSampler) report(b *strings.Builder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b.WriteString("\n== the controllers' identities each second, by minute: followed (holding the watch leader's content) and mixed (a union of disagreeing servers' views), of the samples\n")
	for _, name := range sortedKeys(f.samples) {
		var parts []string
		for _, v := range f.samples[name] {
			if name == "leader" {
				parts = append(parts, fmt.Sprintf("mixed %d/%d", v[2], v[0]))
			} else {
				parts = append(parts, fmt.Sprintf("followed %d/%d mixed %d/%d", v[1], v[0], v[2], v[0]))
			}
		}
		fmt.Fprintf(b, "  %-7s %s\n", name, strings.Join(parts, "; "))
	}
}
