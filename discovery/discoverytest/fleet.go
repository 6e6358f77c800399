package discoverytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/spec3"
)

// ClusterPathPrefix is where a Fleet serves its clusters: cluster <id>'s
// API is under ClusterPathPrefix + id, as a fleet proxy exposes clusters at
// https://proxy/k8s/clusters/<id>.
const ClusterPathPrefix = "/k8s/clusters/"

// ClusterPath is the path of one cluster of a Fleet, "/k8s/clusters/<id>":
// a client's base URL is the fleet's URL followed by it.
func ClusterPath(id string) string { return ClusterPathPrefix + id }

// Surface is the options of one Server that every cluster of a Fleet
// assigned to it shares. Surfaces built from the same options serve the
// same content, and so the same ETags and OpenAPI ?hash= values.
type Surface []Option

// ClusterIDs returns n cluster ids "c0000", "c0001", ..., zero-padded to
// four digits or as many as n-1 has.
func ClusterIDs(n int) []string {
	width := max(4, len(fmt.Sprint(n-1)))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%0*d", width, i)
	}
	return out
}

// DistinctSurfaces returns k surfaces of crds synthetic CRDs each (see
// WithCRDs), surface i spreading them over groups+i groups, so that every
// surface serves other discovery and CRD OpenAPI documents than the
// others, deterministically. They differ only if the CRDs outnumber the
// groups, so it needs crds >= groups+k-1.
func DistinctSurfaces(k, crds, groups int) ([]Surface, error) {
	if k < 1 || groups < 1 || crds < groups+k-1 {
		return nil, fmt.Errorf("discoverytest: DistinctSurfaces(%d, %d, %d): need k >= 1, groups >= 1 and crds >= groups+k-1", k, crds, groups)
	}
	out := make([]Surface, k)
	for i := range out {
		out[i] = Surface{WithCRDs(crds, groups+i)}
	}
	return out, nil
}

type fleetOptions struct {
	assign func(i int, id string) int
}

// FleetOption configures a Fleet.
type FleetOption func(*fleetOptions) error

// WithAssignment chooses the surface of each cluster: assign gets the
// cluster's index and id and returns an index into the surfaces. Default:
// cluster i gets surface i % len(surfaces).
func WithAssignment(assign func(i int, id string) int) FleetOption {
	return func(o *fleetOptions) error {
		if assign == nil {
			return errors.New("discoverytest: WithAssignment(nil)")
		}
		o.assign = assign
		return nil
	}
}

// Fleet serves many clusters from one handler, each under its
// ClusterPath, as a fleet proxy does. Clusters share a few Servers (their
// surfaces), so a fleet costs memory per surface, not per cluster: a
// Server with 3,000 CRDs whose OpenAPI has been served holds hundreds of
// MiB.
//
// A request to /k8s/clusters/<id>/<path> is served by the cluster's Server
// as /<path>, and what the Server writes that names a server-relative URL
// gets the prefix back, as a proxy that rewrites responses does: the
// serverRelativeURLs of the OpenAPI v3 root and the Location of a
// redirect, such as the 301 for a stale ?hash=.
//
// A change to one cluster (Cluster.AddCRD and the like) gives it a Server
// of its own, copied from its surface's current content, so the other
// clusters do not see it. Each cluster has its own faults and its own
// counters. All methods are safe for concurrent use with requests.
type Fleet struct {
	surfaces []*Server
	ids      []string
	clusters map[string]*Cluster // fixed by NewFleet, so read without a lock
	specs    *specCache          // every Server's OpenAPI documents, shared

	mu  sync.Mutex
	own []*Server // Servers of clusters that left their surface

	roots sync.Map // *Server -> *heldRoot: its OpenAPI root, for ranges in its head
}

// heldRoot is a Server's OpenAPI root as it was for one content of its
// backend: what a range in the root's head needs, kept so that thousands of
// clusters' size probes do not each have the root built and copied (a
// real server serves it from a cached slice).
type heldRoot struct {
	content  *content
	head     []byte // the root up to its first serverRelativeURL
	size     int64  // without the prefix
	urls     int64  // serverRelativeURLs, each of which gets the prefix
	header   http.Header
	modified time.Time
}

