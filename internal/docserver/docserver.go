package docserver

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// The aggregated /api and /apis and the /version of a real kube-apiserver
// v1.36.3, copied from ../shared/fixtures (as discovery/discoverytest's
// are).
//
//go:embed testdata/api.v2.json testdata/apis.v2.json testdata/version.json
var fixtures embed.FS

// Option configures a Server.
type Option func(*options) error

type options struct{ crds, groups int }

// WithCRDs adds n synthetic CRDs over groups groups, named and shaped as
// discoverytest.WithCRDs names and shapes them (Widget0000 in
// g000.stress.example.com).
func WithCRDs(n, groups int) Option {
	return func(o *options) error {
		if n < 0 || groups < 1 {
			return fmt.Errorf("docserver: WithCRDs(%d, %d): need n >= 0 and groups >= 1", n, groups)
		}
		o.crds, o.groups = n, groups
		return nil
	}
}

// CRD is a custom resource a test adds to a Server.
type CRD struct {
	Group string
	// Versions in preference order (the first is the preferred version).
	Versions   []string
	Kind       string
	Plural     string // defaults to lower(Kind)+"s"
	Namespaced bool
	ShortNames []string
	Categories []string
	// Status and Scale add the status and scale subresources.
	Status, Scale bool
}

// Fault is what a Server does to requests for a path, as
// discoverytest.Fault is: zero fields do nothing, several may combine (a
// latency before a 503, say).
type Fault struct {
	// Latency delays the answer (or the failure), or until the request is
	// cancelled.
	Latency time.Duration
	// Status answers with this code and a short JSON Status body instead of
	// serving the request (500, 503, 429, ...).
	Status int
	// RetryAfter sets the Retry-After header (whole seconds) on a Status answer.
	RetryAfter time.Duration
	// ResetAfter, when positive, serves the real response but drops the
	// connection after this many body bytes, as a crashed server would.
	ResetAfter int
	// Truncate, when positive, serves only the first Truncate body bytes
	// while the Content-Length promises the whole body.
	Truncate int
	// ContentType replaces the response's Content-Type.
	ContentType string
	// Oversize appends this many bytes of JSON whitespace to the body, which
	// keeps a JSON document valid but larger than a client may accept.
	Oversize int
	// Times limits the fault to the next Times matching requests; 0 means
	// every request until ClearFaults.
	Times int
}

// faultRule is one InjectFault: the path is exact, or a prefix when it
// ends in "*".
type faultRule struct {
	path  string
	fault Fault
	left  int // requests left when fault.Times > 0
}

// Request is one request a Server answered.
type Request struct {
	Method, Path, Accept, IfNoneMatch string
	Status                            int
	Bytes                             int64
}

// Stats sums a Server's Requests.
type Stats struct {
	Requests, NotModified int
	Bytes                 int64
}

// Server serves aggregated discovery v2 (JSON and protobuf) of a
// kube-apiserver v1.36.3 plus the CRDs a test adds, with its ETags and 304s,
// and OpenAPI v3 through kube-openapi's handler3 (the real server's). Its
// methods are safe for concurrent use.
type Server struct {
	openapi *handler3.OpenAPIService

	mu       sync.Mutex
	core     apidiscoveryv2.APIGroupDiscoveryList
	apis     apidiscoveryv2.APIGroupDiscoveryList
	revision map[schema.GroupVersion]int
	docs     map[string]document // by path: /api, /apis
	faults   []*faultRule
	requests []Request
}

// document is one aggregated list in both encodings and its ETag.
type document struct {
	json, protobuf []byte
	etag           string
}

// NewServer is a Server with the v1.36.3 built-in groups and opts.
func NewServer(opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &Server{openapi: handler3.NewOpenAPIService(), revision: map[schema.GroupVersion]int{}}
	for name, into := range map[string]*apidiscoveryv2.APIGroupDiscoveryList{"api.v2.json": &s.core, "apis.v2.json": &s.apis} {
		b, err := fixtures.ReadFile("testdata/" + name)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, into); err != nil {
			return nil, fmt.Errorf("docserver: %s: %w", name, err)
		}
	}
	for _, crd := range syntheticCRDs(o.crds, o.groups) {
		s.addCRDLocked(crd)
	}
	if err := s.publishLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start serves a new Server on loopback until the test ends.
