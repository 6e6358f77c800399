package restmapper

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Miss policy. A lookup that finds nothing may be asking for a kind whose
// CRD was served a moment ago (a controller creating a CRD and then its
// objects), or for one that never exists (optional integrations probed in
// a loop). The first must be found at its first lookup, whatever else
// missed before; the second must cost the API server almost nothing. So a
// question's first miss refreshes at once and its repeats back off, and two
// budgets, one for first misses and one for repeats, bound what all
// questions together can send: a loop over never-existing kinds cannot
// spend the budget that finds a new one.
//
// (Before: one limiter for the whole mapper, a refresh a second. A second
// CRD looked up right after the first was not found, and a kind polled for
// while its CRD became established was found a second late.)
//
// A repeated miss of a client that is followed (discovery.Client.
// Following: discovery/watch refreshes it on every change it sees, or, for
// package shared's identities, the client holds the content of a leader
// that is) does not refresh: the refresh could only find what the follower
// already brought. Nor does a repeated miss of a kind that every followed
// leader of the client lacks too (discovery.Client.LeaderServesKind; a
// client behind a balancer over servers that disagree holds one server's
// view while its leader joins both, so it is not Following): the leader's
// watch vouches that the server does not serve it. A change the follower sees ends the following (the
// leader's new content, or the client's own refresh under way), and the
// next repeat refreshes again, on its backoff. A question's first miss
// still refreshes, followed or not: its kind may have been served a moment
// before the follower's event. Issue 47's soak found each of three
// followed identities refreshing about once a second while its
// controllers looked up two kinds not served, a miss each every 2 s (the
// backoff had grown to its second): 219 library requests in its first
// minute against controller-runtime's defaults' 696, where the target is a
// tenth.
const (
	missFirstBackoff = 50 * time.Millisecond // a question's wait before its second miss refreshes
	missBurst        = 8                     // refreshes in a row each budget allows
	missKeys         = 4096                  // questions remembered; past it, all are new again
)

// misses decides which misses refresh discovery. Misses are the rare path:
// one mutex is enough, and the budgets and backoffs are made at the first
// miss that needs them (budgets): a mapper that never misses, as most of
// a process's thousand identities' mappers (package shared), holds none.
type misses struct {
	mu       sync.Mutex
	max      time.Duration // the longest a question's backoff grows (the interval)
	firsts   *rate.Limiter // first misses of a question; nil until budgets
	repeats  *rate.Limiter // later misses, once their backoff has passed; nil until budgets
	backoffs map[memoKey]backoff
	// proved is the generation of the leader's content the client's view
	// was last proven against for a resource that content lacks
	// (mayProve): once per generation.
	proved uint64

	// Stats' MissRefreshes and Errors, here rather than in every Mapper:
	// most mappers never miss nor fail (package shared's identities).
	refreshes, failed atomic.Int64
}

type backoff struct {
	next time.Time     // when the question's next miss may refresh
	wait time.Duration // how long after that the one after may
}

func newMisses(interval time.Duration) *misses {
	return &misses{max: interval}
}

// missPolicy is m's miss policy, made at the first miss or stale lookup
// that asks it (a mapper that never misses, most of package shared's
// identities', holds none): one made late is the one New would have made,
// since nothing reads it before.
func (m *Mapper) missPolicy() *misses {
	if p := m.misses.Load(); p != nil {
		return p
	}
	m.misses.CompareAndSwap(nil, newMisses(m.opts.missInterval))
	return m.misses.Load()
}

// budgets makes the budgets, full (a rate.Limiter starts with its
// burst: made at the first miss, they allow what they would have if made
// with the mapper); p.mu is held.
func (p *misses) budgets() {
	if p.firsts == nil {
		p.firsts = rate.NewLimiter(rate.Every(p.max), missBurst)
		p.repeats = rate.NewLimiter(rate.Every(p.max), missBurst)
	}
}