// NewFleet builds a surface per element of surfaces and serves the clusters
// ids on them. Ids are path segments of letters, digits, '.', '_' and '-'.
func NewFleet(ids []string, surfaces []Surface, opts ...FleetOption) (*Fleet, error) {
	if len(surfaces) == 0 {
		return nil, errors.New("discoverytest: a fleet needs at least one surface")
	}
	o := fleetOptions{assign: func(i int, _ string) int { return i % len(surfaces) }}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	f := &Fleet{ids: append([]string(nil), ids...), clusters: make(map[string]*Cluster, len(ids)), specs: newSpecCache()}
	for i, id := range ids {
		if err := validClusterID(id); err != nil {
			return nil, err
		}
		if f.clusters[id] != nil {
			return nil, fmt.Errorf("discoverytest: cluster %q given twice", id)
		}
		at := o.assign(i, id)
		if at < 0 || at >= len(surfaces) {
			return nil, fmt.Errorf("discoverytest: cluster %q assigned to surface %d of %d", id, at, len(surfaces))
		}
		c := &Cluster{id: id, prefix: ClusterPath(id), fleet: f}
		c.at.Store(&placement{surface: at, left: make(chan struct{})})
		c.handler = c.faults.wrap(http.HandlerFunc(c.serve))
		f.clusters[id] = c
	}
	for i, opts := range surfaces {
		srv, err := NewServer(append(slices.Clip(opts), withSpecCache(f.specs))...)
		if err != nil {
			return nil, fmt.Errorf("discoverytest: surface %d: %w", i, err)
		}
		f.surfaces = append(f.surfaces, srv)
	}
	for _, c := range f.clusters {
		p := c.at.Load()
		p.server = f.surfaces[p.surface]
	}
	return f, nil
}

// withSpecCache makes a Server share its OpenAPI documents through sc; a
// Server's copies (Server.clone) share them too.
func withSpecCache(sc *specCache) Option {
	return func(o *options) error { o.specs = sc; return nil }
}

func validClusterID(id string) error {
	if id == "" || id == "." || id == ".." {
		return fmt.Errorf("discoverytest: cluster id %q is not a path segment", id)
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("discoverytest: cluster id %q: only letters, digits, '.', '_' and '-'", id)
		}
	}
	return nil
}

// StartFleet serves a new Fleet on loopback for the rest of the test and
// returns it with its base URL; cluster id's base URL is that URL followed
// by ClusterPath(id).
func StartFleet(tb testing.TB, ids []string, surfaces []Surface, opts ...FleetOption) (*Fleet, string) {
	tb.Helper()
	f, err := NewFleet(ids, surfaces, opts...)
	if err != nil {
		tb.Fatalf("discoverytest: %v", err)
	}
	ts := httptest.NewServer(f)
	tb.Cleanup(func() {
		f.StopWatches() // or Close would wait for the watches of clients still running
		ts.Close()
	})
	return f, ts.URL
}

// Surfaces returns the shared Servers, in the order NewFleet was given
// their options. A change made through one reaches every cluster still on
// it.
func (f *Fleet) Surfaces() []*Server { return append([]*Server(nil), f.surfaces...) }

// Cluster returns the cluster with the id, or nil.
func (f *Fleet) Cluster(id string) *Cluster { return f.clusters[id] }

// Clusters returns every cluster, in the order NewFleet was given them.
func (f *Fleet) Clusters() []*Cluster {
	out := make([]*Cluster, len(f.ids))
	for i, id := range f.ids {
		out[i] = f.clusters[id]
	}
	return out
}

// Stats sums the counters of every cluster.
func (f *Fleet) Stats() Stats {
	var st Stats
	for _, c := range f.clusters {
		cs := c.Stats()
		st.Requests += cs.Requests
		st.NotModified += cs.NotModified
		st.Errors += cs.Errors
		st.Bytes += cs.Bytes
		st.Watches += cs.Watches
	}
	return st
}

