package restmapper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/internal/optset"
)

// DefaultMissRefreshInterval is how often, at most, lookups that find
// nothing may refresh discovery once their bursts are spent (see
// WithMissRefreshInterval).
const DefaultMissRefreshInterval = time.Second

type options struct {
	missInterval time.Duration
	clock        clock.PassiveClock
	warn         func(string)
	indexes      *Indexes
}

// building is the options while they apply: the record of those given is
// read only then, and a mapper keeps none (a process may hold thousands
// of mappers, package shared's identities).
type building struct {
	options
	given optset.Given // the options given, by name (named)
}

// Option configures a Mapper.
type Option func(*building) error

// named is the option name, which may be given once (optset).
func named(name string, set func(*options) error) Option {
	return optset.Named("restmapper", name, func(b *building) *optset.Given { return &b.given },
		func(b *building) error { return set(&b.options) })
}

// WithMissRefreshInterval sets the pace of refreshes made by lookups that
// find nothing. The first miss of a question refreshes at once, so a kind
// whose CRD was just served is found at its first lookup; the same
// question missing again refreshes after 50 ms, then after twice as long
// each time, up to the interval. Across all questions, first misses
// refresh at most 8 times in a row and then once per interval, and so do
// repeated misses: a loop over a kind that never exists costs a handful of
// refreshes (two 304s each) in its first second and then one an interval,
// whatever else is asked for; while the client is followed
// (discovery.Client.Following), a question that missed before does not
// refresh again (the follower refreshes the client on every change it
// sees), so such a loop costs its first refresh and nothing more. It is
// also how old discovery may be when a lookup without a version is
// answered: the first such lookup after it
// revalidates (within the repeats' budget) before answering, unless the
// client is followed (discovery.Client.Following: discovery/watch keeps
// it current).
// Default: DefaultMissRefreshInterval (1s).
func WithMissRefreshInterval(d time.Duration) Option {
	return named("WithMissRefreshInterval", func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("restmapper: miss refresh interval must be positive, got %v", d)
		}
		o.missInterval = d
		return nil
	})
}

// WithClock sets the clock of the miss limiter and of the freshness of
// lookups without a version (WithMissRefreshInterval), whose timers it
// runs when it is a clock.WithDelayedExecution (else each such lookup
// reads it). Give the discovery client the same clock (discovery.WithClock):
// snapshots' validation times are read against it. Default: the real
// clock.
func WithClock(c clock.PassiveClock) Option {
	return named("WithClock", func(o *options) error { o.clock = c; return nil })
}

// WithWarningHandler receives a warning when a short name matches several
// resources, as client-go's ShortcutExpander gives it. Default: none.
func WithWarningHandler(f func(string)) Option {
	return named("WithWarningHandler", func(o *options) error { o.warn = f; return nil })
}

// Mapper is a meta.RESTMapper over a discovery.Client's snapshots, with
// short names and categories expanded as client-go's ShortcutExpander and
// category expander do. Answers are client-go's own
// (restmapper.NewDiscoveryRESTMapper over the same discovery). The common
// ones (a name, singular, short name or kind with one clear answer) are read
// from indexes built once per snapshot generation; the rest are computed by
// client-go's mapper once per generation and input and kept. A lookup
// allocates nothing, the first one included, except where client-go's
// answer is a new slice (KindsFor, ResourcesFor).
//
// Returned values are shared between callers: do not modify a returned
// slice or *meta.RESTMapping.
//
// A lookup that finds nothing refreshes discovery conditionally (two 304s
// when nothing changed) and tries again: at once the first time a question
// misses, then after a backoff (WithMissRefreshInterval), so a kind whose
// CRD was just served is found at its first lookup and a loop over a kind
// that does not exist costs about one refresh a second (one in all while
// discovery/watch follows the client: it refreshes on every change). A lookup without a
// version is answered from discovery validated within the interval: the
// first one after it revalidates before answering, so a version added to
// or removed from a group shows in versionless answers an interval later
// at most (the package doc, Freshness). Any newer snapshot of the client
// (revalidated in the background, by discovery/watch or Poll, or by
// another caller) answers the next lookup; no lookup waits for another's
// refresh.
type Mapper struct {
	client *discovery.Client
	opts   *options // read only; the Indexes table's when its mappers' are alike

	state   atomic.Pointer[state]
	buildMu sync.Mutex // serializes building a generation's state (in memory)

	// lookups counts lookups, so that only every revalidateEvery-th one
	// reads the clock to see whether discovery should be revalidated.
	lookups atomic.Uint32

	misses atomic.Pointer[misses] // made at first use (missPolicy)
	// When lookups without a version revalidate (fresh.go), made at the
	// first such lookup while the client is not followed (freshness): a
	// mapper of package shared's identities, followed through the
	// server's watch, mostly never makes one.
	fresh atomic.Pointer[freshness]

	// What Stats reports: every lookup adds to asked, and one that does
	// not find an answer to missed or to its miss policy's failed (as
	// the refreshes of misses are counted there: a mapper that neither
	// misses nor fails holds neither count).
	asked, missed, staleRefreshes atomic.Int64
}

