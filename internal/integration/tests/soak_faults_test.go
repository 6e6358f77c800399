//go:build linux

package tests

// Three more of issue 47's faults and loads in the soak: an aggregated API
// server that goes away and returns, 429s from API priority and fairness
// for one identity, and a fleet of the pair's two servers and the
// balancer, each checked like the soak's other clients.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/fleet"
	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
	"github.com/kubeatlas/kubeatlas/restmapper"
	"github.com/kubeatlas/kubeatlas/shared"
)

// keepLastKnown gives a group-version the server serves Stale with no
// resources (the aggregator lost its aggregated server before it cached a
// document of it: always so for a server that serves plain JSON, whose
// legacy documents the aggregator never caches) the kinds this reader
// last read of it while Current, which is what discovery's client
// promises to answer then: "a group-version whose aggregated API server
// is down (Stale) ... stays in the snapshot, marked, with its last known
// resources when there were any" (discovery's doc; fetch.go's
// keepLastKnown), and so its mapper keeps mapping them. It then records
// the kinds of every Current group-version for the next read, and forgets
// a group-version no longer served at all (a 404 keeps nothing).
func (r *truthReader) keepLastKnown(t *soakTruth) {
	if r.known == nil {
		r.known = map[string]map[string]string{}
	}
	served := map[string]map[string]string{} // "group/version" → Kind → resource
	for gvk, res := range t.kinds {
		g, v, k := splitGVK(gvk)
		if served[g+"/"+v] == nil {
			served[g+"/"+v] = map[string]string{}
		}
		served[g+"/"+v][k] = res
	}
	for gv := range t.stale {
		if len(served[gv]) > 0 {
			continue
		}
		g, v, _ := strings.Cut(gv, "/")
		for k, res := range r.known[gv] {
			t.kinds[gv+"/"+k] = res
			t.fromLastKnown["mapping "+gv+"/"+k] = gv
			if _, ok := t.preferred[g+"/"+k]; !ok {
				// Its group's only version here (the soak's aggregated
				// group has one): a versionless lookup answers it.
				t.preferred[g+"/"+k] = v
				t.fromLastKnown["preferred "+g+"/"+k] = gv
			}
			t.lastKnown[gv] = true
		}
	}
	for gv, kinds := range served {
		if !t.stale[gv] {
			r.known[gv] = kinds
		}
	}
	for gv := range r.known {
		if served[gv] == nil && !t.stale[gv] {
			delete(r.known, gv)
		}
	}
}

// statusWriter remembers the status a handler wrote. Unwrap lets
// http.ResponseController find the writer's Flusher (watches stream).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// identityCounts counts, at the proxies, each client kind's requests by
// identity (the user it impersonates, or admin): library requests and
// 429s each minute, the Retry-After values the 429s carried, and how
// long each client waited after a 429 before it asked the same path
// again.
type identityCounts struct {
	start time.Time

	mu         sync.Mutex
	library    map[string][]int // "kind identity" → library requests a minute
	throttled  map[string][]int // "kind identity" → 429s a minute
	retryAfter map[string]int   // Retry-After value → 429s
	// after429: "kind identity proxy path" → its last 429, until the
	// next request of it; waits: "kind path" → the waits seen.
	after429 map[string]throttledAt
	waits    map[string]*waitStats
	// held: proxy host → the spans in which the server told the checked
	// throttled handles (client kind kubeatlas-checked, user-3) to wait:
	// a 429's arrival to its Retry-After (heldUntil).
	held map[string][]heldSpan
}

// throttledFailAfter is how long of the time it was free to ask a
// throttled handle may disagree before TestSoak fails (the report judges
// it against 1 s as every other): the checker compares it on a goroutine
// of its own that waits in the handle's calls, a lookup waiting out a
// Retry-After of up to 32 s within the call, so the end of a disagreement
// is seen only when that wait is over; a handle stuck for minutes still
// fails.
const throttledFailAfter = 30 * time.Second

// heldSpan is a 429's arrival and the end of the wait it asked for.
type heldSpan struct{ from, until time.Time }

// maxHeldSpans bounds the spans kept for each proxy.
const maxHeldSpans = 100000

// throttledAt is when a 429 was answered, and the wait it asked for.
type throttledAt struct {
	at    time.Time
	asked time.Duration // Retry-After, 0 if none or not seconds
}

// waitStats sums the waits after a 429 without keeping each. early counts
// the next requests of the same path that came before the Retry-After
// had passed: a retry that did not wait, or another request of the same
// client kind and identity (a new refresh) that the server's answer did
// not hold back.
type waitStats struct {
	n, early    int
	least, most time.Duration
	sum         time.Duration
}

func newIdentityCounts(start time.Time) *identityCounts {
	return &identityCounts{start: start, library: map[string][]int{}, throttled: map[string][]int{}, retryAfter: map[string]int{},
		after429: map[string]throttledAt{}, waits: map[string]*waitStats{}, held: map[string][]heldSpan{}}
}

func bump(m map[string][]int, key string, minute int) {
	v := m[key]
	for len(v) <= minute {
		v = append(v, 0)
	}
	v[minute]++
	m[key] = v
}

// began is called as a request arrives at a proxy; done once it is
// answered, with its status and Retry-After.
func (c *identityCounts) began(kind string, r *http.Request) {
	id, now := identityOf(r), time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if libraryPath(r.URL.Path) {
		bump(c.library, kind+" "+id, int(now.Sub(c.start)/time.Minute))
	}
	key := kind + " " + id + " " + r.Host + r.URL.Path
	if th, ok := c.after429[key]; ok {
		delete(c.after429, key)
		w := c.waits[kind+" "+r.URL.Path]
		if w == nil && len(c.waits) < 1000 {
			w = &waitStats{least: time.Hour}
			c.waits[kind+" "+r.URL.Path] = w
		}
		if w == nil {
			return
		}
		d := now.Sub(th.at)
		w.n++
		w.sum += d
		w.least, w.most = min(w.least, d), max(w.most, d)
		if d < th.asked {
			w.early++
		}
	}
}

func (c *identityCounts) done(kind string, r *http.Request, status int, retryAfter string) {
	if status != http.StatusTooManyRequests {
		return
	}
	id, now := identityOf(r), time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	bump(c.throttled, kind+" "+id, int(now.Sub(c.start)/time.Minute))
	c.retryAfter[retryAfter]++
	if len(c.after429) < 10000 { // bounded: a path asked once is never cleared
		secs, _ := strconv.Atoi(retryAfter)
		c.after429[kind+" "+id+" "+r.Host+r.URL.Path] = throttledAt{at: now, asked: time.Duration(secs) * time.Second}
	}
	if kind == "kubeatlas-checked" && id == throttledUser {
		if secs, err := strconv.Atoi(retryAfter); err == nil && secs > 0 && len(c.held[r.Host]) < maxHeldSpans {
			c.held[r.Host] = append(c.held[r.Host], heldSpan{from: now, until: now.Add(time.Duration(secs) * time.Second)})
		}
	}
}

