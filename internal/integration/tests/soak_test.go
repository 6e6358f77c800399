//go:build linux

package tests

// TestSoak is issue 47: the real HA pair through a rolling upgrade and CRD
// changes under load, for KUBEATLAS_SOAK (30m, 5m, hours), with a checker
// holding every client to what the server it talks to serves.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/integrations/controllerruntime"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
	"github.com/kubeatlas/kubeatlas/shared"
)

// soakVar names the soak's duration (a Go duration: 30m, 5m, 6h); the soak
// is skipped without it. soakReportVar names the directory its report is
// written to (t.TempDir() otherwise, which the test's end removes).
const (
	soakVar       = "KUBEATLAS_SOAK"
	soakReportVar = "KUBEATLAS_SOAK_REPORT"
)

// soakGrowthFrom is the minute from which heap and goroutines must not
// grow by more than soakGrowthLimit to the end; runs shorter than
// soakGrowthFrom+soakGrowthSpan report the growth without judging it.
// Growth is judged on the least-squares line through every minute's
// reading from soakGrowthFrom on (fittedGrowth), and reported beside the
// two end points' too: the heap of one minute moved 12.1-15.2 MiB with no
// trend in a 30-minute run (the soak's own requests and compares in
// flight), so two single readings judged the noise, not a grower.
const (
	soakMemProfileRate = 8 << 10
	soakGrowthFrom     = 5 * time.Minute
	soakGrowthSpan     = 5 * time.Minute
	soakGrowthLimit    = 0.05
)

// countingProxy is a TLS reverse proxy in front of one server that counts
// each request by its User-Agent (each client kind of the soak sets its
// own), and can cut every connection its clients hold.
type countingProxy struct {
	ts     *httptest.Server
	counts *requestCounts
	errors atomic.Int64 // requests the server did not answer (502)
}

func startCountingProxy(t *testing.T, p *haPlane, server string, counts *requestCounts) *countingProxy {
	t.Helper()
	target, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // watches stream
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 100, ForceAttemptHTTP2: true}
	rp.Transport = tr
	cp := &countingProxy{counts: counts}
	name := server // the server's name, for the ledger (soak_cost_test.go)
	for _, srv := range p.servers {
		if srv.url == server {
			name = srv.name
		}
	}
	// A server down (restarted) or a cut connection is counted, not
	// logged: the timeline says when.
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		cp.errors.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}
	cp.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, _, _ := strings.Cut(r.Header.Get("User-Agent"), " ")
		counts.add(kind, r.URL.Path)
		w = counts.ledger.observe(w, r, name)
		if counts.observe != nil {
			counts.observe(kind, w, r, rp)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	cp.ts.Config.ErrorLog = log.New(io.Discard, "", 0) // cut connections' TLS errors
	cp.ts.EnableHTTP2 = true
	cp.ts.StartTLS()
	t.Cleanup(func() { cp.ts.Close(); tr.CloseIdleConnections() })
	return cp
}

// config is the admin's config through the proxy, as client kind ua;
// identity i > 0 impersonates user-i.
func (cp *countingProxy) config(ua string, i int) *rest.Config {
	return soakConfig(cp.ts.URL, cp.ts.Certificate(), ua, i)
}

func soakConfig(host string, cert *x509.Certificate, ua string, i int) *rest.Config {
	cfg := &rest.Config{Host: host, BearerToken: token, UserAgent: ua, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}}
	if i > 0 {
		cfg.Impersonate.UserName = fmt.Sprintf("user-%d", i)
	}
	return cfg
}

// soakEvent is a line of the timeline.
type soakEvent struct {
	at   time.Duration
	what string
}

// soakVerdict is one consistency check: when it began, what it said,
// and the servers' versions before and after it ("" for one down).
type soakVerdict struct {
	at            time.Duration
	verdict       string
	before, after []string
}

// mixed says whether the pair ran two versions, both up, the whole check.
func (v soakVerdict) mixed() bool {
	return !slices.Contains(v.before, "") && !slices.Contains(v.after, "") && v.before[0] != v.before[1] && slices.Equal(v.before, v.after)
}

// same says whether both servers ran one version, both up, the whole
// check.
func (v soakVerdict) same() bool {
	return !slices.Contains(v.before, "") && v.before[0] == v.before[1] && slices.Equal(v.before, v.after)
}

func (s *soak) versionsNow() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.versions)
}

// soak is one run's shared state.
type soak struct {
	t     *testing.T
	start time.Time

	mu       sync.Mutex
	events   []soakEvent
	panics   []string
	versions []string // each server's version now ("" while down)
}

func (s *soak) event(format string, args ...any) {
	e := soakEvent{at: time.Since(s.start), what: fmt.Sprintf(format, args...)}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	s.t.Logf("soak +%s %s", fmtOffset(e.at), e.what)
}

func fmtOffset(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	return fmt.Sprintf("%d:%04.1f", int(d.Minutes()), (d % time.Minute).Seconds())
}

// goSafe runs fn on a goroutine, recording a panic (with its stack) as
// the soak's failure rather than ending the process.
func (s *soak) goSafe(wg *sync.WaitGroup, name string, fn func()) {
	wg.Go(func() {
		defer func() {
			if v := recover(); v != nil {
				s.mu.Lock()
				s.panics = append(s.panics, fmt.Sprintf("%s: %v\n%s", name, v, debug.Stack()))
				s.mu.Unlock()
			}
		}()
		fn()
	})
}

