//go:build linux

package tests

// The soak's checker (issue 47): what each server serves, read raw every
// second, against what each client answers, compared four times a second.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// soakGroup is the group of the soak's CRDs; their schemas are checked
// field by field, the rest of what a server serves by mapping.
const soakGroup = "soak.kubeatlas.test"

// soakTruth is what one server served at one read: every kind of its
// aggregated discovery (/api and /apis, the merged view a client gets by
// default), and the spec fields of each of soakGroup's kinds in its
// OpenAPI v3 documents.
type soakTruth struct {
	at time.Time // when the read began
	// kinds: "group/version/Kind" (the core group as "") to the resource.
	kinds map[string]string
	// preferred: "group/Kind" to the first version, in the group's order
	// of preference, that serves the kind: what a versionless mapping
	// answers.
	preferred map[string]string
	// fields: soakGroup's "group/version/Kind" to its spec's fields,
	// sorted.
	fields map[string][]string
	// stale: the "group/version"s served with freshness Stale (an
	// aggregated API server away); lastKnown: those of them given the
	// kinds last read while Current (truthReader.keepLastKnown).
	stale, lastKnown map[string]bool
	// fromLastKnown: the keys of kinds and preferred versions that
	// keepLastKnown gave ("mapping group/version/Kind", "preferred
	// group/Kind") to their group-version.
	fromLastKnown map[string]string
}

// truthReader reads one server's truth, directly (no proxy), as the admin.
// It keeps the OpenAPI v3 documents it read by URL (the URL carries the
// document's hash), so that a document is read again only once it changed.
type truthReader struct {
	hc   *http.Client
	url  string
	docs map[string]map[string][]string // URL → "group/version/Kind" → fields
	// known: "group/version" → Kind → resource, as last read Current
	// (soak_faults_test.go).
	known map[string]map[string]string
}

func (r *truthReader) get(ctx context.Context, path, accept string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "soak-checker")
	req.Header.Set("Accept", accept)
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.Unmarshal(body, v)
}

