package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
	"github.com/kubeatlas/kubeatlas/internal/optset"
)

// Discovery changes come from three sources only: CustomResourceDefinitions,
// APIServices (and their availability), and API server upgrades. Run
// watches the first two with client-go's informers and catches the third
// with a slow conditional poll.
//
// CRDs are watched as metadata only (PartialObjectMetadata, protobuf from a
// real server): a CRD's full object carries its schemas, tens of kilobytes
// each, and discovery depends only on what its metadata shows: creation,
// deletion, and spec changes (metadata.generation). Status-only updates and
// label edits keep the generation and cost no discovery request. APIServices
// are watched whole (JSON), because their availability, which turns a
// group-version Stale, is in their status; each is slimmed as it arrives to
// what decides discovery (slimAPIService): a server may make one large (its
// caBundle, or fields it adds), and what is kept holds none of that.

// Defaults of the options.
const (
	DefaultUpgradePoll  = time.Minute
	DefaultFallbackPoll = 5 * time.Second
	DefaultSettle       = 10 * time.Second
	DefaultDebounce     = 50 * time.Millisecond
)

// Limits that hold whatever the server does.
const (
	// Lists and watches back off after a failure (an error, a 410 Gone, a
	// watch that ends within healthyWatch), from minRetry, doubling, to
	// maxRetry, each wait drawn between half and all of its value; a watch
	// that stays open healthyWatch resets it. client-go's informers alone
	// relisted at once after a 410 on every request, about 10,000
	// requests a second.
	minRetry     = 250 * time.Millisecond
	maxRetry     = 30 * time.Second
	healthyWatch = 10 * time.Second
	// Refreshes that events ask for: refreshBurst at once, then one per
	// refreshEvery, so that a flood of MODIFIED events (about 23
	// refreshes a second, one per debounce) costs one a second, while a
	// single change still gets its debounce and settle rounds at once.
	// The rounds for an overdue CRD or a union (below) pace themselves and
	// are not counted.
	refreshEvery = time.Second
	refreshBurst = 5
	// maxPending bounds the expectations kept: one per CRD name, and one
	// for every change of unknown effect; past it, the oldest CRD ones
	// become a change of unknown effect. It bounds the overdue ones too,
	// past it the oldest forgotten.
	maxPending = 256
	// A CRD created or deleted that discovery does not show within the
	// settle time is overdue: the server is behind its own objects (issue
	// 47's soak saw a kube-apiserver, loaded and mid-upgrade, serve a new
	// CRD 44 s after its watch event, while the other server of the pair
	// served it at once). Run does not follow the client while one is,
	// and revalidates every lateMin for lateFast, so that subscribers
	// (the served API, openapi3's marks) get the change within a second
	// of the server serving it, then doubling to lateMax, until discovery
	// shows it, for overdueFor at most: a CRD that is never served (its
	// names refused) costs about 85 rounds (two 304s each), and is then
	// trusted to be what the server means.
	lateMin    = time.Second
	lateFast   = time.Minute
	lateMax    = 10 * time.Second
	overdueFor = 5 * time.Minute
	// A client behind a balancer over servers that disagree serves the
	// union of their views (discovery.Snapshot.Mixed), and a view leaves
	// it only at a refresh a second after the last read that showed it
	// (discovery's mixed.go). A change reaches the servers a moment apart,
	// so the round that sees it may leave a union that holds the view
	// before it; nothing else refreshes a followed client, so a removed
	// resource stayed until the next event (issue 47's served API). So a
	// round that leaves a union other than the last round's is followed
	// by another unionRecheck later (a second and a margin), until a
	// round leaves the union unchanged, or none, or maxUnionRounds in a
	// row: servers that go on disagreeing cost one or two rounds an event.
	unionRecheck   = 1100 * time.Millisecond
	maxUnionRounds = 5
)

var (
	crdResource        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

type watchOptions struct {
	upgradePoll, fallbackPoll, settle, debounce time.Duration
	direct                                      bool
	refreshEvery                                time.Duration
	refreshBurst                                int
	logger                                      *slog.Logger
	onForbidden                                 func()
	onChange                                    func()

	given optset.Given // the options given, by name (named)
}

// Option configures a Watcher (New, Run).
type Option func(*watchOptions) error

// named is the option name, which may be given once (optset).
func named(name string, set func(*watchOptions) error) Option {
	return optset.Named("discovery/watch", name, func(o *watchOptions) *optset.Given { return &o.given }, set)
}

// setPositive sets *into to d, which must be positive.
func setPositive(name string, d time.Duration, into *time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("discovery/watch: %s must be positive, got %v", name, d)
	}
	*into = d
	return nil
}

// WithUpgradePoll sets how often Run revalidates discovery when no event
// asked it to, which is how an API server upgrade (a change no watched
// object shows) is caught: two 304s a round. Default: DefaultUpgradePoll
// (1m).
func WithUpgradePoll(d time.Duration) Option {
	return named("WithUpgradePoll", func(o *watchOptions) error { return setPositive("upgrade poll", d, &o.upgradePoll) })
}

// WithFallbackPoll sets the interval of the Poll that Run runs instead
// when the credentials may not list and watch CRDs and APIServices.
// Default: DefaultFallbackPoll (5s).
func WithFallbackPoll(d time.Duration) Option {
	return named("WithFallbackPoll", func(o *watchOptions) error { return setPositive("fallback poll", d, &o.fallbackPoll) })
}

