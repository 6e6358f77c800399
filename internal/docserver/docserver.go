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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// The aggregated /api and /apis of a real kube-apiserver v1.36.3, copied
// from ../shared/fixtures (as discovery/discoverytest's are).
//
//go:embed testdata/api.v2.json testdata/apis.v2.json
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

// Fault is what a Server does to requests for a path.
type Fault struct {
	// Latency delays the answer, or until the request is cancelled.
	Latency time.Duration
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
	faults   map[string]Fault
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
	s := &Server{openapi: handler3.NewOpenAPIService(), revision: map[schema.GroupVersion]int{}, faults: map[string]Fault{}}
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
			g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
			j = len(g.Versions) - 1
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
	if j := slices.IndexFunc(g.Versions, func(e apidiscoveryv2.APIVersionDiscovery) bool { return e.Version == v.Version }); j >= 0 {
		g.Versions[j] = v
	} else {
		g.Versions = append(g.Versions, v)
	}
	// As discoverytest does: the group-version's OpenAPI document changes
	// with its registration.
	s.revision[schema.GroupVersion{Group: group, Version: v.Version}]++
	return s.publishLocked()
}

// ChangeSchema gives gv's OpenAPI document new content, and so a new
// ?hash=, without changing discovery.
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
// revision in its description so that ChangeSchema changes the hash.
func openAPIDocument(gv schema.GroupVersion, v apidiscoveryv2.APIVersionDiscovery, revision int) (*spec3.OpenAPI, error) {
	schemas := map[string]any{}
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
				"spec":       map[string]any{"type": "object"},
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

// InjectFault applies f to every later request for path.
func (s *Server) InjectFault(path string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = f
}

// Requests lists the requests answered since the last ResetRequests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
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

// ServeHTTP answers /api, /apis and /openapi/v3 as a kube-apiserver does;
// anything else is a 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fault := s.faults[r.URL.Path]
	d, isDiscovery := s.docs[r.URL.Path]
	s.mu.Unlock()
	if fault.Latency > 0 {
		select {
		case <-time.After(fault.Latency):
		case <-r.Context().Done():
			return
		}
	}
	// The response is buffered and sent after its entry is logged, as
	// discoverytest does: a client that has seen any of a response finds
	// the request in the log, which is what tests count requests with.
	rec := httptest.NewRecorder()
	switch {
	case isDiscovery:
		serveDiscovery(rec, r, d)
	case r.URL.Path == "/openapi/v3":
		// Served as the aggregator's proxy serves it: sniffed text, no
		// ETag, so If-None-Match never matches the root.
		r = r.Clone(r.Context())
		r.Header.Del("If-None-Match")
		s.openapi.HandleDiscovery(rootWriter{rec}, r)
	case strings.HasPrefix(r.URL.Path, "/openapi/v3/"):
		s.openapi.HandleGroupVersion(rec, r)
	default:
		http.NotFound(rec, r)
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Accept: r.Header.Get("Accept"),
		IfNoneMatch: r.Header.Get("If-None-Match"), Status: rec.Code, Bytes: int64(rec.Body.Len())})
	s.mu.Unlock()
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
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

// rootWriter drops handler3's ETag on the root and labels it as the
// aggregator does.
type rootWriter struct{ http.ResponseWriter }

func (w rootWriter) WriteHeader(code int) {
	w.Header().Del("Etag")
	if w.Header().Get("Content-Type") == "application/json" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w rootWriter) Write(b []byte) (int, error) {
	if w.Header().Get("Etag") != "" {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}