// ResetStats zeroes every cluster's counters and empties the request log
// of every Server (which grows with every request of every cluster).
func (f *Fleet) ResetStats() {
	for _, c := range f.clusters {
		c.ResetStats()
	}
	for _, s := range f.servers() {
		s.ResetRequests()
	}
}

// StopWatches ends the open watches of every Server and makes new ones end
// at once (see Server.StopWatches).
func (f *Fleet) StopWatches() {
	for _, s := range f.servers() {
		s.StopWatches()
	}
}

func (f *Fleet) servers() []*Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(append([]*Server(nil), f.surfaces...), f.own...)
}

func (f *Fleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, ClusterPathPrefix)
	id, sub, _ := strings.Cut(rest, "/")
	c := f.clusters[id]
	if !ok || c == nil {
		http.Error(w, fmt.Sprintf("discoverytest: no cluster at %s", r.URL.Path), http.StatusNotFound)
		return
	}
	// As http.StripPrefix does, on a copy.
	u := *r.URL
	u.Path = "/" + sub
	if u.RawPath != "" {
		u.RawPath = "/" + strings.TrimPrefix(strings.TrimPrefix(u.RawPath, c.prefix), "/")
	}
	inner := new(http.Request)
	*inner = *r
	inner.URL = &u

	cw := &clusterWriter{ResponseWriter: w, c: c, watch: isWatch(r)}
	var aborted any
	func() {
		defer func() { aborted = recover() }()
		c.handler.ServeHTTP(cw, inner)
	}()
	cw.finish(aborted != nil)
	if aborted != nil {
		panic(aborted) // an injected reset or truncation: net/http drops the connection
	}
}

// Cluster is one cluster of a Fleet: the Server it is answered by (shared
// with the other clusters on its surface until it is changed), its faults
// and its counters. Its methods are safe for concurrent use.
type Cluster struct {
	id, prefix string
	fleet      *Fleet
	at         atomic.Pointer[placement]
	mu         sync.Mutex // serializes changes, so one copy is made
	faults     faults
	handler    http.Handler // faults, then serve

	requests, notModified, errs, watches, bytes atomic.Int64
}

// placement is which Server answers a cluster.
type placement struct {
	server  *Server
	surface int           // index in Fleet.surfaces, or -1 for a Server of its own
	left    chan struct{} // closed when the cluster leaves the surface
}

// ID is the cluster's id.
func (c *Cluster) ID() string { return c.id }

// Path is the cluster's path under the fleet's URL, ClusterPath(ID()).
func (c *Cluster) Path() string { return c.prefix }

// Surface is the index of the cluster's surface in Fleet.Surfaces, or -1
// once a change has given it a Server of its own.
func (c *Cluster) Surface() int { return c.at.Load().surface }

// Server is the Server answering the cluster now: a shared surface (where a
// change reaches every cluster on it) until a change through the Cluster
// gives it its own.
func (c *Cluster) Server() *Server { return c.at.Load().server }

// InjectFault makes the cluster's requests to path misbehave as f says,
// with path as the cluster's Server sees it (without the prefix): "/apis",
// or "*" for every request. An unreachable cluster is what a fleet proxy
// answers for one whose agent is disconnected:
//
//	c.InjectFault("*", discoverytest.Fault{Status: http.StatusServiceUnavailable})
//
// The other clusters, on the same surface or not, are not affected.
func (c *Cluster) InjectFault(path string, f Fault) { c.faults.add(path, f) }

// ClearFaults removes the faults injected on the cluster.
func (c *Cluster) ClearFaults() { c.faults.clear() }

// Stats counts what the fleet answered for the cluster since it started or
// ResetStats: requests, 304s, errors (status >= 400, or the connection
// dropped), body bytes as the client got them (after rewriting), watches.
// A request is counted as its status line goes out, its bytes as they go.
func (c *Cluster) Stats() Stats {
	return Stats{
		Requests:    int(c.requests.Load()),
		NotModified: int(c.notModified.Load()),
		Errors:      int(c.errs.Load()),
		Bytes:       c.bytes.Load(),
		Watches:     int(c.watches.Load()),
	}
}