func Start(t testing.TB, opts ...Option) (*Server, string) {
	t.Helper()
	s, err := NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// syntheticCRDs is discoverytest.SyntheticCRDs (internal/withfake/docserver
// checks that both servers serve the same documents).
func syntheticCRDs(n, groups int) []CRD {
	out := make([]CRD, 0, n)
	for i := range n {
		g := i % groups
		crd := CRD{
			Group:      fmt.Sprintf("g%03d.stress.example.com", g),
			Kind:       fmt.Sprintf("Widget%04d", i),
			Namespaced: i%3 != 2,
			Status:     i%2 == 0,
			Scale:      i%4 == 0,
			Versions:   []string{"v1"},
		}
		if g%2 == 1 {
			crd.Versions = append(crd.Versions, "v1beta1")
		}
		if g%5 == 4 {
			crd.Versions = append(crd.Versions, "v1alpha1")
		}
		if i%2 == 1 {
			crd.ShortNames = []string{fmt.Sprintf("w%04d", i)}
		}
		if i%3 == 0 {
			crd.Categories = []string{"all", "stress"}
		}
		out = append(out, crd)
	}
	return out
}

// AddCRD adds a CRD's resource to each of its versions, as installing it
// does: /apis and the group-versions' OpenAPI documents change.
func (s *Server) AddCRD(crd CRD) error {
	if !strings.Contains(crd.Group, ".") || len(crd.Versions) == 0 || crd.Kind == "" {
		return fmt.Errorf("docserver: CRD %+v: need a dotted group, versions and a kind", crd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addCRDLocked(crd)
	return s.publishLocked()
}

func (s *Server) addCRDLocked(crd CRD) {
	if crd.Plural == "" {
		crd.Plural = strings.ToLower(crd.Kind) + "s"
	}
	i := slices.IndexFunc(s.apis.Items, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == crd.Group })
	if i < 0 {
		s.apis.Items = append(s.apis.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: crd.Group}})
		i = len(s.apis.Items) - 1
	}
	g := &s.apis.Items[i]
	for _, v := range crd.Versions {
		j := slices.IndexFunc(g.Versions, func(e apidiscoveryv2.APIVersionDiscovery) bool { return e.Version == v })
		if j < 0 {
			j = insertVersion(g, apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
		}
		kind := &metav1.GroupVersionKind{Group: crd.Group, Version: v, Kind: crd.Kind}
		r := apidiscoveryv2.APIResourceDiscovery{
			Resource:         crd.Plural,
			ResponseKind:     kind,
			Scope:            apidiscoveryv2.ScopeCluster,
			SingularResource: strings.ToLower(crd.Kind),
			Verbs:            []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"},
			ShortNames:       slices.Clone(crd.ShortNames),
			Categories:       slices.Clone(crd.Categories),
		}
		if crd.Namespaced {
			r.Scope = apidiscoveryv2.ScopeNamespace
		}
		if crd.Scale {
			r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource:  "scale",
				ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
				Verbs:        []string{"get", "patch", "update"},
			})
		}
		if crd.Status {
			r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource: "status", ResponseKind: kind.DeepCopy(), Verbs: []string{"get", "patch", "update"},
			})
		}
		rs := g.Versions[j].Resources
		k, found := slices.BinarySearchFunc(rs, r.Resource, func(e apidiscoveryv2.APIResourceDiscovery, name string) int {
			return strings.Compare(e.Resource, name)
		})
		if found {
			rs[k] = r
		} else {
			rs = slices.Insert(rs, k, r)
		}
		g.Versions[j].Resources = rs
		s.revision[schema.GroupVersion{Group: crd.Group, Version: v}]++
	}
}

// SetGroupVersion puts v in group's versions (replacing the entry of its
// version), as an aggregated API server's registration or a stale
// APIService does: SetGroupVersion(g, APIVersionDiscovery{Version: "v1",
// Freshness: Stale}) lists it stale with no resources.
func (s *Server) SetGroupVersion(group string, v apidiscoveryv2.APIVersionDiscovery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.apis.Items, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == group })
	if i < 0 {
		s.apis.Items = append(s.apis.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: group}})
		i = len(s.apis.Items) - 1
	}
	g := &s.apis.Items[i]
	if v.Freshness == "" {
		v.Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent // as discoverytest's SetGroupVersion does
	}
	v = *v.DeepCopy()
	if j := slices.IndexFunc(g.Versions, func(e apidiscoveryv2.APIVersionDiscovery) bool { return e.Version == v.Version }); j >= 0 {
		g.Versions[j] = v
	} else {
		insertVersion(g, v)
	}
	// As discoverytest does: the group-version's OpenAPI document changes
	// with its registration.
	s.revision[schema.GroupVersion{Group: group, Version: v.Version}]++
	return s.publishLocked()
}