// WithSettle bounds how long Run keeps revalidating after an event until
// discovery shows it (a real API server serves a new CRD a moment after
// its watch event). A CRD created or deleted that discovery does not show
// by then is overdue: Run stops following the client until it does (see
// Run). Default: DefaultSettle (10s).
func WithSettle(d time.Duration) Option {
	return named("WithSettle", func(o *watchOptions) error { return setPositive("settle", d, &o.settle) })
}

// WithDebounce sets how long Run waits after an event for more before it
// revalidates, so that a burst of CRD edits costs one refresh. Default:
// DefaultDebounce (50ms).
func WithDebounce(d time.Duration) Option {
	return named("WithDebounce", func(o *watchOptions) error { return setPositive("debounce", d, &o.debounce) })
}

// WithRefreshLimit sets how many refreshes events may ask for at once
// (burst), and then how often (one per every). Default: 5, then one a
// second: a flood of events costs about one refresh (two conditional
// requests) a second, and a steady stream of changes, each needing a
// refresh or two before discovery shows it, reaches subscribers about a
// second apart. A client that serves many others (kubeatlas-apiserver)
// may spend more to keep a stream of changes faster.
func WithRefreshLimit(every time.Duration, burst int) Option {
	return named("WithRefreshLimit", func(o *watchOptions) error {
		if burst < 1 {
			return fmt.Errorf("discovery/watch: refresh burst must be at least 1, got %d", burst)
		}
		o.refreshBurst = burst
		return setPositive("refresh interval", every, &o.refreshEvery)
	})
}

// WithLogger sets where Run logs: when it cannot watch and polls instead,
// and when it moves between the served API and CRDs and APIServices. A
// logr.Logger goes through logr's bridge, as for discovery.WithLogger.
// Default: nowhere.
func WithLogger(l *slog.Logger) Option {
	return named("WithLogger", func(o *watchOptions) error {
		if l == nil {
			return errors.New("discovery/watch: nil logger")
		}
		o.logger = l
		return nil
	})
}

// WithOnForbidden calls fn each time Run finds that its credentials may
// not list or watch CRDs and APIServices (a 403), before it polls
// instead, so that a program holding other credentials for the server
// (package shared) can watch with those. fn is called on Run's goroutine
// and must return promptly; it may end Run's context. Default: none.
func WithOnForbidden(fn func()) Option {
	return named("WithOnForbidden", func(o *watchOptions) error {
		if fn == nil {
			return errors.New("discovery/watch: nil forbidden func")
		}
		o.onForbidden = fn
		return nil
	})
}

// WithOnChange calls fn when events tell of a change that may change the
// server's APIs (the events that make Run revalidate discovery: a CRD
// created, deleted or with a new spec generation, an APIService changed,
// any change of the served API), once for each refresh they ask for, as
// it begins: after the debounce and the refresh limit, so a flood of
// events calls it about once a second. It is how what lies beside
// discovery follows the same events: openapi3.Client.Changed, which
// package shared passes, makes the OpenAPI client read its root again, so
// that a CRD's new schema (which discovery does not show) is fetched. fn
// is called on Run's goroutine, never while it holds a lock, and must
// return promptly. Default: none.
func WithOnChange(fn func()) Option {
	return named("WithOnChange", func(o *watchOptions) error {
		if fn == nil {
			return errors.New("discovery/watch: nil change func")
		}
		o.onChange = fn
		return nil
	})
}

// WithServedAPI says whether Run watches kubeatlas's discovery API
// (discovery.kubeatlas.io apigroups) where the cluster serves it; with
// false, it watches CRDs and APIServices, as it does where the cluster
// does not serve it. Default: true.
func WithServedAPI(use bool) Option {
	return named("WithServedAPI", func(o *watchOptions) error { o.direct = !use; return nil })
}

