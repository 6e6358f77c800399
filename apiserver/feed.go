package apiserver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
)

// Defaults of a Feed.
const (
	DefaultCheckInterval = time.Minute
	DefaultCheckDelay    = 2 * time.Second
)

// The feed's refreshes: up to 10 at once, then one every 200 ms (a client
// alone: 5, then one a second). The feed is one client for all of this
// server's watchers, so it spends a little more of the upstream's time to
// keep a stream of CRD changes within a second of each change: with the
// client's pace, CRDs created back to back reached watchers about a second
// apart (p99 1.01 s).
const (
	FeedRefreshEvery = 200 * time.Millisecond
	FeedRefreshBurst = 10
)

// Feed keeps the stores equal to what the upstream cluster serves: one
// discovery.Client kept current by discovery/watch.Run (one upstream watch
// set, however many clients watch this server), its changes applied to the
// apigroups store, and consistency.Check run every CheckInterval and
// CheckDelay after a change, for apiservers and the cluster's verdict.
type Feed struct {
	Client *discovery.Client
	Stores Stores
	// CheckInterval and CheckDelay: see DefaultCheckInterval and
	// DefaultCheckDelay. A negative CheckInterval turns the check off.
	CheckInterval, CheckDelay time.Duration
	// CheckOptions are passed to consistency.Check.
	CheckOptions []consistency.Option
	// WatchOptions are passed to watch.Run with the feed's own, which
	// they may not give again (watch.Run's error says which):
	// WithServedAPI(false) (the upstream cluster serves this very API once
	// this server is registered, and a feed that watched its own output
	// would never see a change), WithRefreshLimit(FeedRefreshEvery,
	// FeedRefreshBurst) and WithLogger(Logger).
	WatchOptions []watch.Option
	Logger       *slog.Logger
	Clock        clock.Clock

	// mu serializes applying to the stores (memory only: never held across
	// I/O); it guards the last snapshot and report.
	mu       sync.Mutex
	snapshot *discovery.Snapshot
	report   *consistency.Report
}