// heldWithin is how much of [from, to) a checked throttled handle of the
// server behind the proxy at host spent told to wait: the union of the
// spans from each 429 it was answered to the end of its Retry-After. The
// issue counts from when the server a client talks to serves the change;
// a server that answers a client 429, Retry-After: 32 serves it nothing
// for 32 s, which the library must wait out (a lookup waits within its
// call; a refresh refused keeps the old view, or the error for a client
// that has none, until it may ask again).
func (c *identityCounts) heldWithin(host string, from, to time.Time) time.Duration {
	c.mu.Lock()
	spans := slices.Clone(c.held[host])
	c.mu.Unlock()
	slices.SortFunc(spans, func(a, b heldSpan) int { return a.from.Compare(b.from) })
	var held time.Duration
	at := from // the union's end so far, clipped to [from, to)
	for _, sp := range spans {
		lo, hi := sp.from, sp.until
		if at.After(lo) {
			lo = at
		}
		if to.Before(hi) {
			hi = to
		}
		if hi.After(lo) {
			held += hi.Sub(lo)
			at = hi
		}
	}
	return held
}

// observe is the counting proxy's hook: it serves r through next and
// counts it.
func (c *identityCounts) observe(kind string, w http.ResponseWriter, r *http.Request, next http.Handler) {
	c.began(kind, r)
	sw := &statusWriter{ResponseWriter: w}
	next.ServeHTTP(sw, r)
	c.done(kind, r, sw.status, w.Header().Get("Retry-After"))
}

// The soak's API priority and fairness: user-3's requests, every one,
// are of a priority level with one nominal share (3 seats of the
// server's 600 beside the defaults' 245 shares), nothing lent or
// borrowed, that rejects what it cannot seat at once: a 429 with
// Retry-After. user-3 is an identity of this file's alone (its own
// controllers, handles and pressure), so that the load the soak compares
// with controller-runtime's defaults (admin, user-1, user-2) is not
// throttled: a throttled controller-runtime client reconciles less (with
// user-2 throttled, its defaults sent 35 library requests a minute
// against 230 for admin and for user-1, and the ratio read 0.153).
const (
	throttledID    = 3
	throttledUser  = "user-3"
	throttledLevel = "soak-throttled"
)

func applyThrottle(ctx context.Context, dyn dynamic.Interface) error {
	pl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
		"metadata": map[string]any{"name": throttledLevel},
		"spec": map[string]any{"type": "Limited", "limited": map[string]any{
			"nominalConcurrencyShares": int64(1), "lendablePercent": int64(0), "borrowingLimitPercent": int64(0),
			"limitResponse": map[string]any{"type": "Reject"},
		}},
	}}
	fs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
		"metadata": map[string]any{"name": "soak-" + throttledUser},
		"spec": map[string]any{
			"priorityLevelConfiguration": map[string]any{"name": throttledLevel},
			"matchingPrecedence":         int64(500),
			"distinguisherMethod":        map[string]any{"type": "ByUser"},
			"rules": []any{map[string]any{
				"subjects":         []any{map[string]any{"kind": "User", "user": map[string]any{"name": throttledUser}}},
				"resourceRules":    []any{map[string]any{"verbs": []any{"*"}, "apiGroups": []any{"*"}, "resources": []any{"*"}, "clusterScope": true, "namespaces": []any{"*"}}},
				"nonResourceRules": []any{map[string]any{"verbs": []any{"*"}, "nonResourceURLs": []any{"*"}}},
			}},
		},
	}}
	for _, o := range []struct {
		resource string
		obj      *unstructured.Unstructured
	}{{"prioritylevelconfigurations", pl}, {"flowschemas", fs}} {
		gvr := schema.GroupVersionResource{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: o.resource}
		if _, err := dyn.Resource(gvr).Create(ctx, o.obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the %s %s: %w", o.resource, o.obj.GetName(), err)
		}
	}
	return nil
}

// heldTiny serves the tiny aggregated server, holding a list of things
// for its ?hold= (at most 2 s): requests through the kube-apiserver that
// keep a seat of their priority level that long.
type heldTiny struct{ *tinyServer }

func (h heldTiny) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d, err := time.ParseDuration(r.URL.Query().Get("hold")); err == nil && d > 0 {
		tm := time.NewTimer(min(d, 2*time.Second))
		select {
		case <-tm.C:
		case <-r.Context().Done():
			tm.Stop()
		}
	}
	h.tinyServer.ServeHTTP(w, r)
}

// startHeld is tinyServer.start with heldTiny's handler.
func (h heldTiny) startHeld(port int) (int, error) {
	l, err := h.n.listen(port)
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: h, TLSConfig: h.tls, ReadHeaderTimeout: 10 * time.Second}
	h.mu.Lock()
	h.srv = srv
	h.mu.Unlock()
	go func() { _ = srv.ServeTLS(l, "", "") }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// fleetSample is what the fleet said at one moment, with what the
// servers ran then.
type fleetSample struct {
	at       time.Duration
	versions []string
	surfaces int      // fleet.Stats().Surfaces
	failing  int      // fleet.Stats().Failing
	etags    []string // each member's /apis ETag (first 12), "-" for none
	errs     []string // each member's Err, "" for none
}

// soakFaults is this file's part of one soak run.
type soakFaults struct {
	s       *soak
	t       *testing.T
	p       *haPlane
	proxies []*countingProxy
	counts  *identityCounts

	tiny   heldTiny
	tinyAt int // its port in the namespace

	fleet   *fleet.Fleet
	members []string // fleet cluster IDs: kas-0, kas-1, balancer
	lb      *soakClient
	lbDisc  *discovery.Client // the balancer member's
	reg     *shared.Registry
	viaLB   func(string, int) *rest.Config
	// throttled counts the reconciles of user-3's controllers, through
	// shared and with controller-runtime's defaults.
	throttled [2]reconcileOutcomes
	// clients are held to their servers like the checker's own; discs
	// are the discovery clients of user-3's handles, by client name, for
	// the timeline's account of a Thing they stop mapping.
	clients []*soakClient
	discs   map[string]*discovery.Client

	mu          sync.Mutex
	away        [2]time.Duration   // when the aggregated server was stopped, and started again
	stale       [][2]time.Duration // per server: first read Stale, first read Current after it
	wasStale    []bool
	samples     []fleetSample
	lbCompares  int
	lbUnion     int // answers right for neither server taken as the member's union (mappings, preferred versions)
	pressureSnt int
}

