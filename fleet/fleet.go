package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/gate"
	"github.com/kubeatlas/kubeatlas/internal/optset"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Defaults of the options.
const (
	DefaultConcurrency    = 32
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultRefreshTimeout = 10 * time.Second
)

type options struct {
	cacheDir       string
	concurrency    int
	minBackoff     time.Duration
	maxBackoff     time.Duration
	refreshTimeout time.Duration
	discoveryOpts  []discovery.Option
	openapiOpts    []openapi3.Option
	logger         *slog.Logger
	clock          clock.PassiveClock

	given optset.Given // the options given, by name (named)
}

// Option configures a Fleet.
type Option func(*options) error

// named is the option name, which may be given once (optset).
func named(name string, set func(*options) error) Option {
	return optset.Named("fleet", name, func(o *options) *optset.Given { return &o.given }, set)
}

// WithCacheDir keeps what the fleet reads in dir, across processes: each
// cluster's own entries (which surface it served, when it was validated)
// in a directory of its own, and every discovery and OpenAPI v3 document
// once per content, whichever cluster served it, in a shared one. A
// cluster then starts from the disk and is revalidated with two 304s.
// Default: none.
func WithCacheDir(dir string) Option {
	return named("WithCacheDir", func(o *options) error {
		if dir == "" {
			return errors.New("fleet: WithCacheDir needs a directory")
		}
		o.cacheDir = dir
		return nil
	})
}

// WithConcurrency bounds how many clusters a Refresh round reads at once.
// Default: DefaultConcurrency (32).
func WithConcurrency(n int) Option {
	return named("WithConcurrency", func(o *options) error {
		if n < 1 {
			return fmt.Errorf("fleet: concurrency must be at least 1, got %d", n)
		}
		o.concurrency = n
		return nil
	})
}

// WithBackoff sets how long a cluster whose refresh failed is left out of
// Refresh rounds: min after the first failure, doubling (with jitter) up
// to max. Default: DefaultMinBackoff (1s) to DefaultMaxBackoff (5m).
func WithBackoff(min, max time.Duration) Option {
	return named("WithBackoff", func(o *options) error {
		if min <= 0 || max < min {
			return fmt.Errorf("fleet: backoff needs 0 < min <= max, got %v, %v", min, max)
		}
		o.minBackoff, o.maxBackoff = min, max
		return nil
	})
}

// WithRefreshTimeout bounds one cluster's refresh, so that an unreachable
// cluster holds one of the round's workers for at most that long.
// Default: DefaultRefreshTimeout (10s).
func WithRefreshTimeout(d time.Duration) Option {
	return named("WithRefreshTimeout", func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("fleet: refresh timeout must be positive, got %v", d)
		}
		o.refreshTimeout = d
		return nil
	})
}

// WithDiscoveryOptions passes options to every cluster's discovery
// client, with the fleet's own, which they may not give again nor
// contradict (New's error says which): WithSurfaces (the fleet's table,
// which makes the clients read JSON), WithRefreshTimeout (the fleet's)
// and WithDiskCache (the fleet's store, with WithCacheDir). Default: none.
func WithDiscoveryOptions(opts ...discovery.Option) Option {
	return named("WithDiscoveryOptions", func(o *options) error { o.discoveryOpts = append(o.discoveryOpts, opts...); return nil })
}

// WithOpenAPIOptions passes options to every cluster's OpenAPI v3 client,
// with the fleet's own, which they may not give again (New's error says
// which): WithDocuments (the fleet's table) and WithDiskCache (the fleet's
// store, with WithCacheDir). Default: none.
func WithOpenAPIOptions(opts ...openapi3.Option) Option {
	return named("WithOpenAPIOptions", func(o *options) error { o.openapiOpts = append(o.openapiOpts, opts...); return nil })
}

// WithLogger sets where the fleet logs clusters that fail and recover.
// Default: nowhere.
func WithLogger(l *slog.Logger) Option {
	return named("WithLogger", func(o *options) error { o.logger = l; return nil })
}

// WithClock sets the clock for backoff. Default: the real clock.
func WithClock(c clock.PassiveClock) Option {
	return named("WithClock", func(o *options) error { o.clock = c; return nil })
}