// sleepCtx sleeps for d or until ctx ends, and says whether it slept the
// whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// soakVersion is one version of a soak CRD.
type soakVersion struct {
	name            string
	served, storage bool
}

// soakCRD is a CRD of soakGroup whose versions each declare fields
// field00 to field<fields-1> (strings) in their spec.
func soakCRD(kind string, versions []soakVersion, fields int) *unstructured.Unstructured {
	props := map[string]any{}
	for i := range fields {
		props[fmt.Sprintf("field%02d", i)] = map[string]any{"type": "string"}
	}
	var vs []any
	for _, v := range versions {
		vs = append(vs, map[string]any{"name": v.name, "served": v.served, "storage": v.storage, "schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "properties": map[string]any{"spec": map[string]any{"type": "object", "properties": props}},
		}}})
	}
	plural := lower(kind) + "s"
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + soakGroup},
		"spec": map[string]any{
			"group": soakGroup, "scope": "Namespaced", "versions": vs,
			"names": map[string]any{"plural": plural, "singular": lower(kind), "kind": kind, "listKind": kind + "List"},
		},
	}}
}

// soakUniverse is every field a soak CRD may declare.
func soakUniverse() []string {
	var u []string
	for i := range 40 {
		u = append(u, fmt.Sprintf("field%02d", i))
	}
	return u
}

// crdSchedule changes the soak's CRDs in a cycle: a field added (to every
// version of Widget) and Gadget created; a version added (served, not
// stored); its served flag turned off and on again, and Gadget deleted;
// the storage version moved to it; the objects migrated and the old
// version removed. Each step is retried until it succeeds (the servers
// restart under it).
type crdSchedule struct {
	s        *soak
	dyn      dynamic.Interface
	fields   int
	versions []soakVersion // Widget's: [stored, other]
	step     int
	// declared is fields once the server has taken the CRD that
	// declares them, for the applier.
	declared atomic.Int64
}

func (c *crdSchedule) put(ctx context.Context, kind string, versions []soakVersion) error {
	crd := soakCRD(kind, versions, c.fields)
	live, err := c.dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	crd.SetResourceVersion(live.GetResourceVersion())
	_, err = c.dyn.Resource(crdGVR).Update(ctx, crd, metav1.UpdateOptions{})
	return err
}

func (c *crdSchedule) next(ctx context.Context) (string, error) {
	stored := c.versions[0].name
	other := map[string]string{"v1": "v2", "v2": "v1"}[stored]
	switch c.step % 6 {
	case 0:
		if c.fields < len(soakUniverse()) {
			c.fields++
		}
		if err := c.put(ctx, "Widget", c.versions); err != nil {
			return "", err
		}
		c.declared.Store(int64(c.fields))
		if _, err := c.dyn.Resource(crdGVR).Create(ctx, soakCRD("Gadget", []soakVersion{{"v1", true, true}}, c.fields), metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("creating Gadget: %w", err)
		}
		return fmt.Sprintf("Widget: field%02d added to %s; Gadget's CRD created", c.fields-1, stored), nil
	case 1:
		vs := []soakVersion{c.versions[0], {other, true, false}}
		if err := c.put(ctx, "Widget", vs); err != nil {
			return "", err
		}
		c.versions = vs
		return fmt.Sprintf("Widget: version %s added (served, storage stays %s)", other, stored), nil
	case 2:
		vs := []soakVersion{c.versions[0], {other, false, false}}
		if err := c.put(ctx, "Widget", vs); err != nil {
			return "", err
		}
		c.versions = vs
		return fmt.Sprintf("Widget: %s served=false", other), nil
	case 3:
		vs := []soakVersion{c.versions[0], {other, true, false}}
		if err := c.put(ctx, "Widget", vs); err != nil {
			return "", err
		}
		c.versions = vs
		if err := c.dyn.Resource(crdGVR).Delete(ctx, "gadgets."+soakGroup, metav1.DeleteOptions{}); err != nil {
			return "", fmt.Errorf("deleting Gadget: %w", err)
		}
		return fmt.Sprintf("Widget: %s served=true; Gadget's CRD deleted", other), nil
	case 4:
		vs := []soakVersion{{other, true, true}, {stored, true, false}}
		if err := c.put(ctx, "Widget", vs); err != nil {
			return "", err
		}
		c.versions = vs
		return fmt.Sprintf("Widget: storage moved from %s to %s", stored, other), nil
	default:
		// stored is now the version the objects were moved to; other
		// is the old one, to remove once no object is stored in it.
		res := c.dyn.Resource(schema.GroupVersionResource{Group: soakGroup, Version: stored, Resource: "widgets"}).Namespace("default")
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, o := range list.Items {
			a := o.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a["soak.kubeatlas.test/migrated"] = time.Now().Format(time.RFC3339Nano)
			o.SetAnnotations(a)
			if _, err := res.Update(ctx, &o, metav1.UpdateOptions{}); err != nil {
				return "", fmt.Errorf("migrating %s: %w", o.GetName(), err)
			}
		}
		live, err := c.dyn.Resource(crdGVR).Get(ctx, "widgets."+soakGroup, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		_ = unstructured.SetNestedStringSlice(live.Object, []string{stored}, "status", "storedVersions")
		if _, err := c.dyn.Resource(crdGVR).UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
			return "", fmt.Errorf("storedVersions: %w", err)
		}
		vs := []soakVersion{c.versions[0]}
		if err := c.put(ctx, "Widget", vs); err != nil {
			return "", err
		}
		c.versions = vs
		return fmt.Sprintf("Widget: %d objects migrated to %s, version %s removed", len(list.Items), stored, other), nil
	}
}