// ResetStats zeroes the cluster's counters.
func (c *Cluster) ResetStats() {
	for _, n := range []*atomic.Int64{&c.requests, &c.notModified, &c.errs, &c.watches, &c.bytes} {
		n.Store(0)
	}
}

// AddCRD calls Server.AddCRD on the cluster's own Server (see change).
func (c *Cluster) AddCRD(crd CRD) error {
	return c.change(func(s *Server) error { return s.AddCRD(crd) })
}

// RemoveCRD calls Server.RemoveCRD on the cluster's own Server.
func (c *Cluster) RemoveCRD(group, plural string) error {
	return c.change(func(s *Server) error { return s.RemoveCRD(group, plural) })
}

// SetGroupVersion calls Server.SetGroupVersion on the cluster's own Server.
func (c *Cluster) SetGroupVersion(group string, v apidiscoveryv2.APIVersionDiscovery) error {
	return c.change(func(s *Server) error { return s.SetGroupVersion(group, v) })
}

// RemoveGroupVersion calls Server.RemoveGroupVersion on the cluster's own
// Server.
func (c *Cluster) RemoveGroupVersion(gv schema.GroupVersion) error {
	return c.change(func(s *Server) error { return s.RemoveGroupVersion(gv) })
}

// RemoveGroup calls Server.RemoveGroup on the cluster's own Server.
func (c *Cluster) RemoveGroup(group string) error {
	return c.change(func(s *Server) error { return s.RemoveGroup(group) })
}

// SetStale calls Server.SetStale on the cluster's own Server.
func (c *Cluster) SetStale(gv schema.GroupVersion, stale bool) error {
	return c.change(func(s *Server) error { return s.SetStale(gv, stale) })
}

// ChangeSchema calls Server.ChangeSchema on the cluster's own Server.
func (c *Cluster) ChangeSchema(gv schema.GroupVersion) error {
	return c.change(func(s *Server) error { return s.ChangeSchema(gv) })
}

// change applies fn to the cluster's own Server, first copying its surface
// into one (copy on write) if it has none yet. The copy has the surface's
// options and its backends' current content, and so the same ETags and
// ?hash= values for what the change leaves alone; it starts with no
// injected faults (the cluster's own faults stay), an empty request log,
// and a fresh watch history, so the cluster's open watches end and
// clients that resume from a surface resourceVersion get a 410 and
// relist. The copy shares its surface's OpenAPI documents but holds its
// own discovery and handler3's JSON of them: about a quarter of a surface
// once served. If fn fails, the cluster stays where it was.
func (c *Cluster) change(fn func(s *Server) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.at.Load()
	if p.surface < 0 {
		return fn(p.server)
	}
	own, err := p.server.clone()
	if err != nil {
		return fmt.Errorf("discoverytest: cluster %s: copying surface %d: %w", c.id, p.surface, err)
	}
	if err := fn(own); err != nil {
		return err // the copy was never served: dropping it is enough
	}
	c.fleet.mu.Lock()
	c.fleet.own = append(c.fleet.own, own)
	c.fleet.mu.Unlock()
	c.at.Store(&placement{server: own, surface: -1, left: make(chan struct{})})
	close(p.left)
	return nil
}

// specCache shares synthetic documents between the Servers of a fleet. A
// document is a function of its group-version, revision and discovery
// entry alone, and most of a server's memory once its OpenAPI is served is
// these documents as Go values (handler3 keeps its own JSON of them): a
// cluster's copy of its surface, or a surface with the same built-ins as
// another, reuses them.
type specCache struct {
	mu   sync.Mutex
	docs map[[sha256.Size]byte]cached.Value[*spec3.OpenAPI]
}

func newSpecCache() *specCache {
	return &specCache{docs: map[[sha256.Size]byte]cached.Value[*spec3.OpenAPI]{}}
}