// Stats counts a Mapper's lookups since it was built (Expand's not
// included).
type Stats struct {
	// Hits counts lookups answered.
	Hits int64
	// Misses counts lookups that found nothing (a meta.NoMatchError or a
	// NoKindMatchError), after any refresh they made.
	Misses int64
	// Errors counts lookups that could not be answered for another reason:
	// no discovery at all.
	Errors int64
	// MissRefreshes counts the refreshes of discovery that lookups finding
	// nothing made (WithMissRefreshInterval).
	MissRefreshes int64
	// StaleRefreshes counts the refreshes of discovery that lookups
	// without a version made because discovery was last validated more
	// than an interval before them (WithMissRefreshInterval), and those
	// that lookups with a version made because the client's leader no
	// longer serves the resource they answer with
	// (discovery.Client.LeaderLacks).
	StaleRefreshes int64
}

// Stats returns m's counters. Each is read on its own, so a lookup that
// ends meanwhile may be counted in one and not yet in another.
func (m *Mapper) Stats() Stats {
	var failed, missRefreshes int64
	if p := m.misses.Load(); p != nil {
		failed, missRefreshes = p.failed.Load(), p.refreshes.Load()
	}
	missed := m.missed.Load()
	return Stats{
		Hits:           max(m.asked.Load()-missed-failed, 0),
		Misses:         missed,
		Errors:         failed,
		MissRefreshes:  missRefreshes,
		StaleRefreshes: m.staleRefreshes.Load(),
	}
}

// count adds the outcome of a lookup that ended with err to Stats.
func (m *Mapper) count(err error) {
	m.asked.Add(1)
	switch {
	case err == nil:
	case meta.IsNoMatchError(err):
		m.missed.Add(1)
	default:
		m.missPolicy().failed.Add(1)
	}
}

var (
	_ meta.RESTMapper           = (*Mapper)(nil)
	_ meta.ResettableRESTMapper = (*Mapper)(nil)
	// And client-go's restmapper.CategoryExpander (mapper_test.go): that
	// package is not imported here, see discoverymapper.go.
)

// New builds a mapper over c. It reads discovery lazily, on the first
// lookup.
func New(c *discovery.Client, opts ...Option) (*Mapper, error) {
	if c == nil {
		return nil, errors.New("restmapper: New: nil discovery client")
	}
	b := building{options: options{missInterval: DefaultMissRefreshInterval, clock: clock.RealClock{}}}
	for _, opt := range opts {
		if err := opt(&b); err != nil {
			return nil, err
		}
	}
	o := b.options
	return &Mapper{client: c, opts: o.indexes.sharedOptions(&o)}, nil
}

// revalidateEvery is how many lookups share one look at the clock: the
// client's Snapshot (which revalidates in the background past its max age)
// is consulted on every revalidateEvery-th lookup, and on every miss.
const revalidateEvery = 64