// Run keeps c's snapshot current until ctx ends, in near real time and at
// almost no cost on an idle cluster; c's subscribers (Client.Subscribe)
// hear of every change. It is New(c, opts...) and Watcher.Run, for a
// program that does not read the Watcher's Stats. Run it in a goroutine of
// its own; it returns nil when ctx ends, or an error for a bad option. It
// returns within a moment of ctx ending whatever the server does (down,
// hanging, throttling, in the middle of a list or watch), every goroutine
// it started ended, so that a program's shutdown does not wait for it.
//
// Where the cluster serves kubeatlas's discovery API (its first snapshot
// lists discovery.kubeatlas.io/v1alpha1 apigroups, Current, with list and
// watch), Run watches that instead: one watch, readable by every
// authenticated user where the API is deployed as its manifests say, whose
// server changes an object when its group's discovery changes; each event
// revalidates discovery at once and once more a moment later. When it is
// forbidden (for the rest of the run), or 4 lists or watches of it fail
// in a row (its server gone: about 9 s), or while discovery lists it
// Stale (an APIService just registered, or its server down), Run does what
// follows instead, and returns to the served API within a second of
// discovery listing it current again: a second after a failure at the
// earliest, doubling with each failure that follows a short watch, up to
// 30 s (WithServedAPI(false): never).
//
// Otherwise it watches CustomResourceDefinitions (metadata only) and APIServices and
// revalidates discovery (two conditional requests) when an event can change
// it: a CRD created, deleted or with a new spec generation, an APIService
// created, deleted, re-pointed or changing availability. Events within the
// debounce share one refresh. After a creation or deletion it revalidates,
// backing off from 100ms to 1s, until discovery shows the change or the
// settle time passes, so subscribers get the Change that contains the new
// resource rather than an empty one. When the settle time passes first,
// the server is behind its own objects, and Run does not follow c (below)
// until discovery shows the change, the CRD is created or deleted again
// (its own settle time then), or 5 minutes pass, revalidating every
// second for a minute, then backing off to 10 s, meanwhile: readers that
// trust a follower ask the server themselves (restmapper's repeated
// misses). Behind a balancer over servers that disagree, whose union of
// views the client serves (discovery.Snapshot.Mixed), a round that leaves
// a new union is followed by another 1.1 s later, until the union stays
// the same (at most 5 in a row), so that a view no server serves any more
// leaves it without waiting for the next event. A dropped watch resumes
// from its last resourceVersion; a 410 Gone relists, and what changed
// meanwhile is handled like events. Between events it revalidates once
// per upgrade poll.
//
// Whatever the server does, Run's cost stays bounded: lists and watches
// that fail (an error, a 410 Gone, a watch that ends at once) are retried
// after an exponential backoff with jitter, from 250ms to 30s, reset by a
// watch that stays open 10s; refreshes asked for by events are at most 5
// at once, then one a second, however many events come; it keeps at
// most one expectation per CRD, 256 in all; and each informer holds at
// most 10,000 objects, and 32 MiB of them (each slimmed, as it arrives, to
// what decides discovery, and its size estimated: a CRD's name,
// generation and deletion; an APIService's group, version, service,
// priorities and availability, not its caBundle; the served API's names):
// a list over either is refused, a watch that would hold more ends, both
// backed off, so a server that streams distinct objects, or makes them
// large, cannot grow its memory.
//
// Where the credentials may not list or watch CRDs or APIServices (403), it
// logs so (WithLogger), reports it in Stats.Forbidden (and to
// WithOnForbidden's func), and polls every fallback interval instead (see
// Client.Poll).
//
// While what it watches would show it a change (every informer synced,
// each with a watch open past the initial list it streams, and its last
// refresh succeeded, the first after the lists included) and no CRD's
// change is overdue, Run follows c
// (discovery.Client.Follow), so that readers which would otherwise
// revalidate c on a timer (restmapper's lookups without a version) do
// not; it stops following the moment one of these ends (a watch dropped,
// listing again, backing off, a refresh failed, polling instead, a CRD's
// settle time passed with its change not served), and before it returns.
func Run(ctx context.Context, c *discovery.Client, opts ...Option) error {
	w, err := New(c, opts...)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// Watcher keeps a discovery.Client current (see Run) and counts what it
// does (Stats).
type Watcher struct {
	c     *discovery.Client
	o     watchOptions
	stats counters
}

type counters struct {
	requests, events, triggers atomic.Int64
	forbidden                  atomic.Bool
	watching                   atomic.Int32 // runs watching, their informers synced
}

// Stats counts what a Watcher did since New.
type Stats struct {
	// Requests counts the lists and watches sent (they are not in the
	// client's Stats.Requests, which counts its discovery requests).
	Requests int64
	Events   int64 // events that the lists and watches brought
	// Triggers counts the events that could change discovery, each of
	// which asked for a refresh (events within the debounce share one).
	Triggers int64
	// Forbidden: listing or watching CRDs and APIServices was refused
	// (403), and Run polls instead, until it watches again.
	Forbidden bool
	// Watching: a Run watches (it does not poll), its informers synced.
	Watching bool
}

// New returns a Watcher of c, or an error for a bad option. It starts
// nothing: Run does.
func New(c *discovery.Client, opts ...Option) (*Watcher, error) {
	o := watchOptions{upgradePoll: DefaultUpgradePoll, fallbackPoll: DefaultFallbackPoll, settle: DefaultSettle, debounce: DefaultDebounce,
		refreshEvery: refreshEvery, refreshBurst: refreshBurst, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Watcher{c: c, o: o}, nil
}

// Stats returns the Watcher's counters.
func (w *Watcher) Stats() Stats {
	return Stats{
		Requests:  w.stats.requests.Load(),
		Events:    w.stats.events.Load(),
		Triggers:  w.stats.triggers.Load(),
		Forbidden: w.stats.forbidden.Load(),
		Watching:  w.stats.watching.Load() > 0,
	}
}

// Run keeps the client current until ctx ends, as the function Run
// describes; it returns nil then.
func (wr *Watcher) Run(ctx context.Context) error {
	c, o := wr.c, wr.o
	_, _ = c.Snapshot(ctx) // a baseline; failures are retried by the rounds below
	if ctx.Err() != nil {
		return nil
	}
	w := &watcher{Watcher: wr, wake: make(chan struct{}, 1),
		refreshes: rate.NewLimiter(rate.Every(o.refreshEvery), o.refreshBurst)}
	for ctx.Err() == nil {
		// Watch the served API while it can be; then what changes
		// discovery directly, or poll, until the served API can be watched
		// again.
		if w.mayUseServed() {
			w.useServed(ctx)
		}
		dctx, cancel := context.WithCancel(ctx)
		checked := w.untilServed(dctx, cancel)
		if err := w.run(dctx); err != nil && dctx.Err() == nil {
			if errors.Is(err, errForbidden) {
				w.stats.forbidden.Store(true)
				if o.onForbidden != nil {
					o.onForbidden()
				}
			}
			w.o.logger.Warn("discovery: cannot watch CustomResourceDefinitions and APIServices; polling instead", "err", err, "interval", o.fallbackPoll)
			c.Poll(dctx, o.fallbackPoll)
		}
		cancel()
		<-checked
	}
	return nil
}

// connection is the client's HTTP client for watches, with a config for
// client-go's dynamic and metadata clients over it: no overall timeout (a
// watch lasts minutes), and its requests counted in Stats.Requests instead
// of the client's.
func (w *watcher) connection() (*http.Client, *rest.Config) {
	hc, cfg := w.c.Connection()
	h := *hc
	h.Timeout = 0
	next := h.Transport
	if u, ok := next.(utilnet.RoundTripperWrapper); ok {
		next = u.WrappedRoundTripper() // the client's counter (see Client.Connection)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	h.Transport = httpx.Counting{Next: next, N: &w.stats.requests}
	return &h, cfg
}

// After the served API failed, Run tries it again once discovery lists it
// current again, but not before servedRetryMin, doubling with each failure
// that follows a short watch (under healthyServed) up to servedRetryMax;
// servedRecheck is how often it looks (in memory: the snapshot Run keeps
// current by other means).
const (
	servedRetryMin = time.Second
	servedRetryMax = 30 * time.Second
	healthyServed  = time.Minute
	servedRecheck  = time.Second
)

// mayUseServed says whether the served API is to be watched now: it is
// served, current and watchable, not refused (a 403 is for good), and its
// last failure's retry time has come.
func (w *watcher) mayUseServed() bool {
	return !w.o.direct && !w.servedForbidden && !time.Now().Before(w.servedRetryAt) && servesAPIGroups(w.c.Current())
}

// useServed watches the served API until ctx ends or it fails; a failure
// is logged and remembered.
func (w *watcher) useServed(ctx context.Context) {
	hc, cfg := w.connection()
	dc, err := dynamic.NewForConfigAndClient(cfg, hc)
	start := time.Now()
	if err == nil {
		err = w.watchServed(ctx, dc)
	}
	if ctx.Err() != nil {
		return
	}
	w.servedForbidden = errors.Is(err, errForbidden)
	if time.Since(start) >= healthyServed {
		w.servedFailures = 0
	}
	w.servedRetryAt = time.Now().Add(min(servedRetryMin<<min(w.servedFailures, 5), servedRetryMax))
	w.servedFailures++
	w.o.logger.Info("discovery: cannot watch the served discovery API; watching CustomResourceDefinitions and APIServices instead", "err", err, "forbidden", w.servedForbidden)
}

// untilServed calls cancel, from a goroutine of its own, once the served
// API may be watched (again): listed current after an outage, or after
// Run started while it was Stale (its APIService just registered). The
// goroutine ends with ctx; the returned channel is closed when it has.
func (w *watcher) untilServed(ctx context.Context, cancel func()) (done <-chan struct{}) {
	ended := make(chan struct{})
	if w.o.direct || w.servedForbidden {
		close(ended)
		return ended
	}
	go func() {
		defer close(ended)
		t := time.NewTicker(servedRecheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if w.mayUseServed() {
					w.o.logger.Info("discovery: the served discovery API is served again; watching it")
					cancel()
					return
				}
			}
		}
	}()
	return ended
}

// expectation is what an event leads Run to expect of discovery.
type expectation struct {
	// group and plural name a CRD's resource; present says whether it is
	// to appear or to go. Without a plural, any new content will do.
	group, plural string
	present       bool
	since         uint64 // generation current when the event came
	seq           uint64 // order of arrival: only rounds begun after it judge it
	deadline      time.Time
	// rounds, when not 0, is how many refreshes are left to see a change
	// of unknown effect (which may well be none).
	rounds int
}

type watcher struct {
	*Watcher // the client, the options, the counters

	mu      sync.Mutex
	pending []expectation
	// overdue are the CRDs' expectations whose settle time passed before
	// discovery met them, oldest first, each with the deadline of its
	// overdueFor: Run does not follow the client while any is left.
	overdue []expectation
	seq     uint64 // of the last expectation
	changes uint64 // events that asked for a refresh (expect), not the catch-up after the lists

	wake chan struct{} // an event came

	// Written by Run's goroutine while no untilServed goroutine (which
	// reads them) runs.
	servedForbidden bool      // the served API answered 403: not tried again
	servedRetryAt   time.Time // the served API failed: not tried again before
	servedFailures  int       // in a row, each after a short watch
	// refreshes paces the rounds events ask for.
	refreshes *rate.Limiter
}

// errShortWatch: a watch ended within healthyWatch of its start.
var errShortWatch = errors.New("the watch ended at once")

// errForbidden: the credentials may not list or watch what Run watches.
var errForbidden = errors.New("list or watch forbidden (403)")

// run watches until ctx ends (nil) or it cannot (errForbidden, or why the
// watch clients could not be built). Every goroutine it starts has ended
// when it returns. Where the cluster serves kubeatlas's discovery API it
// watches that (one watch, which credentials that may not list CRDs may
// have), and what changes discovery directly when it cannot.
func (w *watcher) run(ctx context.Context) error {
	hc, cfg := w.connection()
	dc, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return err
	}
	mc, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return err
	}
	f := newFollower(w.c)
	crds := informerFor(mc.Resource(crdResource), mc, &metav1.PartialObjectMetadata{}, crdResource, slimCRD, newPacer(), f.stream())
	apiServices := informerFor(dc.Resource(apiServiceResource), dc, &unstructured.Unstructured{}, apiServiceResource, slimAPIService, newPacer(), f.stream())
	_, _ = crds.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { w.crdEvent(nil, obj, initial) },
		UpdateFunc: func(old, obj any) { w.crdEvent(old, obj, false) },
		DeleteFunc: func(obj any) { w.crdGone(obj) },
	})
	_, _ = apiServices.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { w.apiServiceEvent(nil, obj, initial) },
		UpdateFunc: func(old, obj any) { w.apiServiceEvent(old, obj, false) },
		DeleteFunc: func(obj any) { w.apiServiceEvent(nil, obj, false) },
	})
	return w.runInformers(ctx, f, nil, crds, apiServices)
}