// Run feeds the stores until ctx ends. It returns after its goroutines have.
func (f *Feed) Run(ctx context.Context) error {
	if f.Logger == nil {
		f.Logger = slog.Default()
	}
	if f.Clock == nil {
		f.Clock = clock.RealClock{}
	}
	if f.CheckInterval == 0 {
		f.CheckInterval = DefaultCheckInterval
	}
	if f.CheckDelay <= 0 {
		f.CheckDelay = DefaultCheckDelay
	}
	changed := make(chan struct{}, 1)
	unsubscribe := f.Client.Subscribe(func(c discovery.Change) {
		f.applySnapshot(c.New)
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer unsubscribe()

	var wg sync.WaitGroup
	wg.Go(func() {
		opts := append([]watch.Option{watch.WithServedAPI(false), watch.WithRefreshLimit(FeedRefreshEvery, FeedRefreshBurst), watch.WithLogger(f.Logger)}, f.WatchOptions...)
		if err := watch.Run(ctx, f.Client, opts...); err != nil {
			f.Logger.Error("watching the upstream cluster", "err", err)
		}
	})
	defer wg.Wait()
	// Subscribers are told only of changes after the snapshot the client
	// has (read before it was handed over, or from a disk cache): that one
	// is applied from here.
	if s, err := f.Client.Snapshot(ctx); err != nil && ctx.Err() == nil {
		f.Logger.Warn("reading the upstream cluster's discovery", "err", err)
	} else if s != nil {
		f.applySnapshot(s)
	}
	if f.CheckInterval < 0 {
		f.Stores.Servers.MarkReady()
		f.Stores.Consistency.MarkReady()
		<-ctx.Done()
		return nil
	}
	// A check runs CheckDelay after a change, later changes postponing it,
	// but never more than CheckInterval after the last one: a group that
	// changes every second must not keep apiservers from being checked.
	var last time.Time
	next := f.Clock.NewTimer(0)
	defer func() { next.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			next.Stop()
			next = f.Clock.NewTimer(min(f.CheckDelay, max(0, f.CheckInterval-f.Clock.Since(last))))
			continue
		case <-next.C():
		}
		last = f.Clock.Now()
		f.check(ctx)
		f.Stores.Servers.MarkReady() // after the first check, whatever it found
		f.Stores.Consistency.MarkReady()
		next = f.Clock.NewTimer(f.CheckInterval)
	}
}

func (f *Feed) check(ctx context.Context) {
	r, err := consistency.Check(ctx, f.Client, f.CheckOptions...)
	if err != nil {
		if ctx.Err() == nil {
			f.Logger.Warn("checking the API servers' consistency", "err", err)
		}
		return
	}
	f.applyReport(r, f.Clock.Now())
}

// applySnapshot brings the apigroups store to s: an unchanged group keeps
// its object and resourceVersion, and emits no event.
func (f *Feed) applySnapshot(s *discovery.Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.snapshot != nil && s.Generation() <= f.snapshot.Generation() {
		return // told already, or older than what was
	}
	f.snapshot = s
	f.applyGroupsLocked()
	f.Stores.Groups.MarkReady()
}

func (f *Feed) applyGroupsLocked() {
	if f.snapshot == nil {
		return
	}
	var diffs map[string][]consistency.Difference
	if f.report != nil {
		diffs = differencesByGroup(f.report)
	}
	st := f.Stores.Groups
	prior := func(name string) *v1alpha1.Group {
		if o, ok := st.Peek(name); ok {
			return o.(*v1alpha1.Group)
		}
		return nil
	}
	groups := apiGroups(f.snapshot, diffs, groupCheckOf(f.report), prior)
	groups = append(groups, onlyElsewhere(f.snapshot, f.report, diffs, prior)...)
	want := map[string]bool{}
	for _, g := range groups {
		want[g.Name] = true
		if p := prior(g.Name); p != nil && equality.Semantic.DeepEqual(p.Status, g.Status) && equality.Semantic.DeepEqual(p.Labels, g.Labels) {
			continue
		}
		st.Upsert(g)
	}
	for _, name := range st.Names() {
		if !want[name] {
			st.Delete(name)
		}
	}
}

// onlyElsewhere returns the objects of the groups that r finds some
// servers serve and s does not have: the client's URL answered from
// servers without them (through a load balancer, its snapshot is one
// server's view until it sees two disagree), but the cluster serves them,
// so they have objects, built from the view of a server that serves them,
// with their Consistent condition False.
func onlyElsewhere(s *discovery.Snapshot, r *consistency.Report, diffs map[string][]consistency.Difference, prior func(name string) *v1alpha1.Group) []*v1alpha1.Group {
	if r == nil {
		return nil
	}
	var out []*v1alpha1.Group
	for group := range diffs {
		if _, ok := s.Group(group); ok {
			continue
		}
		for i := range r.Servers {
			view := r.Servers[i].View
			if view == nil {
				continue
			}
			if _, ok := view.Group(group); !ok {
				continue
			}
			for _, g := range apiGroups(view, diffs, groupCheckOf(r), prior) {
				if g.Status.Group == group {
					out = append(out, g)
				}
			}
			break
		}
	}
	return out
}

// applyReport updates apiservers and the verdict, and the groups' Consistent
// conditions.
func (f *Feed) applyReport(r *consistency.Report, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.report = r
	st := f.Stores.Servers
	want := map[string]bool{}
	for _, s := range apiServers(r, at, func(name string) *v1alpha1.APIServer {
		if o, ok := st.Peek(name); ok {
			return o.(*v1alpha1.APIServer)
		}
		return nil
	}) {
		want[s.Name] = true
		if o, ok := st.Peek(s.Name); ok && equality.Semantic.DeepEqual(o.(*v1alpha1.APIServer).Status, s.Status) {
			continue
		}
		st.Upsert(s)
	}
	for _, name := range st.Names() {
		if !want[name] {
			st.Delete(name)
		}
	}
	var prior *v1alpha1.ClusterConsistency
	if o, ok := f.Stores.Consistency.Peek(v1alpha1.ClusterConsistencyName); ok {
		prior = o.(*v1alpha1.ClusterConsistency)
	}
	f.Stores.Consistency.Upsert(verdict(r, at, prior))
	f.applyGroupsLocked()
}