// insertVersion puts a new version in g in kube-aware priority order (v2
// before v1 before v1beta1), as kube-apiserver lists a CRD's versions and
// discoverytest adds them, and returns its index.
func insertVersion(g *apidiscoveryv2.APIGroupDiscovery, v apidiscoveryv2.APIVersionDiscovery) int {
	at := slices.IndexFunc(g.Versions, func(x apidiscoveryv2.APIVersionDiscovery) bool {
		return version.CompareKubeAwareVersionStrings(v.Version, x.Version) > 0
	})
	if at < 0 {
		at = len(g.Versions)
	}
	g.Versions = slices.Insert(g.Versions, at, v)
	return at
}

// RemoveCRD removes a resource from every version of its group, and any
// group-version (and group) left empty by that, as deleting a CRD does
// (and discoverytest's RemoveCRD).
func (s *Server) RemoveCRD(group, plural string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.apis.Items, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == group })
	if i < 0 {
		return fmt.Errorf("docserver: no group %q", group)
	}
	g := &s.apis.Items[i]
	removed := false
	for vi := range g.Versions {
		v := &g.Versions[vi]
		n := len(v.Resources)
		v.Resources = slices.DeleteFunc(v.Resources, func(r apidiscoveryv2.APIResourceDiscovery) bool { return r.Resource == plural })
		if len(v.Resources) != n {
			removed = true
			s.revision[schema.GroupVersion{Group: group, Version: v.Version}]++
		}
	}
	if !removed {
		return fmt.Errorf("docserver: no resource %q in group %q", plural, group)
	}
	g.Versions = slices.DeleteFunc(g.Versions, func(v apidiscoveryv2.APIVersionDiscovery) bool {
		if len(v.Resources) > 0 {
			return false
		}
		delete(s.revision, schema.GroupVersion{Group: group, Version: v.Version})
		s.openapi.DeleteGroupVersion(mediatype.OpenAPIPath(group, v.Version))
		return true
	})
	if len(g.Versions) == 0 {
		s.apis.Items = slices.Delete(s.apis.Items, i, i+1)
	}
	return s.publishLocked()
}

// SetStale marks a group-version as an aggregated API server that cannot be
// reached: discovery keeps its last known resources with freshness Stale,
// as discoverytest's SetStale does.
func (s *Server) SetStale(gv schema.GroupVersion, stale bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, list := range []*apidiscoveryv2.APIGroupDiscoveryList{&s.core, &s.apis} {
		for gi := range list.Items {
			g := &list.Items[gi]
			for vi := range g.Versions {
				if g.Name != gv.Group || g.Versions[vi].Version != gv.Version {
					continue
				}
				g.Versions[vi].Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent
				if stale {
					g.Versions[vi].Freshness = apidiscoveryv2.DiscoveryFreshnessStale
				}
				return s.publishLocked()
			}
		}
	}
	return fmt.Errorf("docserver: no group-version %s", gv)
}

// ChangeSchema gives gv's OpenAPI document new content, and so a new
// ?hash=, without changing discovery: each kind's spec declares one field
// named for the revision, revision1 after the first change, revision2
// after the second (and no longer revision1), as a CRD's schema changes.
func (s *Server) ChangeSchema(gv schema.GroupVersion) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.revision[gv]; !ok && !s.servesLocked(gv) {
		return fmt.Errorf("docserver: no group-version %s", gv)
	}
	s.revision[gv]++
	return s.publishLocked()
}

func (s *Server) servesLocked(gv schema.GroupVersion) bool {
	for _, list := range []apidiscoveryv2.APIGroupDiscoveryList{s.core, s.apis} {
		for _, g := range list.Items {
			for _, v := range g.Versions {
				if g.Name == gv.Group && v.Version == gv.Version {
					return true
				}
			}
		}
	}
	return false
}