// current returns the state of the client's current snapshot, building it
// when the generation changed.
func (m *Mapper) current(ctx context.Context) (*state, error) {
	snap := m.client.Current()
	st := m.state.Load()
	if snap == nil || st == nil || m.lookups.Add(1)%revalidateEvery == 0 {
		var err error
		if snap, err = m.client.Snapshot(ctx); snap == nil {
			return nil, err
		}
	}
	if st != nil && st.generation == snap.Generation() {
		return st, nil
	}
	m.buildMu.Lock()
	defer m.buildMu.Unlock()
	if st := m.state.Load(); st != nil && st.generation == snap.Generation() {
		return st, nil
	}
	if ix := m.opts.indexes; ix != nil {
		// Built outside the table's lock: another mapper may build the
		// same generation meanwhile, and put keeps the first.
		if st = ix.get(snap.Generation()); st == nil {
			st = ix.put(newState(snap, m.opts.warn))
		}
	} else {
		st = newState(snap, m.opts.warn)
	}
	m.state.Store(st)
	return st, nil
}

// lookup answers one question (versions: see several), refreshing
// discovery on a miss when the miss policy (misses.mayRefresh) allows.
func (m *Mapper) lookup(k memoKey, versions []string) answer {
	ctx := context.Background()
	cold := m.client.Current() == nil
	st, err := m.current(ctx)
	if st == nil {
		m.count(err)
		return answer{err: err}
	}
	a := st.answer(k, versions)
	if a.err == nil {
		// A hit without a version is answered from discovery validated
		// within the interval, or followed (fresh.go).
		if versionless(k, versions) && m.due() {
			if st2 := m.revalidate(ctx); st2 != nil && st2 != st {
				a = st2.answer(k, versions)
			}
		} else if gen, lacks := m.leaderLacks(k, a); lacks && !m.client.Throttled() {
			// A hit with a version on a resource the client's leader
			// (package shared's watch) saw the server stop serving: the
			// client proves its own view first (two requests), once for
			// that leader content, and answers from what it proved.
			if sp, ok := m.missPolicy().mayProve(gen, m.opts.clock.Now()); ok {
				m.staleRefreshes.Add(1)
				_, err := m.client.Refresh(ctx)
				m.refused(sp, err)
				if st2, _ := m.current(ctx); st2 != nil && st2 != st {
					a = st2.answer(k, versions)
				}
			}
		}
		m.count(a.err)
		return a
	}
	// A cold lookup's snapshot was read after it began: a refresh would
	// read the same. A client the server told to wait (a 429's
	// Retry-After) would only get the 429 back: it asks once the wait
	// has passed, its backoff and budget as they were (misses.giveBack).
	if !meta.IsNoMatchError(a.err) || cold || m.client.Throttled() {
		m.count(a.err)
		return a
	}
	sp, ok := m.missPolicy().mayRefresh(k, m.opts.clock.Now(), m.client.Following() || m.leadersLack(k, versions))
	if !ok {
		m.count(a.err)
		return a
	}
	m.missPolicy().refreshes.Add(1)
	_, err = m.client.Refresh(ctx)
	m.refused(sp, err)
	if err != nil && m.client.Current() == nil {
		m.count(a.err)
		return a
	}
	if st2, _ := m.current(ctx); st2 != nil && st2 != st {
		if a = st2.answer(k, versions); a.err == nil {
			m.missPolicy().found(k)
		}
	}
	m.count(a.err)
	return a
}

// refused gives back what a refresh took of the miss policy (sp) when
// the server refused it with a 429 (err): the client keeps its
// Retry-After (discovery.Client.Throttled), and the first lookup that
// needs a refresh once it has passed asks again, as if the refused one
// had not been made.
func (m *Mapper) refused(sp spent, err error) {
	if err != nil && apierrors.IsTooManyRequests(err) {
		m.missPolicy().giveBack(sp, m.opts.clock.Now())
	}
}

// leaderLacks says whether a resource that answer a names (its mappings'
// resources, its resources, or the resource a KindFor asked about) is
// one that a leader of the client holds other content without
// (discovery.Client.LeaderLacks), and that content's generation. A
// client followed itself, or holding its leader's content, answers at
// once (a few atomic loads).
func (m *Mapper) leaderLacks(k memoKey, a answer) (uint64, bool) {
	if a.mapping != nil {
		if gen, lacks := m.client.LeaderLacks(a.mapping.Resource); lacks {
			return gen, true
		}
	}
	for _, mp := range a.mappings {
		if gen, lacks := m.client.LeaderLacks(mp.Resource); lacks {
			return gen, true
		}
	}
	if !a.gvr.Empty() {
		if gen, lacks := m.client.LeaderLacks(a.gvr); lacks {
			return gen, true
		}
	}
	for _, r := range a.gvrs {
		if gen, lacks := m.client.LeaderLacks(r); lacks {
			return gen, true
		}
	}
	if k.op == opKindFor || k.op == opKindsFor {
		return m.client.LeaderLacks(schema.GroupVersionResource{Group: k.group, Version: k.version, Resource: k.name})
	}
	return 0, false
}

