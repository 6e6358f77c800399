//go:build linux

package tests

// kubeatlas-apiserver in the soak (issue 47): the served API, fed by the
// pair through the balancer, with a kubectl -w and a Python watch on its
// apigroups for the whole run; every watcher's accumulated view held to
// the served API's own list (a lost update is a difference that lasts),
// and the served apigroups held to what the checker reads from the
// servers.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// servedLostAfter is how long a watcher's view may differ from what the
// served API listed before the difference counts as a lost update: the
// event travels from the store to the watcher in milliseconds, but a
// watcher whose connection was cut must notice, reconnect and resume (the
// Python client waits 0.5 s before it watches again) on a machine the
// soak keeps busy.
const servedLostAfter = 5 * time.Second

// servedPollEvery is how often the served API's own list is read; a
// watcher's view is compared with each list.
const servedPollEvery = 200 * time.Millisecond

// soakServed is kubeatlas-apiserver in the soak, in local mode (loopback,
// no authentication), its upstream the pair's balancer as a deployment's
// in-cluster client reaches the kubernetes Service. It is not aggregated
// into the pair: the aggregator dials only an EndpointSlice's address,
// which may not be loopback, so aggregating needs the aggregation
// harness's network namespace and requestheader flags on both servers,
// which the HA plane does not have. The watchers reach it through a front
// proxy of the soak's, which cuts every watcher's connection when a
// kube-apiserver stops, as a restart of the kube-apiserver an aggregated
// watch goes through ends it.
type soakServed struct {
	s        *soak
	chk      *checker
	local    dynamic.ResourceInterface // apigroups, directly
	front    *httptest.Server
	watchers []*servedWatcher
	missing  []string // watchers not run, and why

	mu        sync.Mutex
	cur       *servedPoll
	gone      map[string]servedGone // names a list stopped showing
	polls     int
	pollErrs  int
	lastErr   string
	changes   int // objects a list showed at a new resourceVersion, or gone
	cuts      int
	gaps      map[string]*watchGap // watcher+" "+name, open
	gapsDone  []time.Duration      // how long each closed gap lasted
	slowGaps  []*watchGap          // closed gaps that lasted more than a second
	truthOpen map[string]*disagreement
	truthDone []*disagreement
	compares  int // compares of the served list with the truth
}

// servedPoll is one list of the served API's apigroups.
type servedPoll struct {
	at    time.Time // when the list began
	rv    uint64    // the list's resourceVersion
	items map[string]servedItem
	// vals is what the list says in the checker's terms ("mapping
	// g/v/Kind" → resource, "preferred g/Kind" → version).
	vals map[string]string
}

type servedItem struct {
	rv    uint64
	since time.Time // the first list that showed the object at rv
}

// servedGone is when a list first lacked an object, and that list's
// resourceVersion (the deletion's is at most that).
type servedGone struct {
	rv uint64
	at time.Time
}

// watchGap is a time a watcher's view differed from the served API's
// list about one object.
type watchGap struct {
	watcher, name string
	// want is the resourceVersion the list showed; 0 when the list lacked
	// the object (then goneRV is the list's).
	want, goneRV uint64
	got          uint64 // the watcher's (0: it lacked the object)
	gotAtOpen    uint64
	hadAtOpen    bool
	// since is when the served API first listed what the watcher
	// lacked (or the watcher's view began, if later); start and end are
	// the compares that first saw the gap and saw it end.
	since, start, end time.Time
	why               string // how it ended, when not by the watcher catching up
}

// late is how long after the served API showed it the watcher still
// differed, or, when the list moved to the watcher's unchanged view (the
// watcher was ahead of the list), how long the compares saw it differ.
func (g *watchGap) late() time.Duration {
	if g.why == servedAhead {
		return g.end.Sub(g.start)
	}
	return g.end.Sub(g.since)
}

const servedAhead = "the watcher was ahead: the next list showed what it had"

// servedWatcher is one watcher's accumulated view: its last list and
// every event since.
type servedWatcher struct {
	name   string
	start  func(ctx context.Context) *exec.Cmd
	read   func(w *servedWatcher, v *soakServed, r io.Reader)
	events *os.File // every event's arrival, for the report's directory

	mu        sync.Mutex
	view      map[string]uint64 // name → resourceVersion; nil between processes
	began     time.Time         // when the current view began
	ran       bool              // printed at least once
	processes int
	received  int // events
	lists     int
	rewatches map[string]int // why a watch ended → times (Python)
	down      time.Duration  // longest time from a process's end to its successor's first line
	endedAt   time.Time
	lastErr   string
}