// servedAPIGroups is kubeatlas's served discovery API (apiserver/ in this
// repository): one object per API group, changed whenever the group's
// discovery does, so one watch of it tells of every change discovery shows.
var servedAPIGroups = schema.GroupVersionResource{Group: "discovery.kubeatlas.io", Version: "v1alpha1", Resource: "apigroups"}

// servedGiveUp is how many lists or watches of the served API in a row
// may fail before Run watches CRDs and APIServices instead (until
// discovery lists the served API current again): with the reflector's
// backoff and the pacer's, about 9 s (TestServedAPIGivenUpAfterFailures),
// so a server that is gone is not waited for long, and a 403 is not waited
// for at all.
const servedGiveUp = 4

// servesAPIGroups says whether s serves servedAPIGroups, currently, with
// list and watch.
func servesAPIGroups(s *discovery.Snapshot) bool {
	if s == nil {
		return false
	}
	g, ok := s.Group(servedAPIGroups.Group)
	if !ok {
		return false
	}
	for _, v := range g.Versions {
		if v.Version != servedAPIGroups.Version || v.Freshness != surface.FreshnessCurrent {
			continue
		}
		for _, r := range v.Resources {
			if r.Name == servedAPIGroups.Resource && slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch") {
				return true
			}
		}
	}
	return false
}