// publishLocked encodes both lists as a kube-apiserver does (its ETag is
// the SHA-512 of the list's JSON without apiVersion and kind) and gives
// every group-version an OpenAPI document.
func (s *Server) publishLocked() error {
	scheme := runtime.NewScheme()
	if err := apidiscoveryv2.AddToScheme(scheme); err != nil {
		return err
	}
	pb := protobuf.NewSerializer(scheme, scheme)
	s.docs = map[string]document{}
	for path, list := range map[string]*apidiscoveryv2.APIGroupDiscoveryList{"/api": &s.core, "/apis": &s.apis} {
		list.TypeMeta = metav1.TypeMeta{}
		bare, err := json.Marshal(list)
		if err != nil {
			return err
		}
		list.TypeMeta = metav1.TypeMeta{APIVersion: "apidiscovery.k8s.io/v2", Kind: "APIGroupDiscoveryList"}
		var d document
		if d.json, err = json.Marshal(list); err != nil {
			return err
		}
		d.json = append(d.json, '\n') // as the server's json.Encoder ends it
		var buf bytes.Buffer
		if err := pb.Encode(list, &buf); err != nil {
			return err
		}
		d.protobuf = buf.Bytes()
		d.etag = strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(bare)))
		s.docs[path] = d
		for _, g := range list.Items {
			for _, v := range g.Versions {
				gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
				doc, err := openAPIDocument(gv, v, s.revision[gv])
				if err != nil {
					return err
				}
				s.openapi.UpdateGroupVersion(mediatype.OpenAPIPath(gv.Group, gv.Version), doc)
			}
		}
	}
	return nil
}

// openAPIDocument is a small document for gv: one schema per kind, with
// the x-kubernetes-group-version-kind clients index kinds by, and the
// revision in its description and its spec's one field (from the first
// revision) so that ChangeSchema changes the hash and the kinds' fields.
func openAPIDocument(gv schema.GroupVersion, v apidiscoveryv2.APIVersionDiscovery, revision int) (*spec3.OpenAPI, error) {
	schemas := map[string]any{}
	spec := map[string]any{"type": "object"}
	if revision > 0 {
		spec["properties"] = map[string]any{fmt.Sprintf("revision%d", revision): map[string]any{"type": "string"}}
	}
	for _, r := range v.Resources {
		if r.ResponseKind == nil {
			continue
		}
		schemas[gv.Group+"."+gv.Version+"."+r.ResponseKind.Kind] = map[string]any{
			"type":        "object",
			"description": fmt.Sprintf("%s (revision %d)", r.ResponseKind.Kind, revision),
			"properties": map[string]any{
				"apiVersion": map[string]any{"type": "string"},
				"kind":       map[string]any{"type": "string"},
				"spec":       spec,
			},
			"x-kubernetes-group-version-kind": []any{map[string]any{"group": gv.Group, "version": gv.Version, "kind": r.ResponseKind.Kind}},
		}
	}
	b, err := json.Marshal(map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "Kubernetes", "version": "v1.36.3"},
		"paths":      map[string]any{},
		"components": map[string]any{"schemas": schemas},
	})
	if err != nil {
		return nil, err
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("docserver: OpenAPI of %s: %w", gv, err)
	}
	return &doc, nil
}

