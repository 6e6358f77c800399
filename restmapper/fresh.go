package restmapper

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// Freshness of lookups without a version. A lookup that names no version
// (RESTMapping(gk), KindsFor of a group and resource, KindFor of a short
// name) gets the version discovery prefers now, so its answer changes when
// a version is added to or removed from the group, and nothing about the
// answer tells the mapper so: it is a hit. (controller-runtime's mapper
// kept such a group's versions for ever: controller-runtime#3542.) So
// such a lookup is answered from discovery validated within the interval
// (WithMissRefreshInterval): when the last validation is older, it
// revalidates first (two 304s when nothing changed), spending the budget
// of repeated misses, so that all lookups together cost the server what a
// loop over a missing kind costs.
//
// Knowing "older than the interval" must not cost a clock read per
// lookup (a read is 30 ns on a quick machine and 200 ns on a slow virtual
// one, as much as the lookup): a timer marks discovery stale an interval
// after the validation the mapper last saw, and the lookup reads one
// atomic flag. A snapshot the mapper has not seen yet (another caller's
// refresh, discovery/watch, Poll) is looked at once, with one clock read.
// Lookups with a version are not concerned: their answer changes only
// when that version goes, which costs a request to it anyway; but a
// client that follows a leader (package shared's identities) is told
// when the leader's content lacks the resource, and proves its view
// first (mapper.go, leaderLacks).
//
// While the client is followed (discovery.Client.Following: discovery/watch
// with its watches open and synced), a lookup does not look at the
// interval at all: the follower refreshes the client on every change it
// sees, so the snapshot at hand is as current as a revalidation would
// make it, and one atomic load replaces the check. When following stops,
// the interval counts from the last validation again, as if the client
// had never been followed: the follower vouches for nothing after it
// stopped, and a change it saw just before may not have been refreshed
// (its refresh cancelled with it), so counting from the stop would answer
// from discovery up to an interval older than the rule allows. On an idle
// cluster (the watch validates once a minute) that makes the first such
// lookup after a loss revalidate at once: two 304s per loss, and losses
// are paced by the watch's backoff.
type freshness struct {
	interval time.Duration
	clock    clock.PassiveClock
	// after schedules the stale mark on the clock; nil when the clock
	// cannot (a clock.PassiveClock only), and then due reads the clock.
	// The clock itself, not its method value: that would be an allocation
	// of every mapper (package shared holds one per identity).
	after clock.WithDelayedExecution

	stale      atomic.Bool                        // the interval since the validation seen has passed
	seen       atomic.Pointer[discovery.Snapshot] // the snapshot whose validation the interval counts from
	epoch      atomic.Uint64                      // of the armed timer: an older timer's mark is void
	deadline   atomic.Int64                       // unix nanoseconds, when after is nil
	refreshing atomic.Bool                        // a lookup is revalidating: others do not wait for it

	mu    sync.Mutex  // orders observe; held across no I/O, clock or callback
	timer clock.Timer // the armed timer, stopped when superseded
}

func newFreshness(interval time.Duration, c clock.PassiveClock) *freshness {
	f := &freshness{interval: interval, clock: c}
	if d, ok := c.(clock.WithDelayedExecution); ok {
		f.after = d
	}
	return f
}

// freshness is m's, made at its first use: what a freshness made with
// the mapper would have been, since nothing reads it before.
func (m *Mapper) freshness() *freshness {
	if f := m.fresh.Load(); f != nil {
		return f
	}
	m.fresh.CompareAndSwap(nil, newFreshness(m.opts.missInterval, m.opts.clock))
	return m.fresh.Load()
}

// due says whether a lookup without a version should revalidate
// discovery first (freshness.due), making m's freshness only when the
// client is not followed: a followed client's never is.
func (m *Mapper) due() bool {
	if m.client.Following() {
		return false
	}
	return m.freshness().due(m.client)
}

// due says whether a lookup without a version, answered from c's current
// snapshot, should revalidate discovery first: never while c is followed
// (discovery.Client.Following: a follower refreshes it on every change).
func (f *freshness) due(c *discovery.Client) bool {
	if c.Following() {
		return false
	}
	snap := c.Current()
	if snap == nil {
		return false
	}
	if snap != f.seen.Load() {
		f.observe(snap, false)
	}
	if f.stale.Load() {
		return true
	}
	if f.after != nil {
		return false
	}
	return !f.clock.Now().Before(time.Unix(0, f.deadline.Load()))
}

// observe starts the interval from snap's validation, or from now when
// the mapper has just tried to revalidate (attempted: whatever the
// outcome, the next try is an interval later, so a dead server gets one
// try an interval).
func (f *freshness) observe(snap *discovery.Snapshot, attempted bool) {
	if snap == nil {
		return
	}
	now := f.clock.Now() // the clock and its timers are called outside f.mu
	f.mu.Lock()
	if !attempted && f.seen.Load() == snap {
		f.mu.Unlock()
		return // another lookup observed it meanwhile
	}
	remain := f.interval
	if !attempted {
		// A validation time ahead of the mapper's clock (another clock
		// given to the discovery client) counts as now.
		remain -= max(now.Sub(snap.Validated()), 0)
	}
	f.seen.Store(snap)
	e := f.epoch.Add(1)
	old := f.timer
	f.timer = nil
	f.stale.Store(remain <= 0)
	if remain > 0 && f.after == nil {
		f.deadline.Store(now.Add(remain).UnixNano())
	}
	f.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	if remain <= 0 || f.after == nil {
		return
	}
	t := f.after.AfterFunc(remain, func() {
		if f.epoch.Load() == e {
			f.stale.Store(true)
		}
	})
	f.mu.Lock()
	if f.epoch.Load() == e {
		f.timer, t = t, nil
	}
	f.mu.Unlock()
	if t != nil {
		t.Stop() // superseded meanwhile
	}
}

// versionless says whether question k (with versions, see several) names
// no version, so that its answer is the version discovery prefers now.
func versionless(k memoKey, versions []string) bool {
	switch k.op {
	case opSingularizer:
		return false
	case opRESTMapping, opRESTMappings:
		for _, v := range versions {
			if v != "" {
				return false
			}
		}
	}
	return k.version == ""
}