// startSoakServed starts kubeatlas-apiserver with upstream (the balancer)
// as its cluster and apiServers vouched for by its consistency check, and
// the front its watchers reach it through. It returns once the served API
// lists apigroups. Watchers whose tool is missing are left out, and the
// report says so.
func startSoakServed(t *testing.T, s *soak, chk *checker, upstream *rest.Config, apiServers []string, reportDir string) *soakServed {
	t.Helper()
	bin := atlasBinary(t)
	dir := t.TempDir()
	up := filepath.Join(dir, "upstream.kubeconfig")
	upstream = kindFront(t, upstream, "kubeatlas-apiserver", false)
	writeKubeconfig(t, up, upstream.Host, upstream.CAData, upstream.BearerToken)
	local := filepath.Join(dir, "local.kubeconfig")
	args := []string{"--local", "--kubeconfig", up, "--secure-port", strconv.Itoa(freePort(t)),
		"--cert-dir", filepath.Join(dir, "certs"), "--local-kubeconfig", local}
	for _, a := range apiServers {
		args = append(args, "--consistency-api-server", strings.TrimPrefix(a, "https://"))
	}
	cmd := exec.Command(bin, args...)
	logf := logFile(t, reportDir, "kubeatlas-apiserver.log")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var cfg *rest.Config
	eventually(t, "kubeatlas-apiserver's local kubeconfig", 60*time.Second, func() (bool, string) {
		c, err := clientcmd.BuildConfigFromFlags("", local)
		cfg = c
		return err == nil, fmt.Sprint(err)
	})
	cfg.UserAgent = "soak-served-poll"
	v := &soakServed{s: s, chk: chk, local: dynamic.NewForConfigOrDie(cfg).Resource(apigroupsGVR),
		gone: map[string]servedGone{}, gaps: map[string]*watchGap{}, truthOpen: map[string]*disagreement{}}
	eventually(t, "the served API lists apigroups", 60*time.Second, func() (bool, string) {
		l, err := v.local.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) > 0, fmt.Sprintf("%d apigroups", len(l.Items))
	})

	// The front: the watchers' way in, which the soak can cut.
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // watches stream
	rp.Transport = tr
	rp.ErrorLog = log.New(io.Discard, "", 0) // cut connections
	v.front = httptest.NewUnstartedServer(rp)
	v.front.Config.ErrorLog = log.New(io.Discard, "", 0)
	v.front.EnableHTTP2 = true
	v.front.StartTLS()
	t.Cleanup(v.front.Close)
	frontKubeconfig := filepath.Join(dir, "front.kubeconfig")
	writeKubeconfig(t, frontKubeconfig, v.front.URL, certPEM(v.front.Certificate().Raw), "local")

	if kubectl, err := exec.LookPath("kubectl"); err != nil {
		v.missing = append(v.missing, "kubectl get -w: kubectl not found")
	} else {
		v.watcher(t, reportDir, "kubectl", (*servedWatcher).readKubectl, func(ctx context.Context) *exec.Cmd {
			return exec.CommandContext(ctx, kubectl, "--kubeconfig", frontKubeconfig, "get", "apigroups."+servedGV.Group, "-w", "--output-watch-events", "-o", "json")
		})
	}
	if python, _ := pythonWithKubernetes(); python == "" {
		v.missing = append(v.missing, "the Python watch: no python3 with the kubernetes package (apt-get install python3-kubernetes)")
	} else {
		script := filepath.Join("testdata", "soak", "served_watch.py")
		v.watcher(t, reportDir, "python", (*servedWatcher).readPython, func(ctx context.Context) *exec.Cmd {
			// Watches of 30 s: beside the cuts, the client watches again
			// from its last resourceVersion twice a minute.
			return exec.CommandContext(ctx, python, script, frontKubeconfig, servedGV.Group, servedGV.Version, "apigroups", "30")
		})
	}
	return v
}