// leadersLack says whether question k (versions: see several), a kind's
// mapping, is one that every followed leader of the client lacks too
// (discovery.Client.LeaderServesKind): their watch vouches that the
// server does not serve it, so a repeated miss has nothing to find in a
// refresh (misses.go). A question of a resource, or a client with no
// followed leader, is not.
func (m *Mapper) leadersLack(k memoKey, versions []string) bool {
	if k.op != opRESTMapping && k.op != opRESTMappings {
		return false
	}
	if len(versions) == 0 {
		followed, serves := m.client.LeaderServesKind(schema.GroupVersionKind{Group: k.group, Version: k.version, Kind: k.name})
		return followed && !serves
	}
	for _, v := range versions {
		if followed, serves := m.client.LeaderServesKind(schema.GroupVersionKind{Group: k.group, Version: v, Kind: k.name}); !followed || serves {
			return false
		}
	}
	return true
}

// revalidate refreshes discovery for a lookup without a version whose
// snapshot is older than the interval, within the budget of repeated
// misses, and returns the state to answer from; nil when another lookup
// is revalidating (it is not waited for) or did meanwhile.
func (m *Mapper) revalidate(ctx context.Context) *state {
	f := m.freshness()
	if !f.refreshing.CompareAndSwap(false, true) {
		return nil
	}
	defer f.refreshing.Store(false)
	if !f.due(m.client) {
		return nil
	}
	if !m.client.Throttled() && m.missPolicy().mayRefreshStale(m.opts.clock.Now()) {
		m.staleRefreshes.Add(1)
		_, _ = m.client.Refresh(ctx)
	}
	f.observe(m.client.Current(), true)
	st, _ := m.current(ctx)
	return st
}

func (m *Mapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	a := m.lookup(resourceKey(opKindFor, resource), nil)
	return a.gvk, a.err
}

func (m *Mapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	a := m.lookup(resourceKey(opKindsFor, resource), nil)
	return a.gvks, a.err
}

func (m *Mapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	a := m.lookup(resourceKey(opResourceFor, input), nil)
	return a.gvr, a.err
}

func (m *Mapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	a := m.lookup(resourceKey(opResourcesFor, input), nil)
	return a.gvrs, a.err
}

func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	a := m.lookup(kindKey(opRESTMapping, gk, versions), several(versions))
	return a.mapping, a.err
}

func (m *Mapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	a := m.lookup(kindKey(opRESTMappings, gk, versions), several(versions))
	return a.mappings, a.err
}

// several is the versions of a mapping question that its key cannot hold
// (more than one), copied, else nil: the caller's variadic slice then
// stays on its stack, and a lookup with one version allocates nothing.
func several(versions []string) []string {
	if len(versions) <= 1 {
		return nil
	}
	return slices.Clone(versions)
}

func (m *Mapper) ResourceSingularizer(resource string) (string, error) {
	a := m.lookup(memoKey{op: opSingularizer, name: resource}, nil)
	return a.singular, a.err
}

// Expand lists the resources of a category ("all"), as client-go's
// discovery category expander does, in discovery order.
func (m *Mapper) Expand(category string) ([]schema.GroupResource, bool) {
	st, _ := m.current(context.Background())
	if st == nil {
		return nil, false
	}
	grs, ok := st.categoryIndex()[category]
	return grs, ok
}

// Reset revalidates discovery now (two 304s when nothing changed), so the
// next lookup sees any change. Only the caller of Reset waits.
func (m *Mapper) Reset() {
	_, _ = m.client.Refresh(context.Background())
	_, _ = m.current(context.Background())
}