// Fleet holds discovery, REST mappings and OpenAPI v3 for many clusters.
// Clusters that serve the same API surface share one decoded snapshot
// (surfaces.go), one mapper index (restmapper.Indexes) and one copy
// of each OpenAPI document (openapi3.Documents): memory grows with the
// number of distinct surfaces, plus a small constant per cluster. It is
// safe for concurrent use.
type Fleet struct {
	opts      options
	surfaces  *surfaces
	indexes   *restmapper.Indexes
	documents *openapi3.Documents
	content   *diskcache.Cache // documents by content, with WithCacheDir
	stored    sync.Map         // content keys put in content by this process (contentStore)

	mu       sync.RWMutex
	clusters map[string]*Cluster

	subsMu     sync.Mutex
	subs       map[int]*subscription
	nextSub    int
	forwarding atomic.Bool // clusters pass on their changes (from the first Subscribe)
}

// Change is a change of one cluster's discovery.
type Change struct {
	Cluster string
	discovery.Change
}

// New returns an empty fleet.
func New(opts ...Option) (*Fleet, error) {
	o := options{
		concurrency: DefaultConcurrency, minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff,
		refreshTimeout: DefaultRefreshTimeout, logger: slog.New(slog.DiscardHandler), clock: clock.RealClock{},
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	f := &Fleet{
		opts: o, surfaces: newSurfaces(), indexes: restmapper.NewIndexes(), documents: openapi3.NewDocuments(),
		clusters: map[string]*Cluster{}, subs: map[int]*subscription{},
	}
	if o.cacheDir != "" {
		c, err := diskcache.Open(o.cacheDir, contentDir, diskcache.WithLogger(o.logger))
		if err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		f.content = c
	}
	// The user's options for the clusters' clients are tried here with the
	// fleet's own, so that one that would replace what the fleet owns, or
	// contradict it, is New's error and not every Add's.
	var store diskcache.Store
	if f.content != nil {
		store = f.content
	}
	if _, err := discovery.NewForHTTPClient(nil, "https://fleet.invalid", f.discoveryOptions(store)...); err != nil {
		return nil, fmt.Errorf("fleet: WithDiscoveryOptions: %w (the fleet gives its clusters WithSurfaces, WithRefreshTimeout and WithDiskCache)", err)
	}
	if _, err := openapi3.NewForHTTPClient(nil, "https://fleet.invalid", f.openAPIOptions(store)...); err != nil {
		return nil, fmt.Errorf("fleet: WithOpenAPIOptions: %w (the fleet gives its clusters WithDocuments and WithDiskCache)", err)
	}
	return f, nil
}

// discoveryOptions are a cluster's discovery options: the fleet's (its
// table: a surface is shared only once its documents are checked against
// their ETags, so the clients read JSON; its refresh timeout; its store),
// then the user's, which may not give those again.
func (f *Fleet) discoveryOptions(store diskcache.Store) []discovery.Option {
	own := []discovery.Option{discovery.WithSurfaces(f.surfaces.table), discovery.WithRefreshTimeout(f.opts.refreshTimeout), discovery.WithDiskCache(store)}
	return append(own, f.opts.discoveryOpts...)
}

// openAPIOptions are a cluster's OpenAPI v3 options: the fleet's (its
// table of documents, its store), then the user's.
func (f *Fleet) openAPIOptions(store diskcache.Store) []openapi3.Option {
	return append([]openapi3.Option{openapi3.WithDocuments(f.documents), openapi3.WithDiskCache(store)}, f.opts.openapiOpts...)
}

// contentDir names the disk cache directory of documents by content (a
// diskcache.Open server name that no server URL is).
const contentDir = "kubeatlas-fleet-content"

// ErrExists is the error of Add for an ID the fleet has.
var ErrExists = errors.New("fleet: a cluster with this ID exists")

// ClusterOption configures one cluster.
type ClusterOption func(*clusterOptions) error

type clusterOptions struct {
	like  string
	given optset.Given
}

// namedCluster is the cluster option name, which may be given once.
func namedCluster(name string, set func(*clusterOptions) error) ClusterOption {
	return optset.Named("fleet", name, func(o *clusterOptions) *optset.Given { return &o.given }, set)
}

// WithLike names a cluster expected to serve the same API surface (the same
// Kubernetes version and add-ons): a cold start offers its surface to the
// server first. Default: the surface that servers of the same fingerprint
// (the size of the OpenAPI v3 root, one request) turned out to serve,
// else the one the most clusters serve (see probe.go).
func WithLike(id string) ClusterOption {
	return namedCluster("WithLike", func(o *clusterOptions) error {
		if id == "" {
			return errors.New("fleet: WithLike needs a cluster's ID")
		}
		o.like = id
		return nil
	})
}

// Add registers a cluster under id. Nothing is read until it is used or
// refreshed. A cfg whose server has a path prefix (a fleet proxy's
// https://proxy/k8s/clusters/<id>) keeps it for every request.
func (f *Fleet) Add(id string, cfg *rest.Config, opts ...ClusterOption) (*Cluster, error) {
	var co clusterOptions
	for _, o := range opts {
		if err := o(&co); err != nil {
			return nil, err
		}
	}
	c, err := f.newCluster(id, cfg, co)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.clusters[id]; dup {
		c.close()
		return nil, fmt.Errorf("%w: %q", ErrExists, id)
	}
	f.clusters[id] = c
	if f.forwarding.Load() { // after the insert: Subscribe sets it, then forwards every cluster
		c.forward()
	}
	return c, nil
}

// Remove forgets a cluster; it reports whether the fleet had it. What only
// it held (its surface, if no other cluster serves it) is released.
func (f *Fleet) Remove(id string) bool {
	f.mu.Lock()
	c, ok := f.clusters[id]
	delete(f.clusters, id)
	f.mu.Unlock()
	if ok {
		c.close()
	}
	return ok
}

// Cluster returns a registered cluster, and whether id is one. (It
// returned a nil *Cluster for an unknown id, whose Mapper panicked on use.)
func (f *Fleet) Cluster(id string) (*Cluster, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.clusters[id]
	return c, ok
}

// IDs lists the registered clusters, sorted.
func (f *Fleet) IDs() []string {
	f.mu.RLock()
	ids := make([]string, 0, len(f.clusters))
	for id := range f.clusters {
		ids = append(ids, id)
	}
	f.mu.RUnlock()
	slices.Sort(ids)
	return ids
}

func (f *Fleet) all() []*Cluster {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Cluster, 0, len(f.clusters))
	for _, c := range f.clusters {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *Cluster) int { return strings.Compare(a.id, b.id) })
	return out
}