func (v *soakServed) watcher(t *testing.T, reportDir, name string, read func(*servedWatcher, *soakServed, io.Reader), start func(context.Context) *exec.Cmd) {
	t.Helper()
	f, err := os.Create(filepath.Join(reportDir, "served-events-"+name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	v.watchers = append(v.watchers, &servedWatcher{name: name, start: start, read: read, events: f, rewatches: map[string]int{}})
}

// writeKubeconfig writes a kubeconfig for server with ca and token.
func writeKubeconfig(t *testing.T, path, server string, ca []byte, token string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// run starts the poll of the served list, the cuts, and the watchers,
// until ctx ends.
func (v *soakServed) run(ctx context.Context, wg *sync.WaitGroup) {
	v.s.goSafe(wg, "served list", func() {
		for {
			v.poll(ctx)
			if !sleepCtx(ctx, servedPollEvery) {
				return
			}
		}
	})
	v.s.goSafe(wg, "served cuts", func() {
		prev := v.s.versionsNow()
		for sleepCtx(ctx, 100*time.Millisecond) {
			now := v.s.versionsNow()
			for i := range now {
				if now[i] == "" && prev[i] != "" {
					v.front.CloseClientConnections()
					v.mu.Lock()
					v.cuts++
					v.mu.Unlock()
					v.s.event("the served API's front cut its watchers' connections (kube-apiserver %d stopped)", i)
				}
			}
			prev = now
		}
	})
	for _, w := range v.watchers {
		v.s.goSafe(wg, "served watcher "+w.name, func() { w.run(ctx, v) })
	}
}

// poll lists the served apigroups, and compares every watcher's view and
// the servers' truth with the list.
func (v *soakServed) poll(ctx context.Context) {
	at := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	l, err := v.local.List(rctx, metav1.ListOptions{})
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		v.mu.Lock()
		v.pollErrs++
		v.lastErr = err.Error()
		v.mu.Unlock()
		return
	}
	p := v.record(at, l)
	now := time.Now()
	for _, w := range v.watchers {
		v.compareWatcher(w, now)
	}
	v.compareTruth(p, now)
}

// record makes the list that began at at the latest, each object's since
// kept from the list before when its resourceVersion is the same.
func (v *soakServed) record(at time.Time, l *unstructured.UnstructuredList) *servedPoll {
	rv, _ := strconv.ParseUint(l.GetResourceVersion(), 10, 64)
	p := &servedPoll{at: at, rv: rv, items: map[string]servedItem{}, vals: servedValues(l.Items)}
	v.mu.Lock()
	defer v.mu.Unlock()
	prev := v.cur
	for _, o := range l.Items {
		orv, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		it := servedItem{rv: orv, since: at}
		if prev != nil {
			if old, ok := prev.items[o.GetName()]; ok && old.rv == orv {
				it.since = old.since
			} else {
				v.changes++
			}
		}
		p.items[o.GetName()] = it
		delete(v.gone, o.GetName())
	}
	if prev != nil {
		for name := range prev.items {
			if _, ok := p.items[name]; !ok {
				v.gone[name] = servedGone{rv: rv, at: at}
				v.changes++
			}
		}
	}
	for name, g := range v.gone {
		if at.Sub(g.at) > 2*time.Minute {
			delete(v.gone, name)
		}
	}
	v.cur = p
	v.polls++
	return p
}

// servedValues is what the served apigroups say in the checker's terms:
// each group-version-kind's resource and each group-kind's preferred
// version (the first of the group's versions, in its order, that serves
// the kind). A kind two resources of a group-version answer with is left
// out, as the checker's truth leaves it out.
func servedValues(items []unstructured.Unstructured) map[string]string {
	vals := map[string]string{}
	ambiguous := map[string]bool{}
	for _, o := range items {
		group, _, _ := unstructured.NestedString(o.Object, "status", "group")
		versions, _, _ := unstructured.NestedSlice(o.Object, "status", "versions")
		for _, vv := range versions {
			vm, _ := vv.(map[string]any)
			version, _ := vm["version"].(string)
			resources, _ := vm["resources"].([]any)
			for _, rr := range resources {
				rm, _ := rr.(map[string]any)
				kind, _ := rm["kind"].(string)
				name, _ := rm["name"].(string)
				if kind == "" {
					continue
				}
				key := "mapping " + group + "/" + version + "/" + kind
				if _, ok := vals[key]; ok {
					ambiguous[key] = true
				}
				vals[key] = name
				if _, ok := vals["preferred "+group+"/"+kind]; !ok {
					vals["preferred "+group+"/"+kind] = version
				}
			}
		}
	}
	for k := range ambiguous {
		delete(vals, k)
	}
	return vals
}

// compareWatcher opens and closes w's gaps against the latest list. A
// watcher between processes is not compared (its next process lists
// anew); one whose resourceVersion for an object is above the list's is
// ahead of it, not behind.
func (v *soakServed) compareWatcher(w *servedWatcher, now time.Time) {
	w.mu.Lock()
	view := maps.Clone(w.view)
	began := w.began
	w.mu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	if view == nil || v.cur == nil {
		return
	}
	cur := v.cur
	seen := map[string]bool{}
	for name, it := range cur.items {
		got, has := view[name]
		if has && got >= it.rv {
			continue
		}
		seen[name] = true
		v.gap(w.name, name, it.rv, 0, got, has, later(it.since, began), now)
	}
	for name, got := range view {
		if _, ok := cur.items[name]; ok || got > cur.rv {
			continue
		}
		since := now
		if g, ok := v.gone[name]; ok {
			since = g.at
		}
		seen[name] = true
		v.gap(w.name, name, 0, cur.rv, got, true, later(since, began), now)
	}
	for key, g := range v.gaps {
		if g.watcher == w.name && !seen[g.name] {
			has := false
			g.got, has = view[g.name]
			if g.got == g.gotAtOpen && has == g.hadAtOpen {
				g.why = servedAhead
			}
			v.closeGap(key, g, now)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// gap records that watcher lacks what the list shows of name: want (or
// name gone at goneRV) since since. A gap open for what the watcher
// still lacks stays open with its first since; one whose first want the
// watcher has reached ends, and a new one begins. v.mu is held.
func (v *soakServed) gap(watcher, name string, want, goneRV, got uint64, has bool, since, now time.Time) {
	key := watcher + " " + name
	if g := v.gaps[key]; g != nil {
		reached := g.want > 0 && has && got >= g.want || g.want == 0 && (!has || got > g.goneRV)
		if !reached {
			g.want, g.goneRV, g.got = want, goneRV, got
			return
		}
		g.got = got
		v.closeGap(key, g, now)
	}
	v.gaps[key] = &watchGap{watcher: watcher, name: name, want: want, goneRV: goneRV, got: got, gotAtOpen: got, hadAtOpen: has, since: since, start: now}
}

// closeGap ends gap g at now. v.mu is held.
func (v *soakServed) closeGap(key string, g *watchGap, now time.Time) {
	g.end = now
	delete(v.gaps, key)
	v.gapsDone = append(v.gapsDone, g.late())
	if g.late() > time.Second {
		v.slowGaps = append(v.slowGaps, g)
	}
}

// restarted closes watcher's open gaps: its next process lists anew.
func (v *soakServed) restarted(watcher string, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for key, g := range v.gaps {
		if g.watcher == watcher {
			g.why = "the watcher's process ended"
			v.closeGap(key, g, now)
		}
	}
}

// compareTruth holds the served list's mappings and preferred versions to
// what the checker last read from each server that answers: the served
// API, behind the balancer, may show either server's discovery, so it
// agrees when it says what any of them serves. A disagreement is timed
// from when the checker first read, from the last server that changed,
// the value the served API lacks. The checker's rules apply: a served
// API that said what the next read of a server showed was ahead of it.
func (v *soakServed) compareTruth(p *servedPoll, now time.Time) {
	type truthOf struct {
		vals  map[string]string
		since map[string]time.Time
	}
	var truths []truthOf
	c := v.chk
	c.mu.Lock()
	for i, t := range c.truth {
		if t != nil {
			truths = append(truths, truthOf{maps.Clone(c.values[i]), maps.Clone(c.since[i])})
		}
	}
	c.mu.Unlock()
	if len(truths) == 0 {
		return
	}
	keys := map[string]bool{}
	for k := range p.vals {
		keys[k] = true
	}
	for _, t := range truths {
		for k := range t.vals {
			if !strings.HasPrefix(k, "schema ") {
				keys[k] = true
			}
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	// A disagreement whose key both sides dropped (a kind gone from the
	// truth and the served API alike) is ended by this compare too.
	for k := range v.truthOpen {
		keys[k] = true
	}
	v.compares++
	for k := range keys {
		got, ok := p.vals[k]
		if !ok {
			got = "none"
		}
		var wants []string
		var served time.Time
		agree := false
		for _, t := range truths {
			w, ok := t.vals[k]
			if !ok {
				w = "none"
			}
			if w == got {
				agree = true
				break
			}
			wants = append(wants, w)
			served = later(served, t.since[k])
		}
		want := strings.Join(slices.Compact(slices.Sorted(slices.Values(wants))), " or ")
		d := v.truthOpen[k]
		if d != nil && !agree && (d.got != got || d.want != want) {
			// The served API or the servers changed: this
			// disagreement ends, and the next begins.
			d.end, d.interrupted = now, "the served API or the servers changed again"
			v.truthDone = append(v.truthDone, d)
			delete(v.truthOpen, k)
			d = nil
		}
		if agree {
			if d != nil {
				if d.got == got {
					d.ahead = true
					d.interrupted = "the served API was ahead of the checker's read: a server served its answer by the next read"
				}
				d.end = now
				v.truthDone = append(v.truthDone, d)
				delete(v.truthOpen, k)
			}
			continue
		}
		if d != nil {
			continue
		}
		if served.IsZero() {
			served = now
		}
		v.truthOpen[k] = &disagreement{client: "served apigroups", key: k, want: want, got: got, served: served, start: now}
	}
}

// run runs the watcher's process again each time it ends, until ctx
// ends, as a user runs kubectl -w again.
func (w *servedWatcher) run(ctx context.Context, v *soakServed) {
	for ctx.Err() == nil {
		cmd := w.start(ctx)
		stderr := &tailBuffer{max: 2048}
		cmd.Stderr = stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		began := time.Now()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			w.mu.Lock()
			w.lastErr = err.Error()
			w.mu.Unlock()
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		w.mu.Lock()
		w.processes++
		w.mu.Unlock()
		w.read(w, v, out)
		err = cmd.Wait()
		now := time.Now()
		w.mu.Lock()
		w.view = nil
		w.endedAt = now
		if ctx.Err() == nil {
			w.lastErr = "exit 0"
			if err != nil {
				w.lastErr = err.Error()
			}
			if e := strings.TrimSpace(stderr.String()); e != "" {
				w.lastErr += ": " + e
			}
		}
		w.mu.Unlock()
		v.restarted(w.name, now)
		if ctx.Err() == nil {
			fmt.Fprintf(w.events, "+%s process ended after %v: %s\n", fmtOffset(now.Sub(v.s.start)), now.Sub(began).Round(100*time.Millisecond), short(w.lastErr))
		}
		// A process that ends at once (the front refusing) is not run in
		// a tight loop.
		if now.Sub(began) < time.Second && !sleepCtx(ctx, time.Second) {
			return
		}
	}
}

// begin starts a new view (a process's first output, or a list).
func (w *servedWatcher) begin(now time.Time, items map[string]uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.view == nil && !w.endedAt.IsZero() {
		w.down = max(w.down, now.Sub(w.endedAt))
	}
	if w.view == nil {
		w.began = now
	}
	w.view = items
	w.ran = true
}

// apply applies one event to the view, and writes its arrival with
// when the served API's list first showed it.
func (w *servedWatcher) apply(v *soakServed, now time.Time, typ, name, rvs string) {
	rv, _ := strconv.ParseUint(rvs, 10, 64)
	w.mu.Lock()
	switch typ {
	case "ADDED", "MODIFIED":
		w.view[name] = rv
	case "DELETED":
		delete(w.view, name)
	}
	w.received++
	w.mu.Unlock()
	shown := "not yet listed by the served API"
	v.mu.Lock()
	if v.cur != nil {
		if it, ok := v.cur.items[name]; ok && it.rv == rv {
			shown = fmt.Sprintf("listed since +%s (%v before)", fmtOffset(it.since.Sub(v.s.start)), now.Sub(it.since).Round(time.Millisecond))
		} else if g, ok := v.gone[name]; ok && typ == "DELETED" {
			shown = fmt.Sprintf("gone from the list since +%s (%v before)", fmtOffset(g.at.Sub(v.s.start)), now.Sub(g.at).Round(time.Millisecond))
		}
	}
	v.mu.Unlock()
	fmt.Fprintf(w.events, "+%s %s %s %d: %s\n", fmtOffset(now.Sub(v.s.start)), typ, name, rv, shown)
}

// limitedReader fails once more than n bytes are read since the last
// reset: one watch event is bounded, the stream is not.
type limitedReader struct {
	r    io.Reader
	n, m int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.m >= l.n {
		return 0, errors.New("an event of more than the limit")
	}
	if int64(len(p)) > l.n-l.m {
		p = p[:l.n-l.m]
	}
	k, err := l.r.Read(p)
	l.m += int64(k)
	return k, err
}

// readKubectl reads kubectl get -w --output-watch-events -o json: the
// list's objects as ADDED events, then the watch's. Its view begins at
// its first event.
func (w *servedWatcher) readKubectl(v *soakServed, r io.Reader) {
	lr := &limitedReader{r: r, n: 1 << 20}
	dec := json.NewDecoder(lr)
	first := true
	for {
		var e struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Name            string `json:"name"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			} `json:"object"`
		}
		if err := dec.Decode(&e); err != nil {
			_, _ = io.Copy(io.Discard, r)
			return
		}
		lr.m = 0
		now := time.Now()
		if first {
			w.begin(now, map[string]uint64{})
			first = false
		}
		w.apply(v, now, e.Type, e.Object.Metadata.Name, e.Object.Metadata.ResourceVersion)
	}
}

// readPython reads served_watch.py's lines: a LIST replaces the view,
// events change it, REWATCH says why a watch ended.
func (w *servedWatcher) readPython(v *soakServed, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e struct {
			Type  string     `json:"type"`
			Name  string     `json:"name"`
			RV    string     `json:"rv"`
			Why   string     `json:"why"`
			Items [][]string `json:"items"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		now := time.Now()
		switch e.Type {
		case "LIST":
			items := map[string]uint64{}
			for _, it := range e.Items {
				if len(it) == 2 {
					items[it[0]], _ = strconv.ParseUint(it[1], 10, 64)
				}
			}
			w.begin(now, items)
			w.mu.Lock()
			w.lists++
			w.mu.Unlock()
			fmt.Fprintf(w.events, "+%s LIST at %s: %d objects\n", fmtOffset(now.Sub(v.s.start)), e.RV, len(items))
		case "REWATCH":
			why := e.Why
			if len(why) > 80 {
				why = why[:80]
			}
			w.mu.Lock()
			w.rewatches[why]++
			w.mu.Unlock()
		default:
			w.mu.Lock()
			ok := w.view != nil
			w.mu.Unlock()
			if ok {
				w.apply(v, now, e.Type, e.Name, e.RV)
			}
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// servedResult is what the report and the test's verdict use.
type servedResult struct {
	lost       []*watchGap
	truthWrong []*disagreement
}

// report writes the served API's section of the report, and returns what
// the targets and the verdict use.
func (v *soakServed) report(b *strings.Builder, end time.Time) servedResult {
	v.mu.Lock()
	defer v.mu.Unlock()
	start := v.s.start
	var r servedResult
	for key, g := range v.gaps {
		g.why = "still open at the end"
		v.closeGap(key, g, end)
	}
	for _, d := range v.truthOpen {
		cp := *d
		cp.end, cp.interrupted = end, "still open at the end"
		v.truthDone = append(v.truthDone, &cp)
	}
	v.truthOpen = map[string]*disagreement{}

	b.WriteString("\n== the served API: kubeatlas-apiserver --local, its upstream the balancer (its requests in the table above as kubeatlas-apiserver); its watchers through a front that cuts their connections when a kube-apiserver stops\n")
	fmt.Fprintf(b, "served lists: %d (every %v), %d failed (last: %s); objects changed or gone %d times; watchers' connections cut %d times\n",
		v.polls, servedPollEvery, v.pollErrs, short(v.lastErr), v.changes, v.cuts)
	for _, m := range v.missing {
		fmt.Fprintf(b, "not run: %s\n", m)
	}
	for _, w := range v.watchers {
		w.mu.Lock()
		fmt.Fprintf(b, "%s: %d processes, %d events, %d lists", w.name, w.processes, w.received, w.lists)
		if len(w.rewatches) > 0 {
			var why []string
			for _, k := range sortedKeys(w.rewatches) {
				why = append(why, fmt.Sprintf("%s %d", k, w.rewatches[k]))
			}
			fmt.Fprintf(b, ", watches ended (%s)", strings.Join(why, ", "))
		}
		fmt.Fprintf(b, "; longest from a process's end to its successor's first line %v; last end: %s; every event in served-events-%s.txt\n", w.down.Round(10*time.Millisecond), short(w.lastErr), w.name)
		w.mu.Unlock()
	}
	ds := slices.Clone(v.gapsDone)
	slices.Sort(ds)
	var p50, mx time.Duration
	if len(ds) > 0 {
		p50, mx = ds[len(ds)/2], ds[len(ds)-1]
	}
	fmt.Fprintf(b, "a watcher's view against the served list: %d differences, median %v, longest %v; over 1 s: %d; lost (still different %v after the served API listed it): ",
		len(ds), p50.Round(time.Millisecond), mx.Round(time.Millisecond), len(v.slowGaps), servedLostAfter)
	for _, g := range v.slowGaps {
		if g.late() > servedLostAfter {
			r.lost = append(r.lost, g)
		}
	}
	fmt.Fprintf(b, "%d\n", len(r.lost))
	sort.Slice(v.slowGaps, func(i, j int) bool { return v.slowGaps[i].start.Before(v.slowGaps[j].start) })
	for _, g := range v.slowGaps {
		mark := "  "
		if g.late() > servedLostAfter {
			mark = "! "
		}
		want := fmt.Sprintf("resourceVersion %d", g.want)
		if g.want == 0 {
			want = fmt.Sprintf("gone (list at %d)", g.goneRV)
		}
		fmt.Fprintf(b, "%s%s %s: want %s, had %d; listed +%s, seen +%s, ended +%s: %v", mark, g.watcher, g.name, want, g.gotAtOpen,
			fmtOffset(g.since.Sub(start)), fmtOffset(g.start.Sub(start)), fmtOffset(g.end.Sub(start)), g.late().Round(10*time.Millisecond))
		if g.why != "" {
			fmt.Fprintf(b, " (%s)", g.why)
		}
		b.WriteString("\n")
	}
	sort.Slice(v.truthDone, func(i, j int) bool { return v.truthDone[i].start.Before(v.truthDone[j].start) })
	for _, d := range v.truthDone {
		if d.wrong(end) {
			r.truthWrong = append(r.truthWrong, d)
		}
	}
	fmt.Fprintf(b, "the served apigroups against the servers' truth (every mapping and preferred version, %d compares): %d disagreements, wrong (more than 1 s after the checker first read what the servers served): %d\n",
		v.compares, len(v.truthDone), len(r.truthWrong))
	for _, d := range v.truthDone {
		mark := "  "
		if d.wrong(end) {
			mark = "! "
		}
		late := fmt.Sprintf("%v after served", d.late(end).Round(10*time.Millisecond))
		if d.ahead {
			late = fmt.Sprintf("%v from the first compare", d.end.Sub(d.start).Round(10*time.Millisecond))
		}
		fmt.Fprintf(b, "%s%s: want %q, got %q; served by +%s, seen +%s, ended +%s: %s", mark, d.key, short(d.want), short(d.got),
			fmtOffset(d.served.Sub(start)), fmtOffset(d.start.Sub(start)), fmtOffset(d.end.Sub(start)), late)
		if d.interrupted != "" {
			fmt.Fprintf(b, " (%s)", d.interrupted)
		}
		b.WriteString("\n")
	}
	return r
}

// targets writes the served API's target lines.
func (r servedResult) targets(b *strings.Builder, v *soakServed) {
	if len(v.watchers) == 0 {
		b.WriteString("lost updates at the served API's watchers: not measured (no watcher ran)\n")
	} else {
		fmt.Fprintf(b, "lost updates at the served API's watchers (a view still different %v after the served API listed the change): %d (target 0): %s\n", servedLostAfter, len(r.lost), metOrNot(len(r.lost) == 0))
	}
	fmt.Fprintf(b, "the served apigroups wrong more than 1 s after the server served the change: %d (target 0): %s\n", len(r.truthWrong), metOrNot(len(r.truthWrong) == 0))
}

// fail fails the test on a lost update, on the served apigroups wrong for
// longer than failAfter, and on a served API or watcher that never ran.
func (r servedResult) fail(t *testing.T, v *soakServed, end time.Time, failAfter time.Duration) {
	t.Helper()
	if len(r.lost) > 0 {
		t.Errorf("%d lost updates at the served API's watchers (a view still different %v after the served API listed the change); the report lists them with '!'", len(r.lost), servedLostAfter)
	}
	var failing int
	for _, d := range r.truthWrong {
		if d.late(end) > failAfter {
			failing++
		}
	}
	if failing > 0 {
		t.Errorf("the served apigroups wrong %d times for more than %s after the server served the change; the report lists them with '!'", failing, failAfter)
	}
	v.mu.Lock()
	polls, compares := v.polls, v.compares
	v.mu.Unlock()
	if polls == 0 || compares == 0 {
		t.Errorf("the served API was never listed (%d lists) or compared (%d)", polls, compares)
	}
	for _, w := range v.watchers {
		w.mu.Lock()
		if !w.ran || w.received == 0 {
			t.Errorf("the %s watcher never received an event (last: %s)", w.name, w.lastErr)
		}
		w.mu.Unlock()
	}
}

// TestServedWatcherGaps pins the soak's rule for a lost update at the
// served API's watchers, without servers: a watcher that takes an event
// late but within servedLostAfter lost nothing; one that never takes a
// change lost it, even while the object keeps changing; one ahead of the
// list (an event before the list shows it, a deletion included) lost
// nothing; a watcher's restart ends its gaps, and its new view is judged
// from its first line.
func TestServedWatcherGaps(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	v := &soakServed{s: &soak{t: t, start: t0}, gone: map[string]servedGone{}, gaps: map[string]*watchGap{}, truthOpen: map[string]*disagreement{}}
	w := &servedWatcher{name: "w", rewatches: map[string]int{}}
	v.watchers = []*servedWatcher{w}
	list := func(s float64, rv uint64, items map[string]uint64) {
		l := &unstructured.UnstructuredList{}
		l.SetResourceVersion(strconv.FormatUint(rv, 10))
		for name, orv := range items {
			o := unstructured.Unstructured{Object: map[string]any{}}
			o.SetName(name)
			o.SetResourceVersion(strconv.FormatUint(orv, 10))
			l.Items = append(l.Items, o)
		}
		v.record(at(s), l)
		v.compareWatcher(w, at(s+0.01))
	}
	event := func(s float64, typ, name string, rv uint64) {
		w.apply(v, at(s), typ, name, strconv.FormatUint(rv, 10))
		v.compareWatcher(w, at(s))
	}

	list(0, 10, map[string]uint64{"a": 5, "b": 7, "d": 9})
	w.begin(at(0.1), map[string]uint64{"a": 5, "b": 7, "d": 9})
	// a: listed at 1, its event 0.5 s later: a difference, not lost.
	list(1, 11, map[string]uint64{"a": 11, "b": 7, "d": 9})
	event(1.5, "MODIFIED", "a", 11)
	// b: changed at 2 and again at 4, the watcher never told: lost,
	// timed from the first change it lacked.
	list(2, 12, map[string]uint64{"a": 11, "b": 12, "d": 9})
	// c: the watcher hears of it before the list shows it; d: its
	// deletion too. Neither is behind.
	event(2.5, "ADDED", "c", 13)
	event(2.6, "DELETED", "d", 14)
	list(2.7, 12, map[string]uint64{"a": 11, "b": 12, "d": 9})
	list(3, 14, map[string]uint64{"a": 11, "b": 12, "c": 13})
	list(4, 15, map[string]uint64{"a": 11, "b": 15, "c": 13})
	for s := 4.2; s < 8; s += 0.2 {
		v.compareWatcher(w, at(s))
	}
	// e: listed at 7.5, then the watcher's process ends (its next one
	// lists anew); the gap ends with it, 0.5 s late.
	list(7.5, 16, map[string]uint64{"a": 11, "b": 15, "c": 13, "e": 16})
	w.mu.Lock()
	w.view, w.endedAt = nil, at(8)
	w.mu.Unlock()
	v.restarted("w", at(8))
	// The new process's view begins at its first line, 3 s after e was
	// listed, and gets e at once: not lost.
	w.begin(at(10), map[string]uint64{"a": 11, "b": 15, "c": 13})
	v.compareWatcher(w, at(10.05))
	event(10.1, "ADDED", "e", 16)

	var b strings.Builder
	r := v.report(&b, at(12))
	if len(r.lost) != 1 || r.lost[0].name != "b" || !r.lost[0].since.Equal(at(2)) {
		t.Errorf("lost %+v, want b's, listed at +2s\n%s", r.lost, b.String())
	}
	if w.down != 2*time.Second {
		t.Errorf("longest down %v, want 2s", w.down)
	}
	// a (0.5 s), b (lost, 6 s), d (ahead: from the compare after its
	// event to the list that showed it gone, 0.41 s), e (0.5 s before the
	// restart; 0.1 s after it, from the new view's start).
	want := []time.Duration{500 * time.Millisecond, 6 * time.Second, 410 * time.Millisecond, 500 * time.Millisecond, 100 * time.Millisecond}
	got := slices.Clone(v.gapsDone)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.EqualFunc(got, want, func(a, b time.Duration) bool { return (a - b).Abs() < 20*time.Millisecond }) {
		t.Errorf("gaps %v, want about %v\n%s", got, want, b.String())
	}
}

// TestServedTruthDisagreements pins how the served apigroups are held to
// the servers' truth, without servers: a served value that some answering
// server serves agrees; one the servers move to at their next read was
// ahead, not wrong; one that lags the servers is wrong from when the
// checker first read the change, and stays wrong when the served API
// then changes to another value (the soak's first runs called that
// ahead).
func TestServedTruthDisagreements(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	chk := newChecker(make([]*truthReader, 2), nil, nil)
	v := &soakServed{s: &soak{t: t, start: t0}, chk: chk, gone: map[string]servedGone{}, gaps: map[string]*watchGap{}, truthOpen: map[string]*disagreement{}}
	// truth sets server i's values, first read at s.
	truth := func(i int, s float64, vals map[string]string) {
		chk.mu.Lock()
		defer chk.mu.Unlock()
		if vals == nil {
			chk.truth[i] = nil
			return
		}
		for k, val := range vals {
			if old, ok := chk.values[i][k]; !ok || old != val {
				chk.since[i][k] = at(s)
			}
		}
		chk.values[i], chk.truth[i] = vals, &soakTruth{at: at(s)}
	}
	served := func(s float64, vals map[string]string) {
		v.compareTruth(&servedPoll{at: at(s), vals: vals}, at(s))
	}
	x := map[string]string{"preferred g/X": "v1"}
	truth(0, 0, x)
	truth(1, 0, x)
	served(0.5, x)
	// The served API shows v2 before either server's next read does.
	served(1.2, map[string]string{"preferred g/X": "v2"})
	truth(0, 1.5, map[string]string{"preferred g/X": "v2"})
	served(1.6, map[string]string{"preferred g/X": "v2"})
	// kas-1 still serves v1 (a server of the other version): agreeing
	// with kas-0 is enough. Then both serve v3 from 3 s; the served API
	// lacks it until 5.5 s, first still at v2 then at v1 (a server it
	// once read), then v3.
	truth(0, 3, map[string]string{"preferred g/X": "v3"})
	truth(1, 3, map[string]string{"preferred g/X": "v3"})
	served(3.1, map[string]string{"preferred g/X": "v2"})
	served(4.5, map[string]string{"preferred g/X": "v1"})
	served(5.5, map[string]string{"preferred g/X": "v3"})
	// A server down does not count: kas-1 stops, kas-0 serves v4 from 7
	// s; the served API shows v4 at 6.8 (ahead) and stays.
	truth(1, 6, nil)
	served(6.8, map[string]string{"preferred g/X": "v4"})
	truth(0, 7, map[string]string{"preferred g/X": "v4", "preferred g/Y": "v1"})
	served(7.1, map[string]string{"preferred g/X": "v4"})
	// Y: the served API drops it before kas-0's next read does, which
	// then lacks it too: ahead, ended by the compare after that read.
	truth(0, 7.5, map[string]string{"preferred g/X": "v4"})
	served(7.6, map[string]string{"preferred g/X": "v4"})

	var b strings.Builder
	r := v.report(&b, at(9))
	var got []string
	for _, d := range v.truthDone {
		late := d.late(at(9))
		if d.ahead {
			late = d.end.Sub(d.start)
		}
		got = append(got, fmt.Sprintf("got %s want %s: ahead %v, wrong %v, %v", d.got, d.want, d.ahead, d.wrong(at(9)), late.Round(100*time.Millisecond)))
	}
	want := []string{
		"got v2 want v1: ahead true, wrong false, 400ms",   // ahead of kas-0's next read
		"got v2 want v3: ahead false, wrong true, 1.5s",    // behind from 3 s to 4.5 s
		"got v1 want v3: ahead false, wrong true, 2.5s",    // still behind, from 3 s, to 5.5 s
		"got v4 want v3: ahead true, wrong false, 300ms",   // ahead of kas-0's read at 7 s
		"got none want v1: ahead true, wrong false, 500ms", // Y, ahead of kas-0's read at 7.5 s
	}
	if !slices.Equal(got, want) {
		t.Errorf("disagreements:\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), b.String())
	}
	if len(r.truthWrong) != 2 {
		t.Errorf("%d wrong, want 2", len(r.truthWrong))
	}
}

// kindFront puts a TLS proxy in front of upstream that names every
// request's client kind for the soak's counting proxies (the User-Agent's
// first word, the program's own after it), and returns a config for it
// with upstream's credentials: kubeatlas-apiserver and the CLIs send the
// library's default User-Agent, "kubeatlas", which their kubeconfigs
// cannot change, so they would be counted together. The front's
// connections to upstream are its own (not client-go's shared transport).
// With perProcess, they end when the client's connection does: a CLI
// process opens its own connection and the balancer hands it to a
// server in service, where a pooled one would stay on a server the
// balancer has since taken out (the first 5-minute run's api-resources
// read a stopping kube-apiserver's discovery that way).
func kindFront(t *testing.T, upstream *rest.Config, kind string, perProcess bool) *rest.Config {
	t.Helper()
	target, err := url.Parse(upstream.Host)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(upstream.CAData)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("User-Agent", kind+" "+r.In.Header.Get("User-Agent"))
		},
		Transport:     tr,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	ts := httptest.NewUnstartedServer(rp)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	if perProcess {
		ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				tr.CloseIdleConnections()
			}
		}
	}
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	cfg := rest.CopyConfig(upstream)
	cfg.Host, cfg.CAData = ts.URL, certPEM(ts.Certificate().Raw)
	return cfg
}