// startSoakFaults registers the tiny aggregated server (test.kubeatlas.io)
// with both servers, throttles user-3 under API priority and fairness, and
// holds a fleet of the two servers and the balancer (admin, through the
// proxies, as client kind kubeatlas-fleet). run holds user-3's shared
// handle on each server and the fleet's members for kas-0 and kas-1 to
// their servers, each on a goroutine of its own (a throttled client's
// lookup may wait out a Retry-After, which must not stall the checker's
// compares of the others), and the balancer's member to both
// (compareBalancer).
func startSoakFaults(ctx context.Context, t *testing.T, s *soak, p *haPlane, proxies []*countingProxy, counts *identityCounts, reg *shared.Registry, viaLB func(string, int) *rest.Config) *soakFaults {
	t.Helper()
	sf := &soakFaults{s: s, t: t, p: p, proxies: proxies, counts: counts, discs: map[string]*discovery.Client{}, reg: reg, viaLB: viaLB,
		stale: make([][2]time.Duration, len(p.servers)), wasStale: make([]bool, len(p.servers))}

	// The aggregated server, in a network namespace of its own (the
	// aggregator refuses loopback endpoints), registered once: both
	// servers read the APIService from etcd.
	a := &aggregation{cluster: &cluster{url: p.lb.url(), config: p.config}, netns: newNetns(t), dir: t.TempDir(),
		frontProxyCAFile: filepath.Join(p.dir, "front-proxy-ca.crt"), servingCA: newTestCA(t, "kubeatlas-aggregated-serving-ca")}
	svc := serviceFor("tiny")
	sf.tiny = heldTiny{newTinyServer(t, a, svc)}
	sf.tiny.quiet = true
	port, err := sf.tiny.startHeld(0)
	if err != nil {
		t.Fatalf("the aggregated server: %v", err)
	}
	sf.tinyAt = port
	a.register(t, svc, tinyGV, port)

	dyn, err := dynamic.NewForConfig(p.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := applyThrottle(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	crb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "soak-" + throttledUser},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": throttledUser}},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}).Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for i, srv := range p.servers {
		h, err := reg.Acquire(proxies[i].config("kubeatlas-checked", throttledID))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Release)
		conv, err := typed.New(h.OpenAPI())
		if err != nil {
			t.Fatal(err)
		}
		cl := &soakClient{name: throttledUser + "@" + srv.name, server: i, mapper: h.Mapper(), conv: conv}
		t.Cleanup(cl.remember(h.Discovery()))
		sf.clients = append(sf.clients, cl)
		sf.discs[throttledUser+"@"+srv.name] = h.Discovery()
	}

	f, err := fleet.New()
	if err != nil {
		t.Fatal(err)
	}
	sf.fleet = f
	cfgs := []*rest.Config{proxies[0].config("kubeatlas-fleet", 0), proxies[1].config("kubeatlas-fleet", 0), viaLB("kubeatlas-fleet", 0)}
	sf.members = []string{p.servers[0].name, p.servers[1].name, "balancer"}
	for i, id := range sf.members {
		c, err := f.Add(id, cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		oc, err := c.OpenAPI()
		if err != nil {
			t.Fatal(err)
		}
		conv, err := typed.New(oc)
		if err != nil {
			t.Fatal(err)
		}
		cl := &soakClient{name: "fleet:" + id, server: i, mapper: c.Mapper(), conv: conv}
		t.Cleanup(cl.remember(c.Discovery()))
		if i < len(p.servers) {
			sf.clients = append(sf.clients, cl)
		} else {
			cl.server = -1
			sf.lb, sf.lbDisc = cl, c.Discovery()
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := f.Refresh(rctx); err != nil {
		t.Fatalf("the fleet's first round: %v", err)
	}
	return sf
}

// run starts what runs beside the load until ctx ends: each fleet
// member's watch (discovery/watch.Run, its OpenAPI client told of each
// change with WithOnChange, as package shared wires its handles), the
// compares of the clients startSoakFaults made, user-3's controllers, the pressure that keeps its seats
// busy, the balancer member's compares, and the samples of the aggregated
// group's freshness and of the fleet.
func (sf *soakFaults) run(ctx context.Context, wg *sync.WaitGroup, chk *checker) {
	for _, id := range sf.members {
		c, _ := sf.fleet.Cluster(id)
		oc, _ := c.OpenAPI() // made in startSoakFaults
		sf.s.goSafe(wg, "fleet watch "+id, func() { _ = watch.Run(ctx, c.Discovery(), watch.WithOnChange(oc.Changed)) })
	}
	for _, cl := range sf.clients {
		sf.s.goSafe(wg, "compares of "+cl.name, func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			told := false
			for {
				chk.compareOne(ctx, cl)
				if dc := sf.discs[cl.name]; dc != nil && !told {
					told = sf.tellUnmapped(chk, cl.name, dc)
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	// user-3's controllers, as the soak's others: client kinds of their own
	// (kubeatlas-throttled, controller-runtime-throttled), so that the
	// soak's ratio counts unthrottled load only.
	sharing := controllerruntime.Sharing{Registry: sf.reg}
	controllers(ctx, sf.s, wg, "kubeatlas throttled", []*rest.Config{sf.viaLB("kubeatlas-throttled", throttledID)},
		func(cfg *rest.Config) client.Options { return sharing.ClientOptions(cfg, client.Options{}) }, &sf.throttled[0])
	controllers(ctx, sf.s, wg, "controller-runtime throttled", []*rest.Config{sf.viaLB("controller-runtime-throttled", throttledID)},
		func(*rest.Config) client.Options { return client.Options{} }, &sf.throttled[1])
	for i := range sf.proxies {
		sf.s.goSafe(wg, fmt.Sprintf("priority pressure on %s", sf.p.servers[i].name), func() { sf.pressure(ctx, i) })
	}
	sf.s.goSafe(wg, "fleet balancer compares", func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			sf.compareBalancer(ctx, chk)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	sf.s.goSafe(wg, "aggregated freshness", func() {
		for sleepCtx(ctx, 200*time.Millisecond) {
			sf.sampleFreshness(chk)
		}
	})
	sf.s.goSafe(wg, "fleet samples", func() {
		for {
			sf.sampleFleet()
			if !sleepCtx(ctx, 10*time.Second) {
				return
			}
		}
	})
}

// tellUnmapped puts into the timeline, once, what the discovery client of
// a client that stopped mapping the aggregated Thing held then, and says
// whether it did.
func (sf *soakFaults) tellUnmapped(chk *checker, name string, dc *discovery.Client) bool {
	chk.mu.Lock()
	d := chk.open[name+" mapping "+tinyGV.Group+"/"+tinyGV.Version+"/Thing"]
	chk.mu.Unlock()
	if d == nil {
		return false
	}
	snap := dc.Current()
	if snap == nil {
		sf.s.event("%s does not map Thing (got %q): no snapshot", name, d.got)
		return true
	}
	v, ok := snap.Version(tinyGV)
	desc := "not listed"
	if ok {
		desc = fmt.Sprintf("%s, %d resources, last known %v", v.Freshness, len(v.Resources), v.LastKnown)
	}
	_, apis := snap.ETags()
	sf.s.event("%s does not map Thing (got %q); its snapshot (generation %d, /apis %s, fetched +%s, validated +%s, refresh error %v) lists %s %s",
		name, short(d.got), snap.Generation(), shortETag(apis), fmtOffset(snap.Fetched().Sub(sf.s.start)), fmtOffset(snap.Validated().Sub(sf.s.start)), snap.RefreshError(), tinyGV, desc)
	return true
}

// pressure keeps user-3's seats on server i busy half of each second:
// every second, six lists of the aggregated things held 500 ms each (more
// than the level's 3 seats, so it is full whatever its exact size), sent
// through the server's proxy as client kind apf-pressure. While user-3's
// seats are full, its other requests (its controllers' and its shared
// handles' discovery and OpenAPI requests) are answered 429 at once.
func (sf *soakFaults) pressure(ctx context.Context, i int) {
	hc := sf.proxies[i].ts.Client()
	url := sf.proxies[i].ts.URL + "/apis/" + tinyGV.String() + "/things?hold=500ms"
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Impersonate-User", throttledUser)
				req.Header.Set("User-Agent", "apf-pressure")
				if resp, err := hc.Do(req); err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		sf.mu.Lock()
		sf.pressureSnt += 6
		sf.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// outage stops the aggregated server at the run's fraction from and
// starts it again on its port at until.
func (sf *soakFaults) outage(from, until float64) []struct {
	at   float64
	name string
	do   func()
} {
	return []struct {
		at   float64
		name string
		do   func()
	}{
		{from, "stop the aggregated server", func() {
			sf.tiny.stop()
			sf.mu.Lock()
			sf.away[0] = time.Since(sf.s.start)
			sf.mu.Unlock()
			sf.s.event("aggregated server of %s stopped (its APIService stays registered)", tinyGV)
		}},
		{until, "start the aggregated server", func() {
			if _, err := sf.tiny.startHeld(sf.tinyAt); err != nil {
				sf.t.Errorf("starting the aggregated server again: %v", err)
				return
			}
			sf.mu.Lock()
			sf.away[1] = time.Since(sf.s.start)
			sf.mu.Unlock()
			sf.s.event("aggregated server of %s serving again", tinyGV)
		}},
	}
}

// sampleFreshness puts into the timeline each change of the aggregated
// group-version's freshness as the checker read it from each server.
func (sf *soakFaults) sampleFreshness(chk *checker) {
	gv := tinyGV.String()
	chk.mu.Lock()
	type read struct {
		stale, lastKnown, up bool
		at                   time.Time
	}
	reads := make([]read, len(chk.truth))
	for i, t := range chk.truth {
		if t != nil {
			reads[i] = read{stale: t.stale[gv], lastKnown: t.lastKnown[gv], up: true, at: t.at}
		}
	}
	chk.mu.Unlock()
	for i, r := range reads {
		if !r.up {
			continue
		}
		sf.mu.Lock()
		changed := r.stale != sf.wasStale[i]
		sf.wasStale[i] = r.stale
		at := r.at.Sub(sf.s.start)
		if changed && r.stale && sf.stale[i][0] == 0 {
			sf.stale[i][0] = at
		}
		if changed && !r.stale && sf.stale[i][0] != 0 && sf.stale[i][1] == 0 {
			sf.stale[i][1] = at
		}
		sf.mu.Unlock()
		if changed {
			what := "Current again"
			if r.stale {
				what = "Stale"
				if r.lastKnown {
					what += ", with no resources: the checker wants its last known kinds mapped"
				}
			}
			sf.s.event("%s serves %s %s (the checker's read at +%s)", sf.p.servers[i].name, gv, what, fmtOffset(at))
		}
	}
}

func shortETag(e string) string {
	e = strings.Trim(e, `"`)
	if len(e) > 12 {
		e = e[:12]
	}
	if e == "" {
		return "-"
	}
	return e
}

// sampleFleet records the fleet's counts and each member's /apis ETag and
// error, and puts a change of them into the timeline.
func (sf *soakFaults) sampleFleet() {
	st := sf.fleet.Stats()
	smp := fleetSample{at: time.Since(sf.s.start), versions: sf.s.versionsNow(), surfaces: st.Surfaces, failing: st.Failing}
	for _, id := range sf.members {
		c, _ := sf.fleet.Cluster(id)
		etag, e := "-", ""
		snap := c.Snapshot()
		if snap != nil {
			_, apis := snap.ETags()
			etag = shortETag(apis)
		}
		switch {
		case c.Err() != nil:
			e = c.Err().Error()
		case snap != nil && snap.Err() != nil:
			e = snap.Err().Error() // a partial snapshot: a Stale group-version
		}
		smp.etags, smp.errs = append(smp.etags, etag), append(smp.errs, e)
	}
	sf.mu.Lock()
	var prev *fleetSample
	if n := len(sf.samples); n > 0 {
		prev = &sf.samples[n-1]
	}
	sf.samples = append(sf.samples, smp)
	sf.mu.Unlock()
	if prev == nil || prev.surfaces != smp.surfaces || prev.failing != smp.failing || distinct(prev.etags) != distinct(smp.etags) {
		sf.s.event("fleet: %d surfaces held, %d members failing; members' /apis %s (%d distinct); servers %v", smp.surfaces, smp.failing, sf.memberList(smp.etags), distinct(smp.etags), smp.versions)
	}
}

func distinct(v []string) int {
	m := map[string]bool{}
	for _, s := range v {
		m[s] = true
	}
	return len(m)
}

func (sf *soakFaults) memberList(v []string) string {
	var parts []string
	for i, id := range sf.members {
		parts = append(parts, id+" "+v[i])
	}
	return strings.Join(parts, ", ")
}

// compareBalancer holds the fleet's balancer member to the servers
// behind the balancer: which one a request reaches is the balancer's
// choice at each new connection, so an answer is right when it is what
// either server serves (a key one server does not serve at all is right
// for it when the member does not map it). A disagreement is one answer
// right for neither; it is timed from the later of the moments the
// checker first read the two servers' values (from then on neither
// served the answer; checker.servedAt), and is judged, reported and
// failed on with the checker's others (checker.judge). A server that is
// down (a restart) is left out.
func (sf *soakFaults) compareBalancer(ctx context.Context, chk *checker) {
	chk.mu.Lock()
	chk.asking(sf.lb.name, time.Now())
	truths := slices.Clone(chk.truth)
	gones := make([]map[string]bool, len(truths))
	for j := range truths {
		gones[j] = map[string]bool{}
		for k := range chk.gone[j] {
			gones[j][k] = true
		}
	}
	chk.mu.Unlock()
	wants := make([]map[string]string, len(truths))
	gots := make([]map[string]string, len(truths))
	keys := map[string]bool{}
	for j, t := range truths {
		if t == nil {
			continue
		}
		wants[j], gots[j] = sf.lb.answers(ctx, t, gones[j], chk.universe)
		for k := range wants[j] {
			keys[k] = true
		}
	}
	if len(keys) == 0 {
		return
	}
	// While the member serves the union of the views of servers that
	// disagree behind its URL (discovery's rule: Snapshot.Mixed), a
	// resource removed from every server goes only once the views that had
	// it have not been seen for a few refreshes, and a group's versions
	// are in the order of the view first seen: a mapping neither server
	// serves, or a preferred version neither prefers, is then what the
	// member promises, not wrong.
	var union bool
	if snap := sf.lbDisc.Current(); snap != nil {
		union = snap.Mixed()
	}
	now := time.Now()
	chk.mu.Lock()
	defer chk.mu.Unlock()
	for j := range truths {
		if chk.truth[j] != truths[j] {
			return // a newer truth arrived while asking: compare next time
		}
	}
	sf.mu.Lock()
	sf.lbCompares++
	sf.mu.Unlock()
	answers := make(map[string]answer, len(keys))
	for key := range keys {
		var got string
		for j := range truths {
			if g, ok := gots[j][key]; ok {
				got = g
			}
		}
		right := false
		var want []string
		for j, t := range truths {
			if t == nil {
				continue
			}
			w, ok := wants[j][key]
			if !ok {
				w = "none"
			}
			want = append(want, sf.p.servers[j].name+": "+w)
			if ok && gots[j][key] == w || !ok && (got == "none" || strings.HasPrefix(got, "error: ")) {
				right = true
			}
		}
		if !right && union && (strings.HasPrefix(key, "mapping ") || strings.HasPrefix(key, "preferred ")) && got != "none" && !strings.HasPrefix(got, "error: ") {
			right = true
			sf.mu.Lock()
			sf.lbUnion++
			sf.mu.Unlock()
		}
		answers[key] = answer{right: right, want: strings.Join(want, "; "), got: got}
	}
	chk.judge(sf.lb.name, -1, answers, now)
}

// markHeld takes from each disagreement of a checked throttled handle
// the time its server's 429s told it to wait (identityCounts.heldWithin),
// and says so in the report: it is wrong when it disagreed for more than
// 1 s in which it was free to ask.
func (sf *soakFaults) markHeld(all []*disagreement, end time.Time) {
	for _, d := range all {
		if d.server < 0 || d.server >= len(sf.proxies) || !strings.HasPrefix(d.client, throttledUser+"@") {
			continue
		}
		to := d.end
		if to.IsZero() {
			to = end
		}
		host := strings.TrimPrefix(sf.proxies[d.server].ts.URL, "https://")
		if h := sf.counts.heldWithin(host, d.served, to); h > 0 {
			d.held = h
			note := fmt.Sprintf("its server had it wait %v of that after 429s: not counted", h.Round(10*time.Millisecond))
			if d.interrupted != "" {
				note = d.interrupted + "; " + note
			}
			d.interrupted = note
		}
	}
}

// report writes this file's sections of the report: the aggregated
// server's outage as each server served it and what the clients
// answered; the 429s by client kind and identity, the waits after them,
// and each identity's library requests a minute; the fleet's samples.
func (sf *soakFaults) report(b *strings.Builder, all []*disagreement, end time.Time) {
	run := end.Sub(sf.s.start)
	sf.mu.Lock()
	defer sf.mu.Unlock()

	b.WriteString("\n== the aggregated API server (" + tinyGV.String() + ", a tiny server in a network namespace, registered as an APIService with both servers)\n")
	fmt.Fprintf(b, "stopped +%s, serving again +%s\n", fmtOffset(sf.away[0]), fmtOffset(sf.away[1]))
	for i, srv := range sf.p.servers {
		st := "never read Stale"
		if sf.stale[i][0] != 0 {
			st = "first read Stale +" + fmtOffset(sf.stale[i][0])
			if sf.stale[i][1] != 0 {
				st += ", Current again +" + fmtOffset(sf.stale[i][1])
			} else {
				st += ", not read Current again"
			}
		}
		fmt.Fprintf(b, "%s: %s\n", srv.name, st)
	}
	var aggregated, aggregatedWrong int
	for _, dg := range all {
		if strings.Contains(dg.key, tinyGV.Group+"/") {
			aggregated++
			if dg.wrong(end) {
				aggregatedWrong++
			}
		}
	}
	fmt.Fprintf(b, "disagreements on %s's kinds: %d, wrong (over 1 s): %d. While Stale with no resources the checker wants the kinds last read Current (discovery keeps a Stale group-version's last known resources, so its mappers map them); Current again, what the server serves.\n", tinyGV.Group, aggregated, aggregatedWrong)

	fmt.Fprintf(b, "\n== 429s under API priority and fairness (FlowSchema soak-%s → PriorityLevelConfiguration %s: 1 nominal share, Reject; every request of %s)\n", throttledUser, throttledLevel, throttledUser)
	fmt.Fprintf(b, "pressure: %d lists of the aggregated things held 500 ms (six a second on each server, as %s)\n", sf.pressureSnt, throttledUser)
	for i, name := range []string{"kubeatlas (shared)", "controller-runtime's defaults"} {
		o := &sf.throttled[i]
		fmt.Fprintf(b, "%s's controllers through %s: %d reconciles ok, %d no match, %d failed (last: %v)\n", throttledUser, name, o.ok.Load(), o.noMatch.Load(), o.failed.Load(), o.lastErr.Load())
	}
	sf.counts.mu.Lock()
	defer sf.counts.mu.Unlock()
	fmt.Fprintf(b, "%-40s %8s   each minute\n", "kind identity", "429s")
	for _, k := range sortedKeys(sf.counts.throttled) {
		fmt.Fprintf(b, "%-40s %8d   %v\n", k, sum(sf.counts.throttled[k]), sf.counts.throttled[k])
	}
	var ras []string
	for _, k := range sortedKeys(sf.counts.retryAfter) {
		ras = append(ras, fmt.Sprintf("%q: %d", k, sf.counts.retryAfter[k]))
	}
	fmt.Fprintf(b, "Retry-After on the 429s: %s\n", strings.Join(ras, ", "))
	var thr, thrHeld, thrLate, thrWrong int
	for _, dg := range all {
		if !strings.HasPrefix(dg.client, throttledUser+"@") {
			continue
		}
		thr++
		if dg.held > 0 {
			thrHeld++
		}
		if !dg.ahead && dg.end.Sub(dg.served) > time.Second || !dg.ahead && dg.end.IsZero() && end.Sub(dg.served) > time.Second {
			thrLate++
		}
		if dg.wrong(end) {
			thrWrong++
		}
	}
	fmt.Fprintf(b, "%s's checked handles: %d disagreements, %d of them while their server had them wait after 429s; %d over 1 s after the checker first read what the server served, %d over 1 s of the time they were free to ask (the target's count)\n", throttledUser, thr, thrHeld, thrLate, thrWrong)
	b.WriteString("the wait after a 429 before the same client kind and identity asked the same path of the same proxy again (early: before the Retry-After had passed):\n")
	for _, k := range sortedKeys(sf.counts.waits) {
		w := sf.counts.waits[k]
		fmt.Fprintf(b, "  %-60s %6d waits: least %v, mean %v, most %v; early: %d\n", k, w.n, w.least.Round(time.Millisecond), (w.sum / time.Duration(max(w.n, 1))).Round(time.Millisecond), w.most.Round(time.Millisecond), w.early)
	}
	fmt.Fprintf(b, "library requests a minute at the servers by client kind and identity (%s throttled):\n", throttledUser)
	for _, k := range sortedKeys(sf.counts.library) {
		fmt.Fprintf(b, "  %-40s %8.1f   %v\n", k, perMinute(sf.counts.library[k], run), sf.counts.library[k])
	}

	fmt.Fprintf(b, "\n== the fleet (%s; admin through the proxies and the balancer, each member's discovery watched)\n", strings.Join(sf.members, ", "))
	var lbTotal, lbWrong int
	for _, dg := range all {
		if dg.client == sf.lb.name {
			lbTotal++
			if dg.wrong(end) {
				lbWrong++
			}
		}
	}
	fmt.Fprintf(b, "the balancer's member: %d compares against both servers, %d answers right for neither, %d of them over 1 s; %d mappings and preferred versions right for neither but the union the member served while its servers disagreed (Snapshot.Mixed), not counted\n", sf.lbCompares, lbTotal, lbWrong, sf.lbUnion)
	fmt.Fprintf(b, "%-8s %-20s %8s %8s   members' /apis ETags, and errors\n", "at", "servers", "surfaces", "failing")
	for _, smp := range sf.samples {
		var errs []string
		for i, e := range smp.errs {
			if e != "" {
				errs = append(errs, sf.members[i]+": "+short(e))
			}
		}
		fmt.Fprintf(b, "+%-7s %-20s %8d %8d   %s (%d distinct) %s\n", fmtOffset(smp.at), strings.Join(smp.versions, "/"), smp.surfaces, smp.failing, sf.memberList(smp.etags), distinct(smp.etags), strings.Join(errs, "; "))
	}
	st := sf.fleet.Stats()
	fmt.Fprintf(b, "fleet at the end: %+v\n", st)
}

func sum(v []int) int {
	var n int
	for _, x := range v {
		n += x
	}
	return n
}

// TestCheckerWantsLastKnownWhileStale: the soak's checker wants of an
// aggregated group-version served Stale what discovery's client promises
// to answer then (its last known kinds, mapped), and what the server
// serves once it is Current again or gone; a restmapper over a client
// that follows the server through those states never disagrees with it.
// Without truthReader.keepLastKnown the checker wants the stale kinds
// unmapped ("none") while the mapper, as documented, maps them. A client
// whose first snapshot comes while the group-version is Stale has no
// last known kinds of its own (a throttled identity's first contact, in
// a 5-minute run): the checker holds it to what the server serves, and
// to the kinds once they are Current again; without clientHistory it
// wants the kinds of it.
func TestCheckerWantsLastKnownWhileStale(t *testing.T) {
	srv, err := discoverytest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	gv := tinyGV
	thing := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: []apidiscoveryv2.APIResourceDiscovery{{
		Resource: "things", SingularResource: "thing", ResponseKind: &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: "Thing"},
		Scope: apidiscoveryv2.ScopeCluster, Verbs: []string{"get", "list"},
	}}}
	if err := srv.SetGroupVersion(gv.Group, thing); err != nil {
		t.Fatal(err)
	}
	var dcs []*discovery.Client // refreshed at each step
	// client makes a client the checker asks, with its history.
	client := func(name string) *soakClient {
		dc, err := discovery.New(&rest.Config{Host: ts.URL})
		if err != nil {
			t.Fatal(err)
		}
		m, err := restmapper.New(dc)
		if err != nil {
			t.Fatal(err)
		}
		cl := &soakClient{name: name, mapper: m}
		t.Cleanup(cl.remember(dc))
		dcs = append(dcs, dc)
		return cl
	}
	chk := newChecker([]*truthReader{{hc: ts.Client(), url: ts.URL, docs: map[string]map[string][]string{}}},
		[]*soakClient{client("mapper")}, nil)
	ctx := context.Background()
	// cold joins the compares when the group-version has turned Stale.
	cold := func() { chk.clients = append(chk.clients, client("cold")) }
	key := "mapping " + gv.Group + "/" + gv.Version + "/Thing"
	for _, step := range []struct {
		name   string
		change func() error
		want   string // the checker's want for Thing's mapping ("" for not asked)
		stale  bool
		join   func() // a client that joins the compares at this step
	}{
		{"Current", func() error { return nil }, "things", false, nil},
		{"Stale, no resources", func() error {
			return srv.SetGroupVersion(gv.Group, apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale})
		}, "things", true, nil},
		{"Stale a second read, a client with no history joins", func() error { return nil }, "things", true, cold},
		{"Current again", func() error { return srv.SetGroupVersion(gv.Group, thing) }, "things", false, nil},
		{"gone", func() error { return srv.RemoveGroup(gv.Group) }, "none", false, nil},
		{"Stale after gone: nothing known", func() error {
			return srv.SetGroupVersion(gv.Group, apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale})
		}, "none", true, nil},
	} {
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.join != nil {
			step.join()
		}
		for _, dc := range dcs {
			if _, err := dc.Refresh(ctx); err != nil && !errors.Is(err, discovery.ErrStale) {
				t.Fatalf("%s: refresh: %v", step.name, err)
			}
		}
		chk.readTruth(ctx)
		chk.compare(ctx)
		chk.mu.Lock()
		got, stale, open := chk.values[0][key], chk.truth[0] != nil && chk.truth[0].stale[gv.String()], len(chk.open)
		var opened []string
		for id, d := range chk.open {
			opened = append(opened, fmt.Sprintf("%s: want %q, got %q", id, d.want, d.got))
		}
		chk.mu.Unlock()
		if got != step.want || stale != step.stale {
			t.Errorf("%s: the checker wants %q of Thing's mapping, stale %v; want %q, stale %v", step.name, got, stale, step.want, step.stale)
		}
		if open > 0 {
			t.Errorf("%s: the mapper disagrees with the checker: %v", step.name, opened)
		}
	}
}

// TestBalancerMemberRightForEitherServer: compareBalancer counts an
// answer right when either server serves it (a kind one server does not
// serve is right for it unmapped), opens a disagreement only when the
// answer is right for neither, timed from the later of the two servers'
// changes, and leaves out a server that is down.
func TestBalancerMemberRightForEitherServer(t *testing.T) {
	gv := tinyGV
	thing := func(resource string) apidiscoveryv2.APIVersionDiscovery {
		return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: []apidiscoveryv2.APIResourceDiscovery{{
			Resource: resource, ResponseKind: &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: "Thing"},
			Scope: apidiscoveryv2.ScopeCluster, Verbs: []string{"get", "list"},
		}}}
	}
	var srvs []*discoverytest.Server
	var readers []*truthReader
	for range 2 {
		srv, err := discoverytest.NewServer()
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		defer ts.Close()
		srvs = append(srvs, srv)
		readers = append(readers, &truthReader{hc: ts.Client(), url: ts.URL, docs: map[string]map[string][]string{}})
	}
	// The member reads the first server only.
	dc, err := discovery.New(&rest.Config{Host: readers[0].url})
	if err != nil {
		t.Fatal(err)
	}
	m, err := restmapper.New(dc)
	if err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, start: time.Now()}
	sf := &soakFaults{s: s, t: t, p: &haPlane{servers: []haServer{{name: "kas-0"}, {name: "kas-1"}}},
		lb: &soakClient{name: "fleet:balancer", server: -1, mapper: m}, lbDisc: dc}
	chk := newChecker(readers, nil, nil)
	ctx := context.Background()
	key := "mapping " + gv.Group + "/" + gv.Version + "/Thing"
	set := func(i int, resource string) {
		t.Helper()
		var err error
		if resource == "" {
			err = srvs[i].RemoveGroup(gv.Group)
		} else {
			err = srvs[i].SetGroupVersion(gv.Group, thing(resource))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	openOn := func() *disagreement {
		chk.mu.Lock()
		defer chk.mu.Unlock()
		return chk.open[sf.lb.name+" "+key]
	}
	step := func(name string, refresh bool, wantOpen bool) *disagreement {
		t.Helper()
		if refresh {
			if _, err := dc.Refresh(ctx); err != nil {
				t.Fatalf("%s: refresh: %v", name, err)
			}
		}
		chk.readTruth(ctx)
		sf.compareBalancer(ctx, chk)
		d := openOn()
		if (d != nil) != wantOpen {
			t.Errorf("%s: disagreement open %v (%+v), want %v", name, d != nil, d, wantOpen)
		}
		return d
	}

	set(0, "things")
	set(1, "things")
	step("both serve things, the member maps things", true, false)
	set(0, "thingies")
	step("kas-0 serves thingies, the member maps things as kas-1 does", false, false)
	set(0, "things")
	set(1, "thingies")
	step("kas-1 serves thingies, the member maps things as kas-0 does", false, false)
	set(0, "")
	step("kas-0 serves no Thing, the member (not refreshed) maps things: right for neither", false, true)
	before := time.Now()
	set(1, "")
	d := step("neither serves Thing", false, true)
	if d != nil && (d.served.Before(before) || d.want != "kas-0: none; kas-1: none") {
		t.Errorf("the disagreement after both servers changed: served %v (want after %v), want %q", d.served, before, d.want)
	}
	step("the member refreshed: unmapped, right for both", true, false)
	set(1, "things")
	step("kas-1 serves things again; unmapped is right for kas-0", false, false)
	beforeDown := time.Now()
	chk.down(0)
	if d := step("kas-0 down: only kas-1 counts, and it serves things", false, true); d != nil && d.served.Before(beforeDown) {
		t.Errorf("a disagreement opened after kas-0 stopped is timed from %v, before the stop (%v): the member may have been answered by kas-0 until then", d.served, beforeDown)
	}
	chk.up(0)
	step("kas-0 up again (no Thing): unmapped is right for it", false, false)

	// Ahead of the checker: both servers move to thingies and the member
	// refreshes before the checker reads them. Compared with the old
	// reading the member is right for neither; at the next reading it is
	// right, and the disagreement was the member being ahead, however long
	// ago the old value was first read.
	set(0, "things")
	step("both serve things again, the member refreshed", true, false)
	set(0, "thingies")
	set(1, "thingies")
	if _, err := dc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	sf.compareBalancer(ctx, chk)
	ahead := openOn()
	if ahead == nil {
		t.Fatal("the member ahead of the checker's reading: no disagreement opened against the old reading")
	}
	step("the checker reads thingies: the member is right", false, false)
	if !ahead.ahead || ahead.wrong(time.Now().Add(time.Hour)) {
		t.Errorf("the member ahead of the checker's reading was judged late: ahead %v, %s", ahead.ahead, ahead.interrupted)
	}
}

// TestIdentityCountsWaitAfter429: the proxy's hook counts a 429 by client
// kind and identity with its Retry-After, and measures how long the
// client waited before it asked the same path again: discovery's client,
// answered 429 with Retry-After: 1 on its first /apis, asks again no
// sooner than a second later.
func TestIdentityCountsWaitAfter429(t *testing.T) {
	srv, err := discoverytest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	counts := newIdentityCounts(time.Now())
	var refused sync.Once
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		throttle := false
		if r.URL.Path == "/apis" {
			refused.Do(func() { throttle = true })
		}
		if throttle {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		srv.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, _, _ := strings.Cut(r.Header.Get("User-Agent"), " ")
		counts.observe(kind, w, r, backend)
	}))
	defer ts.Close()
	cfg := &rest.Config{Host: ts.URL, UserAgent: "kubeatlas-checked test"}
	cfg.Impersonate.UserName = throttledUser
	dc, err := discovery.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	counts.mu.Lock()
	defer counts.mu.Unlock()
	if got := counts.throttled["kubeatlas-checked "+throttledUser]; sum(got) != 1 {
		t.Errorf("429s of kubeatlas-checked %s: %v, want 1", throttledUser, got)
	}
	if counts.retryAfter["1"] != 1 {
		t.Errorf("Retry-After values: %v, want one 1", counts.retryAfter)
	}
	w := counts.waits["kubeatlas-checked /apis"]
	if w == nil || w.n != 1 || w.early != 0 || w.least < time.Second {
		t.Errorf("waits after the 429: %+v, want one of a second or more", w)
	}
	if got := sum(counts.library["kubeatlas-checked "+throttledUser]); got < 3 {
		t.Errorf("library requests of kubeatlas-checked %s: %d, want /api, /apis twice", throttledUser, got)
	}
}

// TestMemorySVGHeapOnItsOwnAxis: the heap is drawn in a panel of its own,
// its largest sample at the panel's top and its smallest in proportion
// (from 0), not flat beside RSS ten times its size; RSS stays in the
// panel above.
func TestMemorySVGHeapOnItsOwnAxis(t *testing.T) {
	var samples []memSample
	for i, heap := range []uint64{8, 10, 12, 9} {
		samples = append(samples, memSample{at: time.Duration(i) * time.Minute, heap: heap << 20, rss: 100 << 20, goroutines: 120, sockets: 20})
	}
	svg := memorySVG(samples)
	points := func(color string) [][2]float64 {
		t.Helper()
		_, rest, ok := strings.Cut(svg, `<polyline fill="none" stroke="`+color+`" stroke-width="2" points="`)
		if !ok {
			t.Fatalf("no polyline of %s in %s", color, svg)
		}
		list, _, _ := strings.Cut(rest, `"`)
		var out [][2]float64
		for _, p := range strings.Fields(list) {
			var x, y float64
			if _, err := fmt.Sscanf(p, "%f,%f", &x, &y); err != nil {
				t.Fatalf("point %q: %v", p, err)
			}
			out = append(out, [2]float64{x, y})
		}
		return out
	}
	const heapTop, heapHeight, rssTop, rssHeight = 290.0, 140.0, 30.0, 220.0
	heap := points("#1f77b4")
	for i, want := range []float64{8, 10, 12, 9} {
		if y := heapTop + heapHeight - heapHeight*want/12; math.Abs(heap[i][1]-y) > 0.1 {
			t.Errorf("heap sample %d (%v MiB) at y %.1f, want %.1f: on its own axis, 0 to 12 MiB over %v px from %v", i, want, heap[i][1], y, heapHeight, heapTop)
		}
	}
	for _, p := range points("#ff7f0e") {
		if p[1] < rssTop || p[1] > rssTop+rssHeight {
			t.Errorf("an RSS point at y %.1f, outside its panel (%v to %v)", p[1], rssTop, rssTop+rssHeight)
		}
	}
}

// TestThrottledTimedWhileFreeToAsk: a checked throttled handle's
// disagreement counts only the time its server's 429s did not tell it to
// wait (overlapping waits counted once); another identity's or client
// kind's 429s hold nothing.
func TestThrottledTimedWhileFreeToAsk(t *testing.T) {
	c := newIdentityCounts(time.Now())
	req := func(user string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "https://127.0.0.1:9/apis", nil)
		r.Header.Set("Impersonate-User", user)
		return r
	}
	t0 := time.Now()
	c.done("kubeatlas-checked", req(throttledUser), http.StatusTooManyRequests, "3")
	c.done("kubeatlas-checked", req("user-1"), http.StatusTooManyRequests, "30")
	c.done("kubeatlas-throttled", req(throttledUser), http.StatusTooManyRequests, "30")
	c.mu.Lock()
	spans := c.held["127.0.0.1:9"]
	if len(spans) != 1 || spans[0].until.Sub(spans[0].from) != 3*time.Second {
		c.mu.Unlock()
		t.Fatalf("held spans %v, want the checked throttled handle's one of 3 s", spans)
	}
	w0 := spans[0].from
	// A 429 within the first wait asking for 5 s more (w0+2 to w0+7),
	// and one later (w0+10 to w0+12).
	c.held["127.0.0.1:9"] = append(c.held["127.0.0.1:9"],
		heldSpan{from: w0.Add(10 * time.Second), until: w0.Add(12 * time.Second)},
		heldSpan{from: w0.Add(2 * time.Second), until: w0.Add(7 * time.Second)})
	c.mu.Unlock()

	for _, x := range []struct {
		from, to time.Duration
		want     time.Duration
	}{
		{-time.Second, 0, 0},
		{time.Second, 6 * time.Second, 5 * time.Second},
		{-time.Second, 13 * time.Second, 9 * time.Second},
		{8 * time.Second, 11 * time.Second, time.Second},
	} {
		if got := c.heldWithin("127.0.0.1:9", w0.Add(x.from), w0.Add(x.to)); got != x.want {
			t.Errorf("held within [%v, %v): %v, want %v", x.from, x.to, got, x.want)
		}
	}
	if got := c.heldWithin("127.0.0.1:8", w0, w0.Add(time.Minute)); got != 0 {
		t.Errorf("another proxy's handle held %v", got)
	}

	sf := &soakFaults{s: &soak{start: t0}, counts: c,
		proxies: []*countingProxy{{ts: &httptest.Server{URL: "https://127.0.0.1:9"}}}}
	served := w0.Add(time.Second)
	held := &disagreement{client: throttledUser + "@kas-0", server: 0, served: served, end: w0.Add(7500 * time.Millisecond)}
	other := &disagreement{client: "user-1@kas-0", server: 0, served: served, end: w0.Add(7500 * time.Millisecond)}
	late := &disagreement{client: throttledUser + "@kas-0", server: 0, served: w0.Add(7 * time.Second), end: w0.Add(10 * time.Second)}
	open := &disagreement{client: throttledUser + "@kas-0", server: 0, served: w0.Add(9500 * time.Millisecond)}
	sf.markHeld([]*disagreement{held, other, late, open}, w0.Add(12*time.Second))
	if held.wrong(held.end) {
		t.Errorf("free to ask 0.5 s of its 6.5 s: judged wrong (late %v)", held.late(held.end))
	}
	if !other.wrong(other.end) {
		t.Errorf("another identity, not held: not judged wrong")
	}
	if !late.wrong(late.end) {
		t.Errorf("free to ask 3 s and still wrong: not judged wrong")
	}
	if end := w0.Add(12 * time.Second); open.wrong(end) {
		t.Errorf("open, free to ask 0.5 s of its 2.5 s: judged wrong (late %v)", open.late(end))
	}
}