// watchServed watches the served API until ctx ends (nil) or its lists
// and watches fail servedGiveUp times in a row (an error). Its server
// changes an object only once its own discovery shows the change, so an
// event asks for a refresh of unknown effect: at once, and once more.
func (w *watcher) watchServed(ctx context.Context, dc dynamic.Interface) error {
	p := newPacer()
	unavailable := make(chan error, 1)
	p.failed = func(n int, err error) {
		if n >= servedGiveUp {
			select {
			case unavailable <- fmt.Errorf("%d lists or watches of %s failed in a row, the last: %w", n, servedAPIGroups, err):
			default:
			}
		}
	}
	f := newFollower(w.c)
	groups := informerFor(dc.Resource(servedAPIGroups), dc, &unstructured.Unstructured{}, servedAPIGroups, slimServed, p, f.stream())
	event := func(initial bool) {
		w.stats.events.Add(1)
		if !initial {
			w.expect(expectation{})
		}
	}
	_, _ = groups.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(_ any, initial bool) { event(initial) },
		UpdateFunc: func(_, _ any) { event(false) },
		DeleteFunc: func(any) { event(false) },
	})
	return w.runInformers(ctx, f, unavailable, groups)
}

// runInformers runs infs and the refresh loop until ctx ends (nil), a
// list or watch is forbidden (errForbidden), or unavailable says why
// their source cannot be used; f (whose streams are infs') follows the
// client while they would see a change. Every goroutine it starts has
// ended, and f stopped following for good, when it returns.
func (w *watcher) runInformers(ctx context.Context, f *follower, unavailable <-chan error, infs ...cache.SharedIndexInformer) error {
	forbidden := make(chan struct{})
	var forbiddenOnce sync.Once
	for _, inf := range infs {
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) {
				forbiddenOnce.Do(func() { close(forbidden) })
				return
			}
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
	ictx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var synced atomic.Bool
	defer func() {
		f.end()
		stop()
		wg.Wait() // after it, nothing sets synced any more
		if synced.Load() {
			w.stats.watching.Add(-1)
		}
	}()
	for _, inf := range infs {
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ictx) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Counted as watching once every list is in; what was created
		// between the first snapshot and the lists is caught by one round.
		hasSynced := make([]cache.InformerSynced, len(infs))
		for i, inf := range infs {
			hasSynced[i] = inf.HasSynced
		}
		if cache.WaitForCacheSync(ictx.Done(), hasSynced...) {
			synced.Store(true)
			f.sync()
			w.stats.watching.Add(1)
			w.stats.forbidden.Store(false)
			w.catchUp()
		}
	}()
	return w.loop(ctx, f, forbidden, unavailable)
}

// loop revalidates discovery when events ask for it, until ctx ends (nil),
// watching is forbidden (errForbidden) or unavailable tells why the
// source cannot be watched; its refreshes go through f (follower.refresh).
func (w *watcher) loop(ctx context.Context, f *follower, forbidden <-chan struct{}, unavailable <-chan error) error {
	idle := time.NewTimer(w.o.upgradePoll)
	defer idle.Stop()
	var round <-chan time.Time // the next round, if one is due
	var roundTimer *time.Timer
	var roundAt time.Time
	schedule := func(d time.Duration) {
		if roundTimer != nil {
			roundTimer.Stop()
		}
		roundTimer, roundAt = time.NewTimer(d), time.Now().Add(d)
		round = roundTimer.C
	}
	defer func() {
		if roundTimer != nil {
			roundTimer.Stop()
		}
	}()
	backoff := 100 * time.Millisecond
	var union unionCheck      // the union the rounds left
	late := lateMin           // the wait of the next round for an overdue CRD
	var behindSince time.Time // when a CRD's change became overdue, if one is
	throttled := false        // the next round waits for the rate limit
	var told uint64           // the changes told to WithOnChange's func
	if w.behind() {
		f.setBehind(true) // overdue in an earlier run of the informers
		behindSince = time.Now()
		schedule(late)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-forbidden:
			return errForbidden
		case err := <-unavailable:
			return err
		case <-w.wake:
			// A new event is not kept waiting behind a backed-off round,
			// only behind the rate limit.
			if round == nil || !throttled && time.Until(roundAt) > w.o.debounce {
				schedule(w.o.debounce)
				backoff = 100 * time.Millisecond
			}
			union.rounds = 0
		case <-idle.C:
			if s := w.c.Current(); s == nil || time.Since(s.Validated()) >= w.o.upgradePoll/2 {
				f.refresh(ctx)
			}
			idle.Reset(w.o.upgradePoll)
		case <-round:
			round = nil
			// The rate limit is for the rounds events ask for; those for
			// an overdue CRD or a union pace themselves (a second or more
			// apart), and do not take the burst a new event's rounds need.
			if w.awaiting() {
				if r := w.refreshes.Reserve(); r.Delay() > 0 {
					r.Cancel()
					schedule(r.Delay())
					throttled = true
					continue
				}
			}
			throttled = false
			// Expectations that arrive during the refresh are judged by
			// the next round: this one may have begun before their change.
			w.mu.Lock()
			upTo, changes := w.seq, w.changes
			w.mu.Unlock()
			if changes != told && w.o.onChange != nil {
				w.o.onChange()
			}
			told = changes
			f.refresh(ctx)
			idle.Reset(w.o.upgradePoll)
			left, behind, newlyBehind := w.settle(upTo)
			f.setBehind(behind)
			if !behind {
				late, behindSince = lateMin, time.Time{}
			} else if newlyBehind {
				// Each CRD that becomes overdue gets its fast minute.
				late, behindSince = lateMin, time.Now()
			}
			switch {
			case left:
				schedule(backoff)
				backoff = min(2*backoff, time.Second)
			case union.again(w.c.Current()):
				schedule(unionRecheck)
			case behind:
				schedule(late)
				if time.Since(behindSince) >= lateFast {
					late = min(2*late, lateMax)
				}
			}
		}
	}
}