// run makes a step every interval until ctx ends.
func (c *crdSchedule) run(ctx context.Context, interval time.Duration) {
	for sleepCtx(ctx, interval) {
		for {
			what, err := c.next(ctx)
			if err == nil {
				c.step++
				c.s.event("%s", what)
				break
			}
			if ctx.Err() != nil {
				return
			}
			// Half-done steps (Gadget already there or gone) are
			// moved past; others are tried again.
			if strings.Contains(err.Error(), "already exists") || strings.Contains(err.Error(), "not found") && strings.Contains(err.Error(), "Gadget") {
				c.step++
				c.s.event("CRD step %d half done: %v", c.step-1, err)
				break
			}
			if !sleepCtx(ctx, time.Second) {
				return
			}
		}
	}
}

// reconcileOutcomes counts one controller side's reconciles.
type reconcileOutcomes struct {
	ok, noMatch, failed atomic.Int64
	lastErr             atomic.Value // string

	mu    sync.Mutex
	byGVK map[string]int // "identity group/version/Kind outcome" → reconciles
}

func (o *reconcileOutcomes) count(who string, gvk schema.GroupVersionKind, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byGVK == nil {
		o.byGVK = map[string]int{}
	}
	o.byGVK[who+" "+gvk.Group+"/"+gvk.Version+"/"+gvk.Kind+" "+outcome]++
}

func (o *reconcileOutcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var parts []string
	for _, k := range sortedKeys(o.byGVK) {
		parts = append(parts, fmt.Sprintf("  %s %d", k, o.byGVK[k]))
	}
	return strings.Join(parts, "\n")
}

// controllers runs workers that each build a controller-runtime client per
// reconcile with options, for identity i, and list the soak's kinds (and
// ConfigMaps) in turn, every 500 ms, until ctx ends.
func controllers(ctx context.Context, s *soak, wg *sync.WaitGroup, name string, cfgs []*rest.Config, options func(*rest.Config) client.Options, out *reconcileOutcomes) {
	kinds := []schema.GroupVersionKind{
		{Group: soakGroup, Version: "v1", Kind: "Widget"},
		{Group: soakGroup, Version: "v2", Kind: "Widget"},
		{Group: soakGroup, Version: "v1", Kind: "Gadget"},
		{Version: "v1", Kind: "ConfigMap"},
	}
	for i, cfg := range cfgs {
		s.goSafe(wg, fmt.Sprintf("%s worker %d", name, i), func() {
			for n := i; sleepCtx(ctx, 500*time.Millisecond); n++ {
				gvk := kinds[n%len(kinds)]
				who := identityName(i)
				if cfg.Impersonate.UserName == "" {
					who = "admin"
				}
				cl, err := client.New(cfg, options(cfg))
				if err == nil {
					l := &unstructured.UnstructuredList{}
					l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err = cl.List(rctx, l, client.InNamespace("default"))
					cancel()
				}
				switch {
				case err == nil:
					out.ok.Add(1)
					out.count(who, gvk, "ok")
				case meta.IsNoMatchError(err):
					out.noMatch.Add(1)
					out.count(who, gvk, "no-match")
				case ctx.Err() != nil:
					return
				default:
					out.failed.Add(1)
					out.lastErr.Store(err.Error())
					reason := "failed"
					if apierrors.IsNotFound(err) {
						reason = "not-found"
					}
					out.count(who, gvk, reason)
				}
			}
		})
	}
}

// applyOutcomes counts the applier's tries.
type applyOutcomes struct {
	applied, noMapping, refused, failed atomic.Int64
	lastErr                             atomic.Value // string
}