// RoundError is what a Refresh round returns when clusters failed: one
// *ClusterError each, by ID.
type RoundError struct {
	Failed []*ClusterError
}

func (e *RoundError) Error() string {
	ids := make([]string, len(e.Failed))
	for i, ce := range e.Failed {
		ids[i] = ce.Cluster
	}
	return fmt.Sprintf("fleet: %d cluster(s) failed: %v", len(e.Failed), ids)
}

// Unwrap returns the clusters' errors.
func (e *RoundError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, ce := range e.Failed {
		out[i] = ce
	}
	return out
}

// ClusterError is why a cluster's latest refresh failed, with what is known
// of it.
type ClusterError struct {
	Cluster string
	Err     error
	// Last is the last snapshot read of the cluster (nil if none), which
	// its client and mapper still answer from.
	Last *discovery.Snapshot
	// Failures counts the refreshes that failed in a row; the cluster is
	// left out of rounds until RetryAt.
	Failures int
	RetryAt  time.Time
}

func (e *ClusterError) Error() string {
	return fmt.Sprintf("fleet: cluster %s: %v", e.Cluster, e.Err)
}

func (e *ClusterError) Unwrap() error { return e.Err }

// Refresh reads every cluster that is not backing off after a failure,
// at most WithConcurrency at a time, each bounded by WithRefreshTimeout:
// two 304s for a cluster whose surface did not change. A cluster that
// fails keeps its last snapshot, is retried after a backoff, and is
// reported in the returned *RoundError; it delays the others by nothing
// but the worker it holds. Refresh returns early when ctx ends.
func (f *Fleet) Refresh(ctx context.Context) error {
	now := f.opts.clock.Now()
	// Cold clusters are read in an order that lets them start from a
	// surface another has read: with nothing held yet, one goes first,
	// alone; a cluster whose WithLike cluster is cold too goes after it.
	var first, rest, later []*Cluster
	seeded := f.surfaces.table.Len() > 0
	for _, c := range f.all() {
		switch {
		case !c.due(now):
		case c.like != nil && c.like.Snapshot() == nil:
			later = append(later, c)
		case !seeded && c.Snapshot() == nil:
			first, seeded = append(first, c), true
		default:
			rest = append(rest, c)
		}
	}
	var failed []*ClusterError
	for _, batch := range [][]*Cluster{first, rest, later} {
		failed = append(failed, f.refreshAll(ctx, batch)...)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if len(failed) == 0 {
		return nil
	}
	slices.SortFunc(failed, func(a, b *ClusterError) int { return strings.Compare(a.Cluster, b.Cluster) })
	return &RoundError{Failed: failed}
}

// refreshAll refreshes clusters, WithConcurrency at a time.
func (f *Fleet) refreshAll(ctx context.Context, due []*Cluster) []*ClusterError {
	work := make(chan *Cluster)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []*ClusterError
	for range min(f.opts.concurrency, len(due)) {
		wg.Go(func() {
			for c := range work {
				if ce := c.refresh(ctx); ce != nil {
					mu.Lock()
					failed = append(failed, ce)
					mu.Unlock()
				}
			}
		})
	}
	for _, c := range due {
		select {
		case work <- c:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	return failed
}

// Run refreshes every interval until ctx ends.
func (f *Fleet) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_ = f.Refresh(ctx) // failures are each cluster's (Cluster.Err), and logged
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// subscription is one Subscribe call: fn, called through gate.
type subscription struct {
	fn   func(Change)
	gate gate.Gate
}

// Subscribe calls fn with each change of any cluster's discovery, as the
// cluster's client reports it (discovery.Client.Subscribe): after the
// cluster's snapshot is published, one call at a time per cluster (calls
// for different clusters may run at once), never on the goroutine that
// refreshed it. The returned function unsubscribes: when it returns, fn is
// not running on another goroutine and is not called again (called from
// fn, it returns at once, and fn is not called again).
func (f *Fleet) Subscribe(fn func(Change)) (unsubscribe func()) {
	sub := &subscription{fn: fn}
	f.subsMu.Lock()
	id := f.nextSub
	f.nextSub++
	f.subs[id] = sub
	f.subsMu.Unlock()
	if !f.forwarding.Swap(true) {
		for _, c := range f.all() {
			c.forward()
		}
	}
	return func() {
		f.subsMu.Lock()
		delete(f.subs, id)
		f.subsMu.Unlock()
		sub.gate.Close()
	}
}

func (f *Fleet) notify(cluster string, ch discovery.Change) {
	f.subsMu.Lock()
	subs := make([]*subscription, 0, len(f.subs))
	for _, sub := range f.subs {
		subs = append(subs, sub)
	}
	f.subsMu.Unlock()
	for _, sub := range subs {
		if sub.gate.Enter() {
			func() {
				defer sub.gate.Exit()
				sub.fn(Change{Cluster: cluster, Change: ch})
			}()
		}
	}
}

// Stats counts what the fleet holds and what its clusters did.
type Stats struct {
	Clusters  int
	Failing   int // clusters whose latest refresh failed
	Surfaces  int // distinct API surfaces held (decoded once each)
	Indexes   int // REST mapper indexes held (one per surface in use)
	Documents int // OpenAPI v3 documents held (one per content)
	// Summed over the clusters' discovery clients (discovery.Stats); Bytes
	// also counts the cold starts' size probes (see WithLike).
	Requests, Bytes, NotModified, SurfaceHits, DiskLoads int64
}

// Stats returns the fleet's counters.
func (f *Fleet) Stats() Stats {
	st := Stats{Surfaces: f.surfaces.table.Len(), Indexes: f.indexes.Len(), Documents: f.documents.Len(), Bytes: f.surfaces.probeBytes.Load()}
	for _, c := range f.all() {
		st.Clusters++
		if c.Err() != nil {
			st.Failing++
		}
		ds := c.disc.Stats()
		st.Requests += ds.Requests
		st.Bytes += ds.Bytes
		st.NotModified += ds.NotModified
		st.SurfaceHits += ds.SurfaceHits
		st.DiskLoads += ds.DiskLoads
	}
	return st
}

// backoff is how long a cluster that failed n times in a row sits out:
// min·2^(n-1), capped at max, less up to a fifth of it at random, so that
// clusters that failed together do not come back together.
func (o *options) backoff(n int) time.Duration {
	d := o.minBackoff
	for i := 1; i < n && d < o.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, o.maxBackoff)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}