// unionCheck is what the loop's rounds left of a union of views
// (unionRecheck).
type unionCheck struct {
	gen    uint64 // the generation of the union the last round left
	rounds int    // union rounds since the loop last woke (an event)
}

// again says whether s, which a round left, needs another round: a union
// that is not the one the last round left, within maxUnionRounds.
func (u *unionCheck) again(s *discovery.Snapshot) bool {
	if s == nil || !s.Mixed() {
		u.gen = 0
		return false
	}
	if s.Generation() == u.gen || u.rounds >= maxUnionRounds {
		return false
	}
	u.gen = s.Generation()
	u.rounds++
	return true
}

// settle drops the expectations up to seq upTo that the current snapshot
// meets or that ran out of time, a CRD's that ran out becoming overdue,
// drops the overdue ones met or past their overdueFor, and says whether
// any expectations are left (more), any overdue (behind), and whether
// one became overdue (newly).
func (w *watcher) settle(upTo uint64) (more, behind, newly bool) {
	s := w.c.Current()
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.overdue = slices.DeleteFunc(w.overdue, func(e expectation) bool { return e.metBy(s) || !now.Before(e.deadline) })
	left := w.pending[:0]
	for _, e := range w.pending {
		if e.seq > upTo {
			left = append(left, e)
			continue
		}
		if e.metBy(s) {
			continue
		}
		if !now.Before(e.deadline) {
			if e.plural != "" {
				newly = true
				e.deadline = now.Add(overdueFor)
				w.overdue = append(dropCRD(w.overdue, e), e)
				if over := len(w.overdue) - maxPending; over > 0 {
					w.overdue = slices.Delete(w.overdue, 0, over)
				}
			}
			continue
		}
		if e.rounds > 0 {
			if e.rounds--; e.rounds == 0 {
				continue
			}
		}
		left = append(left, e)
	}
	clear(w.pending[len(left):])
	w.pending = left
	return len(left) > 0, len(w.overdue) > 0, newly
}

// awaiting says whether expectations are left to settle.
func (w *watcher) awaiting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending) > 0
}

// behind says whether a CRD's change is overdue (settle).
func (w *watcher) behind() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.overdue) > 0
}

// dropCRD drops from es the expectation of e's CRD, if any.
func dropCRD(es []expectation, e expectation) []expectation {
	return slices.DeleteFunc(es, func(p expectation) bool { return p.plural == e.plural && p.group == e.group })
}

func (e expectation) metBy(s *discovery.Snapshot) bool {
	if s == nil {
		return false
	}
	if e.plural == "" {
		return s.Generation() != e.since
	}
	found := false
	if g, ok := s.Group(e.group); ok {
		for _, v := range g.Versions {
			if found = slices.ContainsFunc(v.Resources, func(r surface.Resource) bool { return r.Name == e.plural }); found {
				break
			}
		}
	}
	return found == e.present
}

// catchUp asks for one refresh once the informers have synced, for what
// changed before their lists (no event tells of it).
func (w *watcher) catchUp() { w.record(expectation{rounds: 1}, false) }

// expect records what an event leads to expect and wakes the loop.
func (w *watcher) expect(e expectation) { w.record(e, true) }