// mayRefresh says whether a miss of k at now may refresh discovery, and
// if so counts it; a repeat of a client that is followed may not.
func (p *misses) mayRefresh(k memoKey, now time.Time, followed bool) (spent, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, seen := p.backoffs[k]
	if seen && (followed || now.Before(b.next)) {
		return spent{}, false
	}
	p.budgets()
	budget := p.repeats
	if !seen {
		budget = p.firsts
		b.wait = missFirstBackoff
	}
	r, ok := take(budget, now)
	if !ok {
		return spent{}, false
	}
	if !seen && len(p.backoffs) >= missKeys {
		clear(p.backoffs) // bounded memory; the first-miss budget bounds what this costs
	}
	sp := spent{key: k, had: seen, prev: b, token: r}
	b.next = now.Add(min(b.wait, p.max))
	b.wait = min(2*b.wait, p.max)
	if p.backoffs == nil {
		p.backoffs = map[memoKey]backoff{}
	}
	p.backoffs[k] = b
	return sp, true
}

// take takes a token of budget at now, as AllowN(now, 1) does, and
// returns it, so that giveBack can put it back.
func take(budget *rate.Limiter, now time.Time) (*rate.Reservation, bool) {
	r := budget.ReserveN(now, 1)
	if !r.OK() {
		return nil, false
	}
	if r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return nil, false
	}
	return r, true
}

// spent is what a refresh the policy allowed took: a question's backoff
// (mayRefresh) or a leader generation's proof (mayProve), and a budget's
// token. giveBack returns it when the server refused the refresh with a
// 429: API Priority and Fairness throttling the client's identity, whose
// Retry-After the client keeps (discovery.Client.Throttled) and lookups
// wait out without asking. The server's wait then paces the refreshes,
// not a backoff grown by refusals nor a budget they spent: issue 47's
// soak found a throttled identity's answers wrong for up to 13.7 s of the
// time it was free to ask.
type spent struct {
	key        memoKey
	had        bool    // the question had a backoff before (prev)
	prev       backoff // its backoff before
	proof      bool    // a proof (mayProve): prevProved is the generation proven before
	prevProved uint64
	token      *rate.Reservation
}

// giveBack undoes sp at now (the refresh was refused with a 429).
func (p *misses) giveBack(sp spent, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp.token != nil {
		sp.token.CancelAt(now)
	}
	if sp.proof {
		p.proved = sp.prevProved
		return
	}
	switch {
	case sp.had:
		p.backoffs[sp.key] = sp.prev
	default:
		delete(p.backoffs, sp.key)
	}
}

// found forgets k's backoff: it is served now.
func (p *misses) found(k memoKey) {
	p.mu.Lock()
	delete(p.backoffs, k)
	p.mu.Unlock()
}

// mayRefreshStale says whether a lookup without a version whose discovery
// is older than the interval (fresh.go) may refresh it, and if so counts
// it: it spends the repeats' budget, so that stale lookups and repeated
// misses together refresh at most a burst and then once an interval.
func (p *misses) mayRefreshStale(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budgets()
	return p.repeats.AllowN(now, 1)
}

// mayProve says whether a lookup whose answer names a resource that a
// leader's content of generation gen lacks (discovery.Client.LeaderLacks)
// may refresh discovery, and if so counts it: once per such generation,
// within the first misses' budget (a leader's change is news, as a
// question's first miss is). Behind a balancer over servers that
// disagree, the view the client proves may still hold the resource the
// leader's lacks; it is not proven again until the leader's content
// changes.
func (p *misses) mayProve(gen uint64, now time.Time) (spent, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proved == gen {
		return spent{}, false
	}
	p.budgets()
	r, ok := take(p.firsts, now)
	if !ok {
		return spent{}, false
	}
	sp := spent{proof: true, prevProved: p.proved, token: r}
	p.proved = gen
	return sp, true
}