// get returns the document already shared for key and v, or shares doc.
func (sc *specCache) get(key string, v apidiscoveryv2.APIVersionDiscovery, doc cached.Value[*spec3.OpenAPI]) cached.Value[*spec3.OpenAPI] {
	entry, err := json.Marshal(v)
	if err != nil {
		return doc // not shared, still served
	}
	id := sha256.Sum256(append([]byte(key+"\n"), entry...))
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if shared, ok := sc.docs[id]; ok {
		return shared
	}
	sc.docs[id] = doc
	return doc
}

// clone builds a Server with s's options whose backends start from s's
// backends' current content.
func (s *Server) clone() (*Server, error) {
	contents := make([]*content, len(s.backends))
	for i, b := range s.backends {
		b.mu.Lock()
		contents[i] = b.content // replaced, never changed, by a mutation
		b.mu.Unlock()
	}
	return newServer(s.opts, func(i int) *content { return contents[i].clone() })
}

// serve answers one request of the cluster (its path already stripped)
// from the cluster's Server.
func (c *Cluster) serve(w http.ResponseWriter, r *http.Request) {
	p := c.at.Load()
	if isWatch(r) && p.surface >= 0 {
		// A watch on the surface would miss the cluster's own changes once
		// it leaves: end it then, and the client resumes on the new Server.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-p.left:
				cancel()
			case <-ctx.Done():
			}
		}()
		r = r.WithContext(ctx)
	}
	if r.URL.Path == "/openapi/v3" {
		c.serveOpenAPIRoot(w, r, p.server)
		return
	}
	p.server.ServeHTTP(w, r)
}

// rootURLKey starts every server-relative URL of an OpenAPI v3 root, where
// a cluster's prefix goes (see serveOpenAPIRoot).
var rootURLKey = []byte(`"serverRelativeURL":"/`)