// InjectFault applies f to later requests for path (a prefix when it ends
// in "*"): every one, or the next f.Times. As with discoverytest, the first
// fault injected that matches a request applies to it.
func (s *Server) InjectFault(path string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultRule{path: path, fault: f, left: f.Times})
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFaultLocked returns the first fault for path and counts it used.
func (s *Server) takeFaultLocked(path string) Fault {
	for i, r := range s.faults {
		if prefix, ok := strings.CutSuffix(r.path, "*"); ok && !strings.HasPrefix(path, prefix) || !ok && path != r.path {
			continue
		}
		if r.fault.Times > 0 {
			if r.left--; r.left <= 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return r.fault
	}
	return Fault{}
}

// Requests lists the requests answered since the last ResetRequests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Statuses maps each path requested since the last ResetRequests to the
// status of its last answer.
func (s *Server) Statuses() map[string]int {
	out := map[string]int{}
	for _, r := range s.Requests() {
		out[r.Path] = r.Status
	}
	return out
}

// ResetRequests forgets the requests answered so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Stats sums Requests.
func (s *Server) Stats() Stats {
	var st Stats
	for _, r := range s.Requests() {
		st.Requests++
		st.Bytes += r.Bytes
		if r.Status == http.StatusNotModified {
			st.NotModified++
		}
	}
	return st
}

// ServeHTTP answers /api, /apis, /openapi/v3 and /version as a kube-apiserver does;
// anything else is a 404. Injected faults apply first.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fault := s.takeFaultLocked(r.URL.Path)
	d, isDiscovery := s.docs[r.URL.Path]
	s.mu.Unlock()
	// The response is buffered and sent after its entry is logged, as
	// discoverytest does: a client that has seen any of a response finds
	// the request in the log, which is what tests count requests with. A
	// request cancelled during a Latency is logged too (200, no bytes), as
	// there.
	rec := httptest.NewRecorder()
	cancelled := fault.Latency > 0 && !wait(r, fault.Latency)
	damage := !cancelled && fault.Status == 0 // Oversize, ContentType, ResetAfter, Truncate
	switch {
	case cancelled:
	case fault.Status != 0:
		serveStatus(rec, r, fault)
	case isDiscovery:
		serveDiscovery(rec, r, d)
	case r.URL.Path == "/openapi/v3":
		// Served as the aggregator's proxy serves it: sniffed text, no
		// ETag, so If-None-Match never matches the root.
		r = r.Clone(r.Context())
		r.Header.Del("If-None-Match")
		s.openapi.HandleDiscovery(RootWriter{rec}, r)
	case strings.HasPrefix(r.URL.Path, "/openapi/v3/"):
		s.openapi.HandleGroupVersion(rec, r)
	case r.URL.Path == "/version":
		serveVersion(rec)
	default:
		http.NotFound(rec, r)
	}
	body := rec.Body.Bytes()
	if damage && fault.Oversize > 0 {
		body = append(body, bytes.Repeat([]byte(" "), fault.Oversize)...)
		rec.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	if damage && fault.ContentType != "" {
		rec.Header().Set("Content-Type", fault.ContentType)
	}
	abort := damage && (fault.ResetAfter > 0 || fault.Truncate > 0)
	switch {
	case !abort:
	case fault.ResetAfter > 0:
		rec.Header().Del("Content-Length")
		body = body[:min(fault.ResetAfter, len(body))]
	default:
		rec.Header().Set("Content-Length", strconv.Itoa(len(body)))
		body = body[:min(fault.Truncate, len(body))]
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Accept: r.Header.Get("Accept"),
		IfNoneMatch: r.Header.Get("If-None-Match"), Status: rec.Code, Bytes: int64(len(body))})
	s.mu.Unlock()
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
	if abort {
		// A reset or truncation: the part goes out, then the connection
		// drops (net/http closes it when a handler aborts; see
		// StartInProcess for the in-process client).
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
}

// serveVersion answers /version as discoverytest does: the recorded
// version.Info, re-encoded.
func serveVersion(w http.ResponseWriter) {
	var info version.Info
	b, err := fixtures.ReadFile("testdata/version.json")
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	if err == nil {
		b, err = json.Marshal(info)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// wait waits for d, or until r is cancelled, and reports whether d passed.
func wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// serveStatus answers with f.Status and the Status a real server sends for
// it, as discoverytest does.
func serveStatus(w http.ResponseWriter, r *http.Request, f Fault) {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
	}
	status := apierrors.NewGenericServerResponse(f.Status, r.Method, schema.GroupResource{}, "", "injected fault",
		int(f.RetryAfter/time.Second), false).ErrStatus
	status.APIVersion, status.Kind = "v1", "Status"
	body, _ := json.Marshal(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_, _ = w.Write(body)
}

// serveDiscovery negotiates as the real server does: the first type of
// the Accept list it can produce wins; gzip above 128 KiB when asked.
func serveDiscovery(w http.ResponseWriter, r *http.Request, d document) {
	var body []byte
	var contentType string
	for _, t := range strings.Split(r.Header.Get("Accept"), ",") {
		t = strings.ReplaceAll(strings.TrimSpace(t), " ", "")
		switch {
		case strings.HasPrefix(t, "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"):
			body, contentType = d.protobuf, "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		case strings.HasPrefix(t, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"):
			body, contentType = d.json, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		}
		if body != nil {
			break
		}
	}
	if body == nil {
		http.Error(w, "docserver serves aggregated discovery v2 only", http.StatusNotAcceptable)
		return
	}
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Cache-Control", "public")
	w.Header().Set("ETag", d.etag)
	if r.Header.Get("If-None-Match") == d.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", contentType)
	if len(body) > 128<<10 && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// RootWriter drops handler3's ETag on the OpenAPI v3 root and labels it
// text/plain, as kube-apiserver's aggregator serves it: a fake that serves
// the root through kube-openapi's handler3 writes through it.
type RootWriter struct{ http.ResponseWriter }

func (w RootWriter) WriteHeader(code int) {
	w.Header().Del("Etag")
	if w.Header().Get("Content-Type") == "application/json" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w RootWriter) Write(b []byte) (int, error) {
	if w.Header().Get("Etag") != "" {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}