// TestOpenAtTheEndJudgedOnlyWhenARead: a disagreement still open when the
// run ends is wrong when the checker's last read of its server already
// showed it (the client lagged that read), and not judged when it began
// after that read (the client moved on and no read came after to say
// whether it was ahead).
func TestOpenAtTheEndJudgedOnlyWhenARead(t *testing.T) {
	c := newChecker(make([]*truthReader, 2), nil, nil)
	t0 := time.Now()
	c.truth[0] = &soakTruth{at: t0}
	c.truth[1] = &soakTruth{at: t0.Add(-300 * time.Millisecond)}
	c.open["lagging"] = &disagreement{client: "a", server: 0, key: "k1", served: t0.Add(-20 * time.Second), start: t0.Add(-2 * time.Second)}
	c.open["moved"] = &disagreement{client: "b", server: 0, key: "k2", served: t0.Add(-20 * time.Second), start: t0.Add(500 * time.Millisecond)}
	c.open["member"] = &disagreement{client: "m", server: -1, key: "k3", served: t0.Add(-20 * time.Second), start: t0.Add(-100 * time.Millisecond)}
	end := t0.Add(800 * time.Millisecond)
	wrong := map[string]bool{}
	for _, d := range c.all(end) {
		wrong[d.client] = d.wrong(end)
	}
	if want := map[string]bool{"a": true, "b": false, "m": true}; !maps.Equal(wrong, want) {
		t.Errorf("judged wrong at the end: %v, want %v", wrong, want)
	}
}