// serveOpenAPIRoot serves the OpenAPI v3 root with the cluster's prefix in
// front of every serverRelativeURL. The root is compact JSON from
// encoding/json ({"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/..."}}}),
// where that key cannot occur inside a string, so a byte replacement is
// exact (and far cheaper than decoding for every cluster). The rewritten
// root is served as kube-openapi serves the original, with
// http.ServeContent: byte ranges (206) and If-Modified-Since are answered
// on the rewritten bytes.
func (c *Cluster) serveOpenAPIRoot(w http.ResponseWriter, r *http.Request, srv *Server) {
	if held := c.fleet.heldRoot(srv); held != nil && r.Header.Get("If-Range") == "" {
		// A range within the head before the first URL (a cold start's
		// probe of the root's size, bytes=0-0) is answered without
		// rewriting; the rewritten root's size follows from the count
		// of URLs.
		if end, ok := singleRangeEnd(r.Header.Get("Range")); ok && end < int64(len(held.head)) {
			for k, v := range held.header {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length") // ServeContent sets it
			size := held.size + held.urls*int64(len(c.prefix))
			http.ServeContent(w, r, "", held.modified, &sizedHead{head: held.head, size: size})
			return
		}
	}
	servedFor := soleContent(srv) // read before the root: see holdRoot
	inner := r.Clone(r.Context())
	for _, h := range []string{"Range", "If-Range", "If-Modified-Since", "If-None-Match"} {
		inner.Header.Del(h) // the whole root, to rewrite
	}
	rec := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
	var aborted any
	func() {
		defer func() { aborted = recover() }()
		srv.ServeHTTP(rec, inner)
	}()
	body := rec.body.Bytes()
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	if aborted == nil && rec.code == http.StatusOK {
		w.Header().Del("Content-Length") // ServeContent sets it
		modified, _ := http.ParseTime(rec.header.Get("Last-Modified"))
		c.fleet.holdRoot(srv, servedFor, body, rec.header, modified)
		body = bytes.ReplaceAll(body, rootURLKey, []byte(`"serverRelativeURL":"`+c.prefix+`/`))
		http.ServeContent(w, r, "", modified, bytes.NewReader(body))
		return
	}
	w.WriteHeader(rec.code)
	_, _ = w.Write(body)
	if aborted != nil {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(aborted)
	}
}

// clusterWriter counts a cluster's response and puts the cluster's prefix
// in front of a server-relative Location. (handler3's 301 has no body to
// rewrite: it sets a Content-Type first, so http.Redirect writes none.) It
// is used by one handler goroutine only.
type clusterWriter struct {
	http.ResponseWriter
	c             *Cluster
	watch         bool
	wrote, failed bool
}

func (w *clusterWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.Header()
	if loc := h.Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
		h.Set("Location", w.c.prefix+loc)
	}
	w.c.requests.Add(1)
	if code == http.StatusNotModified {
		w.c.notModified.Add(1)
	}
	if code >= 400 {
		w.failed = true
		w.c.errs.Add(1)
	}
	if w.watch {
		w.c.watches.Add(1)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *clusterWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	// Counted before it goes out, so a client that has the bytes finds them
	// counted.
	w.c.bytes.Add(int64(len(p)))
	n, err := w.ResponseWriter.Write(p)
	w.c.bytes.Add(int64(n - len(p)))
	return n, err
}

func (w *clusterWriter) Flush() {
	w.WriteHeader(http.StatusOK)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *clusterWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish counts a response that ended without a status line (net/http
// sends 200 for a handler that wrote nothing) or with a dropped connection.
func (w *clusterWriter) finish(aborted bool) {
	if !w.wrote {
		if !aborted {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.wrote = true
		w.c.requests.Add(1)
		if w.watch {
			w.c.watches.Add(1)
		}
	}
	if aborted && !w.failed {
		w.failed = true
		w.c.errs.Add(1)
	}
}

// singleRangeEnd reads a Range header of one range from a given start,
// "bytes=A-B", and returns B.
func singleRangeEnd(h string) (int64, bool) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, false
	}
	start, end, ok := strings.Cut(spec, "-")
	if !ok || start == "" {
		return 0, false
	}
	if _, err := strconv.ParseInt(start, 10, 64); err != nil {
		return 0, false
	}
	b, err := strconv.ParseInt(end, 10, 64)
	return b, err == nil
}

// sizedHead is a document of size bytes of which only the head is held,
// for http.ServeContent to answer a range within the head.
type sizedHead struct {
	head []byte
	size int64
	off  int64
}

func (s *sizedHead) Read(p []byte) (int, error) {
	if s.off >= int64(len(s.head)) {
		return 0, errors.New("discoverytest: read past the head of the rewritten OpenAPI root")
	}
	n := copy(p, s.head[s.off:])
	s.off += int64(n)
	return n, nil
}

func (s *sizedHead) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		s.off = offset
	case io.SeekCurrent:
		s.off += offset
	case io.SeekEnd:
		s.off = s.size + offset
	}
	return s.off, nil
}

// soleContent is the content of srv's backend, nil for a Server of
// several backends (whose roots are not held).
func soleContent(srv *Server) *content {
	if len(srv.backends) != 1 {
		return nil
	}
	b := srv.backends[0]
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.content
}

// heldRoot returns srv's held root if it is of its backend's current
// content.
func (f *Fleet) heldRoot(srv *Server) *heldRoot {
	v, ok := f.roots.Load(srv)
	if !ok {
		return nil
	}
	held := v.(*heldRoot)
	if current := soleContent(srv); current == nil || held.content != current {
		return nil
	}
	return held
}

// holdRoot keeps what a range in the head of srv's root needs. servedFor
// is the backend's content read before the root was served: a change in
// between makes the held root look older than it is (it is not used),
// never newer.
func (f *Fleet) holdRoot(srv *Server, servedFor *content, body []byte, header http.Header, modified time.Time) {
	first := bytes.Index(body, rootURLKey)
	if servedFor == nil || first < 0 {
		return
	}
	f.roots.Store(srv, &heldRoot{content: servedFor, head: bytes.Clone(body[:first]), size: int64(len(body)),
		urls: int64(bytes.Count(body, rootURLKey)), header: header.Clone(), modified: modified})
}