func (r *truthReader) read(ctx context.Context) (*soakTruth, error) {
	t := &soakTruth{at: time.Now(), kinds: map[string]string{}, preferred: map[string]string{}, fields: map[string][]string{},
		stale: map[string]bool{}, lastKnown: map[string]bool{}, fromLastKnown: map[string]string{}}
	ambiguous := map[string]bool{} // a kind two resources of a group-version answer with
	for _, path := range []string{"/api", "/apis"} {
		var doc struct {
			Items []struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Versions []struct {
					Version   string `json:"version"`
					Freshness string `json:"freshness"`
					Resources []struct {
						Resource     string `json:"resource"`
						ResponseKind struct {
							Kind string `json:"kind"`
						} `json:"responseKind"`
					} `json:"resources"`
				} `json:"versions"`
			} `json:"items"`
		}
		if err := r.get(ctx, path, discoveryV2, &doc); err != nil {
			return nil, err
		}
		for _, g := range doc.Items {
			for _, v := range g.Versions {
				if v.Freshness == "Stale" {
					t.stale[g.Metadata.Name+"/"+v.Version] = true
				}
				for _, res := range v.Resources {
					k := res.ResponseKind.Kind
					if k == "" {
						continue
					}
					gvk := g.Metadata.Name + "/" + v.Version + "/" + k
					if _, ok := t.kinds[gvk]; ok {
						ambiguous[gvk] = true
					}
					t.kinds[gvk] = res.Resource
					if _, ok := t.preferred[g.Metadata.Name+"/"+k]; !ok {
						t.preferred[g.Metadata.Name+"/"+k] = v.Version
					}
				}
			}
		}
	}
	for gvk := range ambiguous {
		delete(t.kinds, gvk)
	}
	r.keepLastKnown(t)
	var root struct {
		Paths map[string]struct {
			URL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := r.get(ctx, "/openapi/v3", "application/json", &root); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for path, p := range root.Paths {
		if !strings.HasPrefix(path, "apis/"+soakGroup+"/") {
			continue
		}
		seen[p.URL] = true
		doc, ok := r.docs[p.URL]
		if !ok {
			var d struct {
				Components struct {
					Schemas map[string]struct {
						GVK []struct {
							Group, Version, Kind string
						} `json:"x-kubernetes-group-version-kind"`
						Properties struct {
							Spec struct {
								Properties map[string]json.RawMessage `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"schemas"`
				} `json:"components"`
			}
			if err := r.get(ctx, p.URL, "application/json", &d); err != nil {
				return nil, err
			}
			doc = map[string][]string{}
			for _, s := range d.Components.Schemas {
				for _, gvk := range s.GVK {
					if gvk.Group == soakGroup {
						fields := make([]string, 0, len(s.Properties.Spec.Properties))
						for f := range s.Properties.Spec.Properties {
							fields = append(fields, f)
						}
						sort.Strings(fields)
						doc[gvk.Group+"/"+gvk.Version+"/"+gvk.Kind] = fields
					}
				}
			}
			r.docs[p.URL] = doc
		}
		for k, f := range doc {
			t.fields[k] = f
		}
	}
	for u := range r.docs {
		if !seen[u] {
			delete(r.docs, u)
		}
	}
	return t, nil
}

// soakClient is one client the checker holds to what the server at
// server serves: a shared handle's mapper and typed converter.
type soakClient struct {
	name   string // e.g. "mapper@kas-0"
	server int
	mapper *restmapper.Mapper
	conv   *typed.Converter
	// history, when set (remember), is what the client's discovery
	// snapshots showed: a client that never held a group-version's
	// kinds has none to keep while it is Stale.
	history *clientHistory
}

// clientHistory records the group-versions a discovery client's snapshots
// held resources of, from every snapshot it publishes (Subscribe; one
// published while its subscriber runs is joined into the next change, so
// a snapshot that lasted less than a call may be missed).
type clientHistory struct {
	mu   sync.Mutex
	held map[string]bool // "group/version", the core group's "/v1", as the truth names them
}

// remember makes c record the history of dc, which its mapper is over,
// until the returned func is called.
func (c *soakClient) remember(dc *discovery.Client) (stop func()) {
	h := &clientHistory{held: map[string]bool{}}
	c.history = h
	unsubscribe := dc.Subscribe(func(ch discovery.Change) { h.record(ch.New) })
	h.record(dc.Current())
	return unsubscribe
}

func (h *clientHistory) record(s *discovery.Snapshot) {
	if s == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range s.Groups() {
		for _, v := range g.Versions {
			if len(v.Resources) > 0 {
				h.held[g.Name+"/"+v.Version] = true
			}
		}
	}
}

// heldEver says whether the client held resources of gv ("group/version",
// the core group's as "/v1"); a client with no history recorded has held
// everything, as far as the checker knows.
func (c *soakClient) heldEver(gv string) bool {
	h := c.history
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[gv]
}

// noHistory says whether key's want came from the checker's own history of
// a Stale group-version (truthReader.keepLastKnown) that the client never
// held: its discovery promises last known resources of its own history
// only, so such a client answers what its server serves, no resources.
func (c *soakClient) noHistory(t *soakTruth, key string) bool {
	gv, ok := t.fromLastKnown[key]
	return ok && !c.heldEver(gv)
}

// soakAnswers is what the checker compares for one client: key to the
// answer wanted (from the truth) and the answer got.
func (c *soakClient) answers(ctx context.Context, t *soakTruth, gone map[string]bool, universe []string) (want, got map[string]string) {
	want, got = map[string]string{}, map[string]string{}
	for gvk, resource := range t.kinds {
		g, v, k := splitGVK(gvk)
		key := "mapping " + gvk
		want[key] = resource
		m, err := c.mapper.RESTMapping(schema.GroupKind{Group: g, Kind: k}, v)
		switch {
		case err != nil && c.noHistory(t, key):
			// A client with no history of the Stale group-version
			// answers what its server serves: no resources.
			want[key], got[key] = "none", "none"
		case err != nil:
			got[key] = "error: " + err.Error()
		default:
			got[key] = m.Resource.Resource
		}
	}
	for gk, version := range t.preferred {
		g, k, _ := strings.Cut(gk, "/")
		key := "preferred " + gk
		want[key] = version
		m, err := c.mapper.RESTMapping(schema.GroupKind{Group: g, Kind: k})
		switch {
		case err != nil && c.noHistory(t, key):
			want[key], got[key] = "none", "none"
		case err != nil:
			got[key] = "error: " + err.Error()
		default:
			got[key] = m.GroupVersionKind.Version
		}
	}
	// Kinds the server stopped serving lately: no mapping.
	for gvk := range gone {
		if _, ok := t.kinds[gvk]; ok {
			continue
		}
		g, v, k := splitGVK(gvk)
		key := "mapping " + gvk
		want[key] = "none"
		if m, err := c.mapper.RESTMapping(schema.GroupKind{Group: g, Kind: k}, v); err != nil {
			got[key] = "none"
		} else {
			got[key] = m.Resource.Resource
		}
	}
	// soakGroup's schemas: the converter takes an object with every
	// field the server declares, and refuses the first field of the
	// universe that it does not.
	for gvk, fields := range t.fields {
		g, v, k := splitGVK(gvk)
		key := "schema " + gvk
		want[key] = strings.Join(fields, ",")
		tp, err := c.conv.Type(ctx, schema.GroupVersionKind{Group: g, Version: v, Kind: k})
		if err != nil {
			got[key] = "error: " + err.Error()
			continue
		}
		obj := func(fields ...string) map[string]any {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: g, Version: v, Kind: k})
			u.SetName("checked")
			for _, f := range fields {
				_ = unstructured.SetNestedField(u.Object, "x", "spec", f)
			}
			return u.Object
		}
		var has []string
		if _, err := tp.FromUnstructured(obj(fields...)); err == nil {
			has = slices.Clone(fields)
		}
		// The first field the server does not declare (the next one the
		// schedule adds) must be refused. One, not all: each refusal
		// makes the converter look at the root again (bounded, but
		// counted with the rest of this client's requests).
		for _, f := range universe {
			if slices.Contains(fields, f) {
				continue
			}
			if _, err := tp.FromUnstructured(obj(f)); err == nil {
				has = append(has, f)
			}
			break
		}
		sort.Strings(has)
		got[key] = strings.Join(has, ",")
	}
	return want, got
}

func splitGVK(gvk string) (g, v, k string) {
	parts := strings.SplitN(gvk, "/", 3)
	return parts[0], parts[1], parts[2]
}

// disagreement is a time a client answered other than its server served.
type disagreement struct {
	client, key string
	server      int
	want, got   string
	// served is when the checker first read the truth the client
	// disagreed with (at most a second after the server served it;
	// servedAfter is the read before, which did not show it yet, or zero);
	// start and end are the compares that first saw it and that saw it
	// end (zero while open).
	served, servedAfter, start, end time.Time
	// interrupted: the truth changed again, or the server stopped
	// answering, before the client agreed.
	interrupted string
	// ahead: the client's answer was what the checker's next read of the
	// server showed: the server served it between two reads, and the
	// client saw it first. Not a wrong answer.
	ahead bool
	// held: how long of it the server had the client wait after 429s
	// (their Retry-After): not counted (identityCounts.heldWithin).
	held time.Duration
}

// wrong says whether the disagreement counts against the target: the
// client still disagreed more than 1 s after the checker first read what
// the server served.
func (d *disagreement) wrong(now time.Time) bool { return !d.ahead && d.late(now) > time.Second }

// late is how long after the checker first read the truth the client
// still disagreed (at the compare that saw it end, or now while open).
func (d *disagreement) late(now time.Time) time.Duration {
	end := d.end
	if end.IsZero() {
		end = now
	}
	return end.Sub(d.served) - d.held
}

// checker holds each server's latest truth and each client's open
// disagreements.
type checker struct {
	readers []*truthReader
	clients []*soakClient
	// onTruth, if set before run, is told of each server's reads.
	onTruth func(server int, t *soakTruth)
	// universe is every field soakGroup's schemas may declare.
	universe []string

	mu      sync.Mutex
	truth   []*soakTruth             // per server; nil while it does not answer
	stopped []bool                   // per server: restarting, not read
	since   []map[string]time.Time   // per server: key → when its truth value was first read
	prev    []time.Time              // per server: the read before the latest
	values  []map[string]string      // per server: key → truth value
	gone    []map[string]time.Time   // per server: kinds it stopped serving, and when
	open    map[string]*disagreement // client+key
	done    []*disagreement          // ended
	reads   int                      // truth reads that answered
	downs   map[int]int              // per server: reads that failed
	// lastDown is when a server was last stopped: a client behind the
	// balancer may be answered by it until then (compareBalancer).
	lastDown time.Time
	checks   int
	// began: client name → when its first compare began. A client
	// cannot answer before it asks: what its server served before then is
	// timed from then (servedAt), not from the checker's first read of
	// it (a throttled handle's first answer came 2.5 minutes after the
	// checker's first read, 31 s after it first asked).
	began map[string]time.Time
}

func newChecker(readers []*truthReader, clients []*soakClient, universe []string) *checker {
	n := len(readers)
	c := &checker{readers: readers, clients: clients, universe: universe,
		truth: make([]*soakTruth, n), stopped: make([]bool, n), since: make([]map[string]time.Time, n), prev: make([]time.Time, n),
		values: make([]map[string]string, n), gone: make([]map[string]time.Time, n),
		open: map[string]*disagreement{}, downs: map[int]int{}, began: map[string]time.Time{}}
	for i := range n {
		c.since[i], c.values[i], c.gone[i] = map[string]time.Time{}, map[string]string{}, map[string]time.Time{}
	}
	return c
}

// down says that server i is stopping (a restart): its truth is dropped,
// its clients' open disagreements end, and it is not read until up.
func (c *checker) down(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped[i] = true
	c.lastDown = time.Now()
	c.drop(i, c.lastDown, "server stopped")
}

// up says that server i is serving again: its next read counts as
// everything served anew.
func (c *checker) up(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped[i] = false
}

// drop forgets server i's truth and ends its clients' open
// disagreements; c.mu is held.
func (c *checker) drop(i int, now time.Time, why string) {
	if c.truth[i] != nil {
		for k, d := range c.open {
			if d.server == i {
				d.end, d.interrupted = now, why
				c.unjudged(d, why)
				c.done = append(c.done, d)
				delete(c.open, k)
			}
		}
	}
	c.truth[i] = nil
}

// lastRead is when the checker last read server's truth (of any server
// for the balancer's member, server < 0); zero before any; c.mu is held.
func (c *checker) lastRead(server int) time.Time {
	var last time.Time
	for i, t := range c.truth {
		if t != nil && (server < 0 || server == i) && t.at.After(last) {
			last = t.at
		}
	}
	return last
}

// unjudged marks d, ended with no read of its server after it began
// (why: the server stopped, the run ended, the member's other server
// left), as not judged: the client agreed with the checker's last read
// and then answered otherwise, and no read came after to say whether it
// was ahead (a CRD step the read had not seen yet) or wrong. Timed from
// the value's first read, such a disagreement was judged as long as the
// value had been served: CI's 5-minute run failed on three clients of
// kas-0 and the balancer's member "45 s" late, each seen and ended in
// the instant kas-0 was stopped, a second after a CRD step. c.mu is held.
func (c *checker) unjudged(d *disagreement, why string) {
	if last := c.lastRead(d.server); !last.IsZero() && d.start.After(last) {
		d.ahead = true
		d.interrupted = why + ", begun after the checker's last read of the server: not judged"
	}
}

// readTruth reads every server's truth. A server that does not answer has
// none until it does again; then everything it serves counts as served
// from that read (a client could not learn from it while it was down).
func (c *checker) readTruth(ctx context.Context) {
	for i, r := range c.readers {
		c.mu.Lock()
		stopped := c.stopped[i]
		c.mu.Unlock()
		if stopped {
			continue
		}
		t, err := r.read(ctx)
		c.mu.Lock()
		if c.stopped[i] {
			c.mu.Unlock()
			continue
		}
		if err != nil {
			c.drop(i, time.Now(), "server stopped answering")
			c.downs[i]++
			c.mu.Unlock()
			continue
		}
		c.reads++
		restarted := c.truth[i] == nil
		vals := map[string]string{}
		for gvk, res := range t.kinds {
			vals["mapping "+gvk] = res
		}
		for gk, v := range t.preferred {
			vals["preferred "+gk] = v
		}
		for gvk, f := range t.fields {
			vals["schema "+gvk] = strings.Join(f, ",")
		}
		for gvk := range c.gone[i] {
			if _, ok := t.kinds[gvk]; !ok {
				vals["mapping "+gvk] = "none"
			}
		}
		for k := range c.values[i] {
			if strings.HasPrefix(k, "mapping ") {
				if _, ok := t.kinds[strings.TrimPrefix(k, "mapping ")]; !ok && c.values[i][k] != "none" {
					c.gone[i][strings.TrimPrefix(k, "mapping ")] = t.at
					vals[k] = "none"
				}
			}
		}
		// A kind gone for more than 2 minutes is no longer asked for.
		for gvk, at := range c.gone[i] {
			if t.at.Sub(at) > 2*time.Minute {
				delete(c.gone[i], gvk)
				delete(vals, "mapping "+gvk)
			}
		}
		for k, v := range vals {
			if old, ok := c.values[i][k]; restarted || !ok || old != v {
				c.since[i][k] = t.at
			}
		}
		for k := range c.since[i] {
			if _, ok := vals[k]; !ok {
				delete(c.since[i], k)
			}
		}
		c.values[i] = vals
		c.prev[i] = c.truthAt(i)
		c.truth[i] = t
		c.mu.Unlock()
		if c.onTruth != nil {
			c.onTruth(i, t)
		}
	}
}

func (c *checker) truthAt(i int) time.Time {
	if c.truth[i] == nil {
		return time.Time{}
	}
	return c.truth[i].at
}

// compare asks every client and opens or closes disagreements. The
// clients are asked without the lock held (they may do I/O).
func (c *checker) compare(ctx context.Context) {
	for _, cl := range c.clients {
		c.compareOne(ctx, cl)
	}
}

// compareOne asks one client (any, not only c.clients: a client that may
// block, such as a throttled one, is compared on a goroutine of its own)
// and opens or closes its disagreements: an answer is right when it is
// what the client's server serves.
func (c *checker) compareOne(ctx context.Context, cl *soakClient) {
	c.mu.Lock()
	c.asking(cl.name, time.Now())
	t := c.truth[cl.server]
	gone := map[string]bool{}
	for k := range c.gone[cl.server] {
		gone[k] = true
	}
	c.mu.Unlock()
	if t == nil {
		return
	}
	want, got := cl.answers(ctx, t, gone, c.universe)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks++
	if c.truth[cl.server] != t {
		// A newer truth arrived while asking: compare next time.
		return
	}
	answers := make(map[string]answer, len(want))
	for key, w := range want {
		answers[key] = answer{right: got[key] == w, want: w, got: got[key]}
	}
	c.judge(cl.name, cl.server, answers, now)
}

// asking records that client's compare begins at at (its first: began);
// c.mu is held.
func (c *checker) asking(client string, at time.Time) {
	if _, ok := c.began[client]; !ok {
		c.began[client] = at
	}
}

// answer is a client's answer on one key at one compare, judged: right
// or not, what the truth wanted (as the report shows it), what it got.
type answer struct {
	right     bool
	want, got string
}

// judge opens, keeps and closes client's disagreements after a compare
// at now, from its answers (key → answer). server is the server it is
// held to, or -1 for the balancer's member, held to every server that
// answers (compareBalancer). c.mu is held, and the truths the answers
// were judged against are the checker's latest.
func (c *checker) judge(client string, server int, answers map[string]answer, now time.Time) {
	// The notes name the client and its server(s) as the report does.
	who, aServer, servers := "client", "the server", "the server"
	if server < 0 {
		who, aServer, servers = "member", "a server", "the servers"
	}
	for key, a := range answers {
		id := client + " " + key
		d := c.open[id]
		if a.right {
			if d != nil {
				if d.want != a.want {
					// The client answered what its server (the
					// member: a server) serves now before the
					// checker read it: it was ahead, not late.
					d.ahead = true
					d.interrupted = "the " + who + " was ahead of the checker's read: " + aServer + " served its answer by the next read"
				}
				d.end = now
				c.done = append(c.done, d)
				delete(c.open, id)
			}
			continue
		}
		if d != nil && d.want != a.want {
			d.end, d.interrupted = now, servers+" changed again"
			// Changed with no read since the disagreement began: the
			// balancer member's other server left (a stop drops its
			// truth), and nothing said whether the member was ahead.
			c.unjudged(d, d.interrupted)
			c.done = append(c.done, d)
			delete(c.open, id)
			d = nil
		}
		if d == nil {
			served, after := c.servedAt(server, key, now)
			if b := c.began[client]; b.After(served) {
				// Served before the client first asked: timed from
				// its first ask.
				served, after = b, time.Time{}
			}
			c.open[id] = &disagreement{client: client, server: server, key: key, want: a.want, got: a.got, served: served, servedAfter: after, start: now}
		}
	}
	// Keys no longer wanted (the truth dropped them): close as
	// interrupted.
	for id, d := range c.open {
		if _, ok := answers[d.key]; d.client == client && !ok {
			d.end, d.interrupted = now, "no longer served"
			if strings.HasPrefix(d.got, "error: ") {
				// The client had stopped answering for it before
				// the checker read that its server(s) had.
				d.ahead = true
				d.interrupted = "the " + who + " was ahead of the checker's read: no longer served by the next read"
			}
			c.done = append(c.done, d)
			delete(c.open, id)
		}
	}
}

// servedAt is when a disagreement opened at now on key, by a client held
// to server (-1: the balancer's member), is timed from, and the read
// before it (zero if none); c.mu is held.
func (c *checker) servedAt(server int, key string, now time.Time) (served, after time.Time) {
	if server >= 0 {
		// When the checker first read the value (at most a second
		// after the server served it); the read before did not show
		// it yet.
		served = c.since[server][key]
		if p := c.prev[server]; !p.IsZero() && p.Before(served) {
			after = p
		}
		return served, after
	}
	// The balancer's member: the later of the moments the checker first
	// read the values of the servers that answer (from then on neither
	// served the answer); a server that is down is left out.
	for i, t := range c.truth {
		if t != nil {
			served = later(served, c.since[i][key])
		}
	}
	// A server stopped since: until then the member may have been
	// answered by it (its connections last until it closes them), and
	// the checker no longer reads what it served last.
	served = later(served, c.lastDown)
	if served.IsZero() {
		served = now
	}
	return served, time.Time{}
}

// run reads the truth every second and compares ten times a second
// until ctx ends.
func (c *checker) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var n int
	for {
		if n%10 == 0 {
			c.readTruth(ctx)
		}
		n++
		c.compare(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// all returns every disagreement, the open ones ended at now, sorted by
// start.
func (c *checker) all(now time.Time) []*disagreement {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.done)
	for _, d := range c.open {
		cp := *d
		cp.interrupted = "still open at the end"
		cp.end = now
		// Begun after the checker's last read of its server (a CRD step
		// in the run's last second): not judged.
		c.unjudged(&cp, cp.interrupted)
		out = append(out, &cp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// TestClientTimedFromItsFirstAsk: a client that first asks long after
// its server began serving what it is asked about is timed from its first
// ask, not from the checker's first read: it cannot answer before it
// asks. Issue 47's 30-minute run judged 143 of a throttled identity's
// answers wrong over 1 s, every one at the identity's first contact,
// timed from the checker's first read at +0:01, before the soak's load
// began (+2:14); its first ask came at +2:14, its first answer at +2:45.
func TestClientTimedFromItsFirstAsk(t *testing.T) {
	c := newChecker(make([]*truthReader, 1), nil, nil)
	t0 := time.Now()
	c.truth[0] = &soakTruth{at: t0}
	c.since[0]["mapping g/v1/K"] = t0.Add(-2 * time.Minute)
	c.prev[0] = t0.Add(-2*time.Minute - time.Second)
	for _, cl := range []struct {
		name  string
		first time.Time
	}{{"late", t0}, {"early", t0.Add(-2 * time.Minute)}} {
		c.asking(cl.name, cl.first)
		c.asking(cl.name, t0.Add(400*time.Millisecond)) // a later compare: not its first
		c.judge(cl.name, 0, map[string]answer{"mapping g/v1/K": {want: "ks", got: "error: 429"}}, t0.Add(500*time.Millisecond))
		c.judge(cl.name, 0, map[string]answer{"mapping g/v1/K": {right: true, want: "ks", got: "ks"}}, t0.Add(900*time.Millisecond))
	}
	wrong := map[string]bool{}
	for _, d := range c.all(t0.Add(time.Second)) {
		wrong[d.client] = d.wrong(t0.Add(time.Second))
	}
	if want := map[string]bool{"late": false, "early": true}; !maps.Equal(wrong, want) {
		t.Errorf("judged wrong: %v, want %v (the late client answered 0.9 s after its first ask)", wrong, want)
	}
}

// TestStopEndsUnjudgedWhatBeganAfterTheLastRead: a disagreement that
// began after the checker's last read of its server and was ended by the
// server's stop (or, for the balancer's member, by its other server
// leaving) is not judged: no read came after it to say whether the client
// was ahead. One that began before that read still is. CI's 5-minute run
// failed on four such answers, each seen and ended at kas-0's stop a
// second after a CRD step, judged "45 s" late from the value's first
// read.
func TestStopEndsUnjudgedWhatBeganAfterTheLastRead(t *testing.T) {
	c := newChecker(make([]*truthReader, 2), nil, nil)
	t0 := time.Now()
	key := "mapping g/v1/K"
	for i := range 2 {
		c.truth[i] = &soakTruth{at: t0}
		c.since[i][key] = t0.Add(-45 * time.Second)
	}
	wrongAnswer := map[string]answer{key: {want: "ks", got: "error: no match"}}
	c.judge("before", 0, wrongAnswer, t0.Add(-500*time.Millisecond)) // seen before the last read
	c.judge("after", 0, wrongAnswer, t0.Add(500*time.Millisecond))
	member := map[string]answer{key: {want: "kas-0: ks; kas-1: ks", got: "error: no match"}}
	c.judge("member", -1, member, t0.Add(500*time.Millisecond))
	c.down(0)                                                       // kas-0 stopped: its truth dropped, lastDown now
	member[key] = answer{want: "kas-1: ks", got: "error: no match"} // kas-0's truth dropped
	c.judge("member", -1, member, t0.Add(700*time.Millisecond))
	c.judge("member", -1, map[string]answer{key: {right: true, want: "kas-1: ks", got: "ks"}}, t0.Add(800*time.Millisecond))
	end := t0.Add(time.Second)
	wrong := map[string]bool{}
	for _, d := range c.all(end) {
		wrong[d.client] = wrong[d.client] || d.wrong(end)
	}
	if want := map[string]bool{"before": true, "after": false, "member": false}; !maps.Equal(wrong, want) {
		t.Errorf("judged wrong: %v, want %v", wrong, want)
	}
}