// record records e, of an event (change) or not, and wakes the loop.
func (w *watcher) record(e expectation, change bool) {
	w.stats.triggers.Add(1)
	if s := w.c.Current(); s != nil {
		e.since = s.Generation()
	}
	e.deadline = time.Now().Add(w.o.settle)
	if e.plural == "" && e.rounds == 0 {
		// A change of unknown effect: revalidated at once, and once more a
		// moment later if nothing new was served.
		e.rounds = 2
	}
	w.mu.Lock()
	w.seq++
	if change {
		w.changes++
	}
	e.seq = w.seq
	w.pending = coalesce(w.pending, e)
	if e.plural != "" {
		w.overdue = dropCRD(w.overdue, e) // the new expectation has its own settle time
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// coalesce adds e to pending, replacing what it supersedes, so that
// pending holds at most one expectation per CRD and one of unknown effect
// (a newer one asks for no less than an older one: a change after a later
// generation, the latest state of its CRD, a later deadline, as many
// rounds as the one it replaces had), and no more than maxPending in all:
// past it, the oldest CRD expectations give way to one of unknown effect,
// which any change meets.
func coalesce(pending []expectation, e expectation) []expectation {
	pending = slices.DeleteFunc(pending, func(p expectation) bool {
		if p.group != e.group || p.plural != e.plural {
			return false
		}
		if p.rounds > e.rounds && e.rounds > 0 {
			e.rounds = p.rounds // a CRD's new generation followed by its APIService's event
		}
		return true
	})
	pending = append(pending, e)
	if len(pending) <= maxPending {
		return pending
	}
	pending = slices.DeleteFunc(pending, func(p expectation) bool { return p.plural == "" })
	over := len(pending) - (maxPending - 1)
	unknown := expectation{since: pending[over-1].since, seq: e.seq, deadline: e.deadline, rounds: 2}
	for _, p := range pending[:over] {
		unknown.since = min(unknown.since, p.since)
	}
	return append(pending[over:], unknown)
}

// crdName splits a CRD's name, "<plural>.<group>".
func crdName(name string) (group, plural string) {
	plural, group, _ = strings.Cut(name, ".")
	return group, plural
}

func (w *watcher) crdEvent(old, obj any, initial bool) {
	w.stats.events.Add(1)
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || initial {
		return // the initial list is what the first snapshot shows
	}
	group, plural := crdName(m.Name)
	if old == nil {
		w.expect(expectation{group: group, plural: plural, present: m.DeletionTimestamp == nil})
		return
	}
	o, ok := old.(*metav1.PartialObjectMetadata)
	if ok && o.Generation == m.Generation && (o.DeletionTimestamp == nil) == (m.DeletionTimestamp == nil) {
		return // status or labels only: discovery cannot have changed
	}
	// A new generation: a version added, removed or no longer served, or
	// only a new schema; the metadata does not tell which. The server
	// serves such a change a moment after the event, as it does a new
	// CRD, so Run looks for it over the backoff's rounds (50 ms, then 100
	// ms doubling to a second: about 2.5 s), not the two of another
	// change of unknown effect; a schema-only change costs those rounds.
	w.expect(expectation{rounds: crdGenerationRounds})
}

// crdGenerationRounds is how many refreshes a CRD's new generation gets to
// show in discovery (crdEvent).
const crdGenerationRounds = 6

func (w *watcher) crdGone(obj any) {
	w.stats.events.Add(1)
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		group, plural := crdName(m.Name)
		w.expect(expectation{group: group, plural: plural, present: false})
	}
}

func (w *watcher) apiServiceEvent(old, obj any, initial bool) {
	w.stats.events.Add(1)
	if initial {
		return
	}
	if o, ok := old.(*unstructured.Unstructured); ok {
		if n, ok := obj.(*unstructured.Unstructured); ok &&
			reflect.DeepEqual(o.Object["spec"], n.Object["spec"]) && available(o) == available(n) {
			return // neither the spec nor availability changed (labels, messages, ...)
		}
	}
	w.expect(expectation{})
}

// informerFor is what client-go's metadatainformer and dynamicinformer
// build (a shared informer over list and watch, with watch-list semantics
// where the client supports them), without their packages: those import
// client-go's informer factory for its interface, and with it every typed
// clientset and API type, which would triple what a program importing
// discovery links.
func informerFor[T runtime.Object](r interface {
	List(context.Context, metav1.ListOptions) (T, error)
	Watch(context.Context, metav1.ListOptions) (apiwatch.Interface, error)
}, client any, example runtime.Object, gvr schema.GroupVersionResource, slim func(runtime.Object) runtime.Object, p *pacer, s *stream) cache.SharedIndexInformer {
	bound := newObjectBound(slim) // the informer's memory (see maxObjects, maxBytes)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if err := p.wait(ctx); err != nil {
				return nil, err
			}
			obj, err := r.List(ctx, o)
			if err == nil {
				err = bound.listed(obj)
			}
			p.listed(err)
			if err != nil {
				return nil, err
			}
			return obj, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			if err := p.wait(ctx); err != nil {
				return nil, err
			}
			wi, err := r.Watch(ctx, o)
			if err != nil {
				p.listed(err)
				if o.SendInitialEvents != nil && *o.SendInitialEvents && (utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err)) {
					err = notRetried{err}
				}
				return nil, err
			}
			return p.watching(bound.watch(wi, o.SendInitialEvents != nil && *o.SendInitialEvents, s.opened)), nil
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), example,
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}, ObjectDescription: gvr.String()})
	// What reaches the store is slim already (lists and watches are
	// slimmed as they arrive); slim again, at no cost, as a fixed point.
	_ = inf.SetTransform(func(o any) (any, error) {
		if r, ok := o.(runtime.Object); ok {
			return slim(r), nil
		}
		return o, nil
	})
	return inf
}

// notRetried is an error of a watch-list request (the watch that streams
// the initial list) that client-go's reflector is not to retry itself. It
// retries one that was refused (connection refused) or throttled (429),
// the errors it tells by isWatchErrorRetriable, after a sleep of its
// backoff, 0.8 s at first and up to 30 s, that does not end with its
// context: Run, which waits for its informers, returned seconds after its
// context ended while the server was down. Hidden from the reflector,
// such a failure makes it list instead, at once (the list costs what the
// watch-list would), through the pacer, whose backoff ends with the
// context. Other errors (410 Gone included) are left as they are.
type notRetried struct{ err error }