// applier applies a Widget every 2 s through a shared handle: its mapper
// picks the preferred version, its typed converter validates the object
// (every field the schedule has declared, set: refused while the
// converter has not seen the newest), and the server applies it.
func applier(ctx context.Context, s *soak, wg *sync.WaitGroup, h *shared.Handle, conv *typed.Converter, dyn dynamic.Interface, fields *atomic.Int64, out *applyOutcomes) {
	s.goSafe(wg, "applier", func() {
		for n := 0; sleepCtx(ctx, 2*time.Second); n++ {
			m, err := h.Mapper().RESTMapping(schema.GroupKind{Group: soakGroup, Kind: "Widget"})
			if err != nil {
				out.noMapping.Add(1)
				continue
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(m.GroupVersionKind)
			u.SetNamespace("default")
			u.SetName(fmt.Sprintf("w%d", n%5))
			for _, f := range soakUniverse()[:fields.Load()] {
				_ = unstructured.SetNestedField(u.Object, "v", "spec", f)
			}
			if _, err := conv.ObjectToTyped(u); err != nil {
				out.refused.Add(1)
				out.lastErr.Store(err.Error())
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = dyn.Resource(m.Resource).Namespace("default").Apply(rctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "soak", Force: true})
			cancel()
			if err != nil {
				out.failed.Add(1)
				out.lastErr.Store(err.Error())
			} else {
				out.applied.Add(1)
			}
		}
	})
}

func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv(soakVar)
	if v == "" {
		t.Skipf("the soak runs only when %s names its duration (30m by default in internal/integration/soak.sh; 5m in CI; hours allowed)", soakVar)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute {
		t.Fatalf("%s=%q: want a duration of a minute or more (30m, 5m, 6h)", soakVar, v)
	}
	return d
}

// soakFailAfterVar names how long after the server served a change a
// client's wrong answer fails TestSoak: 1s by default, the issue's
// target. The report judges the target at 1 s whatever it is set to. CI
// sets 10s: the OpenAPI root is read at most once a second, so a typed
// schema can be a little over a second behind its server on a loaded
// machine (three of 11,790 compares, at 1.01 s, in one 5-minute run; none
// in another), which the report shows as the target not met, while a
// client stuck on a wrong answer (a follower that mapped a removed kind
// for 20 s, say) still fails CI.
const soakFailAfterVar = "KUBEATLAS_SOAK_FAIL_AFTER"

func soakFailAfter(t *testing.T) time.Duration {
	v := os.Getenv(soakFailAfterVar)
	if v == "" {
		return time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		t.Fatalf("%s=%q: want a duration of a second or more", soakFailAfterVar, v)
	}
	return d
}

// TestSoak starts the HA pair as two v1.36.3 servers with peer-aggregated
// discovery, puts a counting proxy in front of each and a round-robin
// balancer in front of both proxies, and for KUBEATLAS_SOAK runs the load
// (controllers building a client per reconcile through shared, and the
// same with controller-runtime's defaults; a shared handle applying
// through its typed converter) while the CRDs change on a schedule and
// the pair is upgraded to v1.37.1 one server at a time, then one server
// rolled back and upgraded again; every client connection is cut at the proxies twice, and
// etcd is restarted once; an aggregated API server goes away and returns,
// user-2 meets 429s from API priority and fairness, and a fleet of the two
// servers and the balancer is held (soak_faults_test.go). The checker holds a shared handle per server (its mapper
// and typed converter, the watch on) to what that server serves, four
// times a second. It fails on an answer wrong more than 1 s
// (KUBEATLAS_SOAK_FAIL_AFTER) after the
// server served it, on growth of heap or goroutines beyond 5% from minute
// 5 to the end (runs of 10 minutes or more), and on a panic.
func TestSoak(t *testing.T) {
	d := soakDuration(t)
	// The heap's profiles sample an allocation every soakMemProfileRate
	// bytes: the default 512 KiB is too coarse at a 15-20 MiB heap to say
	// whose a few MiB of growth are.
	runtime.MemProfileRate = soakMemProfileRate
	ctrllog.SetLogger(logr.Discard()) // controller-runtime's warning that no logger was set, once per client
	nextBin, oldBin := os.Getenv(nextAPIServerVar), os.Getenv("KUBEATLAS_KUBE_APISERVER")
	p := startHA(t, haOptions{peerProxy: true, sameVersion: true, aggregatorRouting: true})
	if nextBin == "" {
		haMissing(t, "the soak's rolling upgrade needs %s (v1.37.1)", nextAPIServerVar)
	}
	reportDir := os.Getenv(soakReportVar)
	if reportDir == "" {
		reportDir = t.TempDir()
	} else if err := os.MkdirAll(reportDir, 0o755); err != nil {
		t.Fatal(err)
	}

	s := &soak{t: t, start: time.Now()}
	for _, srv := range p.servers {
		s.versions = append(s.versions, srv.version)
	}
	counts := newRequestCounts(s.start)
	byIdentity := newIdentityCounts(s.start) // soak_faults_test.go
	counts.observe = byIdentity.observe
	var proxies []*countingProxy
	for _, srv := range p.servers {
		proxies = append(proxies, startCountingProxy(t, p, srv.url, counts))
	}
	lb := newRoundRobin(t, strings.TrimPrefix(proxies[0].ts.URL, "https://"), strings.TrimPrefix(proxies[1].ts.URL, "https://"))
	proxyCert := proxies[0].ts.Certificate()
	viaLB := func(ua string, i int) *rest.Config { return soakConfig(lb.url(), proxyCert, ua, i) }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	adminDyn, err := dynamic.NewForConfig(viaLB("soak-schedule", 0))
	if err != nil {
		t.Fatal(err)
	}
	// The impersonated users may do what the admin may.
	crb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "soak-users"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "user-1"}, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "user-2"}},
	}}
	if _, err := adminDyn.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}).Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sched := &crdSchedule{s: s, dyn: adminDyn, fields: 1, versions: []soakVersion{{"v1", true, true}}}
	if _, err := adminDyn.Resource(crdGVR).Create(ctx, soakCRD("Widget", sched.versions, sched.fields), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The checked clients: a shared handle per server, through its proxy.
	reg, err := shared.New()
	if err != nil {
		t.Fatal(err)
	}
	var clients []*soakClient
	var readers []*truthReader
	hc := p.httpClient(true)
	defer hc.CloseIdleConnections()
	for i, srv := range p.servers {
		// The admin, whose handle runs the server's watch, and user-1,
		// who follows it.
		for id := range 2 {
			h, err := reg.Acquire(proxies[i].config("kubeatlas-checked", id))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Release()
			conv, err := typed.New(h.OpenAPI())
			if err != nil {
				t.Fatal(err)
			}
			cl := &soakClient{name: identityName(id) + "@" + srv.name, server: i, mapper: h.Mapper(), conv: conv}
			defer cl.remember(h.Discovery())()
			clients = append(clients, cl)
			if id == 0 {
				waitUntil(t, srv.name+"'s handle watching", 60*time.Second, func() bool { return h.Watcher() != nil && h.Watcher().Stats().Watching })
			}
		}
		readers = append(readers, &truthReader{hc: hc, url: srv.url, docs: map[string]map[string][]string{}})
	}
	// The aggregated server, user-2 throttled, the fleet: soak_faults_test.go.
	faulty := startSoakFaults(ctx, t, s, p, proxies, byIdentity, reg, viaLB)
	chk := newChecker(readers, clients, soakUniverse())
	chk.onTruth = func(i int, t *soakTruth) { counts.ledger.truth(p.servers[i].name, t.at, t.kinds) }
	waitUntil(t, "both servers serving Widget", 60*time.Second, func() bool {
		chk.readTruth(ctx)
		for _, tr := range chk.truth {
			if tr == nil || tr.kinds[soakGroup+"/v1/Widget"] == "" {
				return false
			}
		}
		return true
	})
	served := startSoakServed(t, s, chk, viaLB("kubeatlas-apiserver", 0), []string{p.servers[0].url, p.servers[1].url}, reportDir)
	clis := startSoakCLIs(t, s, chk, viaLB("soak-cli", 0))
	s.event("started: %s (%s) and %s (%s), peer-aggregated discovery on; load average %s", p.servers[0].name, p.servers[0].version, p.servers[1].name, p.servers[1].version, loadAverage())

	var wg sync.WaitGroup
	s.goSafe(&wg, "checker", func() { chk.run(ctx) })
	faulty.run(ctx, &wg, chk)

	var mem []memSample
	var memMu sync.Mutex
	s.goSafe(&wg, "memory", func() {
		for {
			m := sampleMemory(s.start)
			memMu.Lock()
			first := len(mem) > 0 && mem[len(mem)-1].at < soakGrowthFrom-5*time.Second && m.at >= soakGrowthFrom-5*time.Second
			mem = append(mem, m)
			memMu.Unlock()
			if first {
				// The sample growth is judged from: its heap profile, for
				// go tool pprof -diff_base against heap-end.pprof.
				writeProfiles(t, filepath.Join(reportDir, "heap-from.pprof"))
			} else if m.at >= soakGrowthFrom && int(m.at/time.Minute)%5 == 0 {
				// Every fifth minute after it, so that a grower shows as
				// a trend rather than as two readings.
				writeProfiles(t, filepath.Join(reportDir, fmt.Sprintf("heap-%02dm.pprof", int(m.at/time.Minute))))
			}
			if !sleepCtx(ctx, time.Minute) {
				return
			}
		}
	})

	// The load: three identities' controllers each side, a client per
	// reconcile, through the balancer.
	var viaShared, viaDefaults reconcileOutcomes
	var sharedCfgs, defaultCfgs []*rest.Config
	for i := range 3 {
		sharedCfgs = append(sharedCfgs, viaLB("kubeatlas-controller", i))
		defaultCfgs = append(defaultCfgs, viaLB("controller-runtime-default", i))
	}
	sharing := controllerruntime.Sharing{Registry: reg}
	controllers(ctx, s, &wg, "kubeatlas", sharedCfgs, func(cfg *rest.Config) client.Options { return sharing.ClientOptions(cfg, client.Options{}) }, &viaShared)
	controllers(ctx, s, &wg, "controller-runtime", defaultCfgs, func(*rest.Config) client.Options { return client.Options{} }, &viaDefaults)
	ha, err := reg.Acquire(viaLB("kubeatlas-apply", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Release()
	applyConv, err := typed.New(ha.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	// The applier's requests share the handle's connection, so that the
	// server that applies is the one whose schema the converter read.
	applyDyn, err := dynamic.NewForConfigAndClient(viaLB("kubeatlas-apply", 0), ha.HTTPClient())
	if err != nil {
		t.Fatal(err)
	}
	follow := sampleFollowing(ctx, s, &wg, reg, sharedCfgs, ha) // soak_cost_test.go
	var applies applyOutcomes
	sched.declared.Store(int64(sched.fields))
	applier(ctx, s, &wg, ha, applyConv, applyDyn, &sched.declared, &applies)
	served.run(ctx, &wg)
	clis.run(ctx, &wg)

	// The check that names skew, every 10 s: through the balancer, both
	// servers vouched for and asked directly.
	ccfg := viaLB("soak-consistency", 0)
	ccfg.CAData = append(append([]byte(nil), ccfg.CAData...), p.caPEM...) // the proxies' and the servers'
	cdc, err := discovery.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	vouched := consistency.WithAPIServers(strings.TrimPrefix(p.servers[0].url, "https://"), strings.TrimPrefix(p.servers[1].url, "https://"))
	var verdicts []soakVerdict
	s.goSafe(&wg, "consistency", func() {
		last := ""
		for {
			before := s.versionsNow()
			began := time.Since(s.start)
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			r, err := consistency.Check(rctx, cdc, vouched)
			cancel()
			if ctx.Err() != nil {
				return
			}
			v := soakVerdict{at: began, before: before, after: s.versionsNow()}
			if err != nil {
				v.verdict = "error: " + err.Error()
			} else {
				v.verdict = r.Verdict().String()
			}
			s.mu.Lock()
			verdicts = append(verdicts, v)
			s.mu.Unlock()
			if v.verdict != last {
				s.event("consistency check (began +%s): %s", fmtOffset(began), short(v.verdict))
				last = v.verdict
			}
			if !sleepCtx(ctx, 10*time.Second) {
				return
			}
		}
	})

	opInterval := min(max(d/40, 5*time.Second), time.Minute)
	s.goSafe(&wg, "crd schedule", func() { sched.run(ctx, opInterval) })

	// The faults on the test's goroutine, at fractions of the run.
	restart := func(i int, bin string) {
		lb.takeOut(i)
		s.mu.Lock()
		from := s.versions[i]
		s.versions[i] = ""
		s.mu.Unlock()
		chk.down(i)
		// The server's own connections end with it: its proxy (which
		// stands in for its listener) cuts its clients' connections, so
		// that a client behind the balancer reconnects to a server in
		// service, as it would when a real server is killed. Kept open,
		// they reached the server again through its proxy as soon as it
		// listened, before it was ready: the fleet's balancer member read
		// a root without the CRDs' OpenAPI documents from the starting
		// server, 1.7 s after kas-0 was stopped, and was judged wrong for
		// 2.9 s against kas-1, which alone was in the balancer.
		proxies[i].ts.CloseClientConnections()
		s.event("%s (%s) taken out of the balancer and stopped", p.servers[i].name, from)
		began := time.Now()
		v, err := p.restart(ctx, t, i, bin)
		if err != nil {
			t.Errorf("restarting %s: %v", p.servers[i].name, err)
			chk.up(i)
			return
		}
		chk.up(i)
		lb.putBack(i)
		s.mu.Lock()
		s.versions[i] = v
		s.mu.Unlock()
		s.event("%s ready as %s (down %v) and back in the balancer", p.servers[i].name, v, time.Since(began).Round(100*time.Millisecond))
	}
	var upgraded time.Duration // when the second server was ready as v1.37.1
	faults := []struct {
		at   float64
		name string
		do   func()
	}{
		{0.20, "upgrade kas-0", func() { restart(0, nextBin) }},
		{0.35, "upgrade kas-1", func() { restart(1, nextBin); upgraded = time.Since(s.start) }},
		{0.50, "cut connections", func() {
			for i, cp := range proxies {
				cp.ts.CloseClientConnections()
				s.event("proxy of %s cut every client connection", p.servers[i].name)
			}
		}},
		{0.60, "restart etcd", func() {
			s.event("etcd killed and started again on its data")
			began := time.Now()
			if err := p.etcd.restart(t); err != nil {
				t.Errorf("restarting etcd: %v", err)
				return
			}
			s.event("etcd healthy again (%v after it was killed)", time.Since(began).Round(100*time.Millisecond))
		}},
		{0.70, "roll back kas-1", func() { restart(1, oldBin) }},
		// The upgrade retried, as a rollback is followed in practice: the
		// run then ends as it ran at minute 5, one version on both
		// servers, so that the growth from minute 5 to the end measures
		// growth, not the pair's phase (with two versions the library
		// holds both servers' views: the 30-minute run's heap was 14.1-15.7
		// MiB in the first two-version phase and 12.3-14.7 in the
		// one-version phase after it, and a run that ended rolled back
		// read +17.3% against minute 5 for that reason).
		{0.80, "upgrade kas-1 again", func() { restart(1, nextBin) }},
		{0.85, "cut connections", func() {
			for i, cp := range proxies {
				cp.ts.CloseClientConnections()
				s.event("proxy of %s cut every client connection", p.servers[i].name)
			}
		}},
	}
	// The aggregated server away from 40% of the run, for a tenth of it
	// and at least 45 s (its aggregator notices within about 30 s).
	faults = append(faults, faulty.outage(0.40, 0.40+max(0.10, (45*time.Second).Seconds()/d.Seconds()))...)
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].at < faults[j].at })
	for _, f := range faults {
		if !sleepCtx(ctx, time.Until(s.start.Add(time.Duration(f.at*float64(d))))) {
			break
		}
		f.do()
	}
	sleepCtx(ctx, time.Until(s.start.Add(d)))
	// The last sample while the load still runs, like the others.
	final := sampleMemory(s.start)
	writeProfiles(t, filepath.Join(reportDir, "heap-end.pprof"))
	end := time.Now()
	cancel()
	wg.Wait()
	mem = append(mem, final)
	s.event("ended; load average %s", loadAverage())

	// The report.
	var b strings.Builder
	fmt.Fprintf(&b, "kubeatlas soak (issue 47): %v on the real HA pair, started %s\n\n", d, s.start.UTC().Format(time.RFC3339))
	b.WriteString("== timeline\n")
	s.mu.Lock()
	for _, e := range s.events {
		fmt.Fprintf(&b, "+%s  %s\n", fmtOffset(e.at), e.what)
	}
	panics := slices.Clone(s.panics)
	s.mu.Unlock()

	all := chk.all(end)
	faulty.markHeld(all, end) // a throttled handle's time told to wait after 429s does not count
	var wrong []*disagreement
	for _, dg := range all {
		if dg.wrong(end) {
			wrong = append(wrong, dg)
		}
	}
	chk.mu.Lock()
	checks, reads, downs := chk.checks, chk.reads, fmt.Sprint(chk.downs)
	chk.mu.Unlock()
	fmt.Fprintf(&b, "\n== disagreements: %d, of which wrong (more than 1 s after the checker first read what the server served): %d\n", len(all), len(wrong))
	fmt.Fprintf(&b, "(%d compares of a client against its server's truth; %d truth reads answered; failed reads by server %s)\n", checks, reads, downs)
	for _, dg := range all {
		mark := "  "
		if dg.wrong(end) {
			mark = "! "
		}
		after := "?"
		if !dg.servedAfter.IsZero() {
			after = "+" + fmtOffset(dg.servedAfter.Sub(s.start))
		}
		fmt.Fprintf(&b, "%s%s %s: want %q, got %q; served by +%s (after %s), seen +%s, ended +%s: %v after served",
			mark, dg.client, dg.key, short(dg.want), short(dg.got), fmtOffset(dg.served.Sub(s.start)), after,
			fmtOffset(dg.start.Sub(s.start)), fmtOffset(dg.end.Sub(s.start)), dg.late(end).Round(10*time.Millisecond))
		if dg.interrupted != "" {
			fmt.Fprintf(&b, " (%s)", dg.interrupted)
		}
		b.WriteString("\n")
	}

	fmt.Fprintf(&b, "\n== requests a minute at the servers, by client kind (library: discovery, OpenAPI, CRD and APIService lists and watches; work: the rest)\n")
	snap := counts.snapshot()
	fmt.Fprintf(&b, "%-28s %12s %12s   library each minute\n", "kind", "library/min", "work/min")
	for _, kind := range sortedKeys(snap) {
		fmt.Fprintf(&b, "%-28s %12.1f %12.1f   %v\n", kind, perMinute(snap[kind]["library"], end.Sub(s.start)), perMinute(snap[kind]["work"], end.Sub(s.start)), snap[kind]["library"])
	}
	fmt.Fprintf(&b, "reconciles: kubeatlas %d ok, %d no match, %d failed (last: %v); controller-runtime defaults %d ok, %d no match, %d failed (last: %v)\n",
		viaShared.ok.Load(), viaShared.noMatch.Load(), viaShared.failed.Load(), viaShared.lastErr.Load(),
		viaDefaults.ok.Load(), viaDefaults.noMatch.Load(), viaDefaults.failed.Load(), viaDefaults.lastErr.Load())
	fmt.Fprintf(&b, "reconciles by identity, kind and outcome, kubeatlas:\n%s\ncontroller-runtime's defaults:\n%s\n", viaShared.String(), viaDefaults.String())
	fmt.Fprintf(&b, "applies through the typed converter: %d applied; %d without a mapping, %d refused by the converter, %d failed at the server (last: %v)\n",
		applies.applied.Load(), applies.noMapping.Load(), applies.refused.Load(), applies.failed.Load(), applies.lastErr.Load())
	fmt.Fprintf(&b, "requests the proxies could not hand to their server (502): %s %d, %s %d\n", p.servers[0].name, proxies[0].errors.Load(), p.servers[1].name, proxies[1].errors.Load())
	libShared := perMinute(snap["kubeatlas-controller"]["library"], end.Sub(s.start))
	libDefault := perMinute(snap["controller-runtime-default"]["library"], end.Sub(s.start))
	ratio := libShared / max(libDefault, 1e-9)
	fmt.Fprintf(&b, "controllers' library requests a minute: kubeatlas %.1f, controller-runtime's defaults %.1f: %.3f of them (target at most 0.1)\n", libShared, libDefault, ratio)
	counts.ledger.report(&b, "kubeatlas-controller", 12)
	follow.report(&b)
	if err := counts.ledger.writeLog(reportDir); err != nil {
		t.Error(err)
	}
	counts.ledger.close()

	b.WriteString("\n== the check that names skew (consistency.Check every 10 s, both servers vouched for)\n")
	s.mu.Lock()
	vs := slices.Clone(verdicts)
	s.mu.Unlock()
	var mixedChecks, mixedInconsistent int
	var firstConsistent time.Duration = -1
	for _, v := range vs {
		fmt.Fprintf(&b, "+%s  %v -> %v  %s\n", fmtOffset(v.at), v.before, v.after, short(v.verdict))
		if v.mixed() {
			mixedChecks++
			if v.verdict == consistency.Inconsistent.String() {
				mixedInconsistent++
			}
		}
		if upgraded > 0 && v.at >= upgraded && firstConsistent < 0 && v.same() && v.verdict == consistency.Consistent.String() {
			firstConsistent = v.at
		}
	}
	consistencyMet := mixedChecks > 0 && mixedInconsistent == mixedChecks && upgraded > 0 && firstConsistent >= 0 && firstConsistent-upgraded <= time.Minute
	fmt.Fprintf(&b, "while two versions ran: %d of %d checks Inconsistent; upgrade finished +%s, first Consistent check after it began +%s (%v after; target within 1m): target %s\n",
		mixedInconsistent, mixedChecks, fmtOffset(upgraded), fmtOffset(firstConsistent), (firstConsistent - upgraded).Round(100*time.Millisecond), metOrNot(consistencyMet))

	servedResult := served.report(&b, end)
	cliWrong := clis.report(&b, end)

	b.WriteString("\n== memory each minute (heap after a GC and goroutines, each the least of 5 readings 1.3 s apart, and the first of them; RSS; sockets)\n")
	for _, m := range mem {
		fmt.Fprintf(&b, "+%s  heap %6.1f MiB (first %6.1f)  rss %6.1f MiB  goroutines %5d (first %5d)  sockets %4d\n", fmtOffset(m.at), float64(m.heap)/(1<<20), float64(m.heapFirst)/(1<<20), float64(m.rss)/(1<<20), m.goroutines, m.goFirst, m.sockets)
	}
	var growthNote string
	var from *memSample
	var since []memSample // from on: the samples growth is fitted through
	if i := slices.IndexFunc(mem, func(m memSample) bool { return m.at >= soakGrowthFrom-5*time.Second }); i >= 0 {
		from, since = &mem[i], mem[i:]
	}
	last := mem[len(mem)-1]
	judged := d >= soakGrowthFrom+soakGrowthSpan && from != nil
	var heapTrend, goTrend float64
	if from != nil {
		heapTrend = memTrend(since, func(m memSample) float64 { return float64(m.heap) })
		goTrend = memTrend(since, func(m memSample) float64 { return float64(m.goroutines) })
		growthNote = fmt.Sprintf("from +%s to the end, on the line fitted through its %d minutes: heap %+.1f%%, goroutines %+.1f%%; end points: heap %+.1f%% (first readings %+.1f%%), goroutines %+.1f%% (first readings %+.1f%%), RSS %+.1f%%, sockets %+.1f%%",
			fmtOffset(from.at), len(since), 100*heapTrend, 100*goTrend,
			100*growth(float64(from.heap), float64(last.heap)), 100*growth(float64(from.heapFirst), float64(last.heapFirst)), 100*growth(float64(from.goroutines), float64(last.goroutines)), 100*growth(float64(from.goFirst), float64(last.goFirst)),
			100*growth(float64(from.rss), float64(last.rss)), 100*growth(float64(from.sockets), float64(last.sockets)))
	} else {
		growthNote = "the run ended before minute 5: growth not measured"
	}
	if !judged {
		growthNote += fmt.Sprintf(" (not judged: the run is shorter than %v)", soakGrowthFrom+soakGrowthSpan)
	}
	fmt.Fprintf(&b, "%s\n", growthNote)
	if len(panics) > 0 {
		fmt.Fprintf(&b, "\n== panics: %d\n%s\n", len(panics), strings.Join(panics, "\n"))
	}

	faulty.report(&b, all, end)

	b.WriteString("\n== targets\n")
	fmt.Fprintf(&b, "answers wrong more than 1 s after the server served the change: %d (target 0): %s\n", len(wrong), metOrNot(len(wrong) == 0))
	switch {
	case judged:
		fmt.Fprintf(&b, "heap and goroutines from minute 5 to the end within 5%%: %s (%s)\n", metOrNot(heapTrend <= soakGrowthLimit && goTrend <= soakGrowthLimit), growthNote)
	default:
		fmt.Fprintf(&b, "heap and goroutines from minute 5 to the end within 5%%: not measured (%s)\n", growthNote)
	}
	fmt.Fprintf(&b, "panics: %d (target 0): %s\n", len(panics), metOrNot(len(panics) == 0))
	fmt.Fprintf(&b, "controllers' library requests a minute at most 1/10 of controller-runtime's defaults: %.3f: %s\n", ratio, metOrNot(ratio <= 0.1))
	fmt.Fprintf(&b, "the skew check Inconsistent while two versions run, Consistent within 1m of the upgrade: %s\n", metOrNot(consistencyMet))
	servedResult.targets(&b, served)
	cliTargets(&b, cliWrong)
	fmt.Fprintf(&b, "machine load average at the end: %s\n", loadAverage())

	report := b.String()
	if err := os.WriteFile(filepath.Join(reportDir, "report.txt"), []byte(report), 0o644); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(filepath.Join(reportDir, "memory.svg"), []byte(memorySVG(mem)), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("soak report (also in %s/report.txt, memory.svg):\n%s", reportDir, report)

	// The targets the test holds.
	failAfter := soakFailAfter(t)
	var failing int
	for _, dg := range wrong {
		limit := failAfter
		if strings.HasPrefix(dg.client, throttledUser+"@") {
			// A throttled handle's compares wait in its own calls (a
			// lookup waits out a Retry-After within the call), so how
			// long it disagreed is the checker's wait as much as the
			// handle's: it fails only stuck (throttledFailAfter).
			limit = max(failAfter, throttledFailAfter)
		}
		if dg.late(end) > limit {
			failing++
		}
	}
	if failing > 0 {
		t.Errorf("%d answers wrong for more than %s after the server served the change (target: none over 1 s; %d over 1 s); the report lists them with '!'", failing, failAfter, len(wrong))
	}
	servedResult.fail(t, served, end, failAfter)
	cliFail(t, clis, cliWrong, failAfter)
	if judged && from != nil {
		if heapTrend > soakGrowthLimit {
			t.Errorf("heap grew %.1f%% from +%s to the end on the fitted line (target at most %.0f%%)", 100*heapTrend, fmtOffset(from.at), 100*soakGrowthLimit)
		}
		if goTrend > soakGrowthLimit {
			t.Errorf("goroutines grew %.1f%% from +%s to the end on the fitted line (target at most %.0f%%)", 100*goTrend, fmtOffset(from.at), 100*soakGrowthLimit)
		}
	}
	if len(panics) > 0 {
		t.Errorf("%d panics (target 0)", len(panics))
	}
	if viaShared.ok.Load() == 0 || viaDefaults.ok.Load() == 0 || chk.checks == 0 {
		t.Errorf("the load did not run: %d and %d reconciles, %d compares", viaShared.ok.Load(), viaDefaults.ok.Load(), checks)
	}
}

func metOrNot(met bool) string {
	if met {
		return "met"
	}
	return "NOT MET"
}

// short cuts a long answer for the report.
func short(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