func (e notRetried) Error() string { return e.err.Error() }

// slimCRD keeps of a CRD's metadata what decides discovery (its name,
// generation and deletion) and what the reflector needs (its apiVersion,
// kind, UID and resourceVersion), so that the informers' stores stay
// small. Each slim function passes other objects (a Status) as they are,
// and its result is its own fixed point.
func slimCRD(obj runtime.Object) runtime.Object {
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj
	}
	return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion, Generation: o.Generation, DeletionTimestamp: o.DeletionTimestamp,
	}}
}

// apiServiceSpec is what slimAPIService keeps of an APIService's spec:
// the group-version it serves, the service it points to (which moves it,
// as none makes it local), and the priorities that order discovery. Its
// caBundle (as long as a server makes it), insecureSkipTLSVerify and
// anything else are dropped: whether the service can be reached shows in
// the Available condition.
var apiServiceSpec = []string{"group", "version", "groupPriorityMinimum", "versionPriority"}

// slimAPIService keeps of an APIService what decides discovery: its
// apiVersion, kind, name, UID and resourceVersion, the scalars of its
// spec that apiServiceSpec names and of its service reference (namespace,
// name, port), and the status of its Available condition.
func slimAPIService(obj runtime.Object) runtime.Object {
	o, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj
	}
	out := slimServed(o).(*unstructured.Unstructured)
	spec := map[string]any{}
	in, _ := o.Object["spec"].(map[string]any)
	for _, k := range apiServiceSpec {
		if v, ok := scalar(in[k]); ok {
			spec[k] = v
		}
	}
	if s, ok := in["service"].(map[string]any); ok {
		svc := map[string]any{}
		for _, k := range []string{"namespace", "name", "port"} {
			if v, ok := scalar(s[k]); ok {
				svc[k] = v
			}
		}
		spec["service"] = svc
	}
	out.Object["spec"] = spec
	if a := available(o); a != "" {
		out.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": a}}}
	}
	return out
}

// slimServed keeps of an object of the served discovery API its apiVersion,
// kind, name, UID and resourceVersion: any event of it asks for a refresh,
// whatever it holds.
func slimServed(obj runtime.Object) runtime.Object {
	o, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(o.GetAPIVersion())
	out.SetKind(o.GetKind())
	out.SetName(o.GetName())
	out.SetUID(o.GetUID())
	out.SetResourceVersion(o.GetResourceVersion())
	return out
}

// scalar is v if it is a string, number or bool.
func scalar(v any) (any, bool) {
	switch v.(type) {
	case string, int64, float64, bool:
		return v, true
	}
	return nil, false
}

// available is the status of an APIService's Available condition ("True",
// "False", "Unknown"), or "" without one.
func available(o *unstructured.Unstructured) string {
	// Read in place: unstructured.NestedSlice copies the conditions,
	// which an unslimmed APIService's server may make long.
	st, _ := o.Object["status"].(map[string]any)
	conditions, _ := st["conditions"].([]any)
	status := ""
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Available" {
			status, _ = m["status"].(string)
		}
	}
	return status
}

// pacer spaces one informer's lists and watches after failures (see
// minRetry): client-go's reflector retries some at once (a relist after a
// 410 Gone, on every request of a hostile or broken server), so the
// backoff is applied where the requests are made. Its calls come from the
// informer's one reflector goroutine, one after another.
type pacer struct {
	mu       sync.Mutex
	failures int
	open     *pacedWatch // the last watch, until it ends
	// failed, if set, is told of each failure, with the count in a row
	// (called with mu held: it must not block).
	failed func(inARow int, err error)
}

func newPacer() *pacer { return &pacer{} }

// wait waits, before a list or watch, for the backoff the failures so far
// call for (none after success), or until ctx ends.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	if p.open != nil {
		// The reflector lists or watches again: the last watch is over,
		// whether or not it was stopped.
		p.endLocked(p.open)
	}
	failures := p.failures
	p.mu.Unlock()
	if failures == 0 {
		return nil
	}
	d := min(minRetry<<min(failures-1, 16), maxRetry)
	d = d/2 + rand.N(d/2+1) // jitter, so that many clients do not retry together
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// listed records the outcome of a list, or of a watch that did not start.
// A list that succeeds does not reset the backoff: a server that lists
// and then fails every watch must not be asked in a loop either.
func (p *pacer) listed(err error) {
	if err != nil {
		p.mu.Lock()
		p.fail(err)
		p.mu.Unlock()
	}
}

// fail counts a failure; p.mu is held.
func (p *pacer) fail(err error) {
	p.failures++
	if p.failed != nil {
		p.failed(p.failures, err)
	}
}

// watching returns w, whose end the pacer judges: healthy if it stayed
// open healthyWatch.
func (p *pacer) watching(w apiwatch.Interface) apiwatch.Interface {
	pw := &pacedWatch{Interface: w, p: p, start: time.Now()}
	p.mu.Lock()
	p.open = pw
	p.mu.Unlock()
	return pw
}

func (p *pacer) endLocked(w *pacedWatch) {
	if p.open != w {
		return
	}
	p.open = nil
	if time.Since(w.start) >= healthyWatch {
		p.failures = 0
	} else {
		p.fail(errShortWatch)
	}
}

// pacedWatch is a watch whose Stop tells the pacer how long it lasted.
type pacedWatch struct {
	apiwatch.Interface
	p     *pacer
	start time.Time
}

func (w *pacedWatch) Stop() {
	w.p.mu.Lock()
	w.p.endLocked(w)
	w.p.mu.Unlock()
	w.Interface.Stop()
}
