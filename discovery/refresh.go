package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/internal/gate"
)

// The refresh machine. Every snapshot the client serves is published here,
// by one publisher, under rules that hold whoever calls and whenever they
// give up:
//
//   - Runs go one at a time: a run reads the server, joins the views of
//     disagreeing servers (mixed.go) and publishes; the next starts only
//     when it has published (or failed). So a run never publishes over a
//     snapshot of a run that began after it, and generations a reader or
//     subscriber sees only grow.
//   - Coalescing is explicit. Refresh wants discovery as of its call: it
//     never takes the result of a run that began before it, but shares the
//     run queued after the one under way with everyone else who arrived
//     meanwhile. A background revalidation (Snapshot past the max age) and
//     a cold start take whatever run is under way.
//   - A run that every caller has left is cancelled (its requests end at
//     once), and the run queued behind it starts as soon as it returns.
//   - No lock is held across I/O or a callback: r.mu guards a few fields,
//     and subscribers are called on goroutines of their own after
//     publication (subscriber, below).
//   - Writing the disk cache comes after publication, on a writer of its
//     own (persist.go), and holds up no run; the callers of a run wait
//     for its write until their contexts end, so that a program that
//     refreshes and exits leaves its snapshot on disk, and a store that
//     hangs delays nobody past their deadline.

// Current returns the latest snapshot without doing anything, or nil before
// the first successful read.
func (c *Client) Current() *Snapshot { return c.current.Load() }

// Follow tells c that the caller follows the server's discovery for it
// until stop is called (once or more: the later calls do nothing). A
// follower promises to see every change of the server's discovery that
// an object shows (a CRD, an APIService, kubeatlas's served discovery API)
// as it is made, and to refresh c on each one it sees: discovery/watch
// follows while its watches are open and synced and its last refresh
// succeeded, and calls stop the moment it is not (its connection lost,
// backing off, its context ended). Changes that no object shows, an API
// server upgrade, reach c at the follower's own pace (discovery/watch's
// upgrade poll). c is followed while any caller follows it.
func (c *Client) Follow() (stop func()) {
	c.followers.Add(1)
	var once sync.Once
	return func() { once.Do(func() { c.followers.Add(-1) }) }
}

// FollowLeader tells c that leader, another client of the same server
// (with other credentials, say), is followed for it: c counts as followed
// (Following) while leader is followed (Follow; not through a leader of
// its own) and c's current snapshot holds the same content as leader's
// (the same generation, or documents with the same ETags, which c's own
// requests were answered with; behind a balancer over servers that
// disagree, a union of views with the same ETags, mixed.go). A change leader's follower sees refreshes
// leader, and its new content ends c's following at once, with no request
// and no callback, until a refresh of c's own (the next lookup that needs
// it: a miss, a lookup without a version) shows c the same content. So
// one watch vouches for the clients of every identity on a server (package
// shared), and a client that is not looked at sends nothing. What c sees
// but leader does not (an aggregated API server that shows c another
// view) keeps their contents apart, and c is then not followed through
// leader. A refresh of c that reads the content leader holds is not asked
// again on new connections (as a change is, to tell servers that
// disagree apart: mixed.go), since leader's refresh asked. It lasts until stop is called (once or more: the later calls do
// nothing); c may have several leaders at once.
func (c *Client) FollowLeader(leader *Client) (stop func()) {
	if leader == nil || leader == c {
		return func() {}
	}
	n := c.leaders.add(leader)
	return func() {
		if n.stopped.CompareAndSwap(false, true) {
			c.leaders.remove(n.c)
		}
	}
}

// Following says whether c is followed now (Follow, or FollowLeader's
// leader with the same content): then c is refreshed on every change a
// follower sees, or shows the follower's current content, and a reader
// that would otherwise revalidate c on a timer to catch changes none of
// its lookups tells it of (restmapper's lookups without a version) need
// not. One atomic load, and a few more for each leader.
func (c *Client) Following() bool {
	return c.followers.Load() > 0 || c.leaderHolds(c.current.Load())
}

// LeaderLacks says whether a followed leader of c (FollowLeader) holds
// content other than c's current snapshot's in which gvr is not served
// while c's serves it, and that content's generation. An answer c would
// give with gvr (a REST mapping with a version) is then what the leader's
// watch saw the server stop serving: a CRD deleted, a version removed or
// no longer served. Such a lookup should prove c's view with c's own
// requests before answering (restmapper does, once per leader
// generation); a lookup whose resource the leader still serves needs no
// request, as nothing it answers changed. It tells the caller nothing of
// the leader's content but whether gvr is in it; no request, and nothing
// is allocated.
func (c *Client) LeaderLacks(gvr schema.GroupVersionResource) (generation uint64, lacks bool) {
	if c.followers.Load() > 0 {
		return 0, false
	}
	s := c.current.Load()
	if s == nil {
		return 0, false
	}
	ours := false // serves(s, gvr), once a leader holds other content
	for n := c.leaders.head.Load(); n != nil; n = n.next {
		l := n.c
		ls := l.current.Load()
		if l.followers.Load() == 0 || ls == nil || sameContent(ls, s) {
			continue
		}
		if !ours {
			if !serves(s, gvr) {
				return 0, false
			}
			ours = true
		}
		if !serves(ls, gvr) {
			return ls.Generation(), true
		}
	}
	return 0, false
}

// Throttled says whether the server has told c to wait: a 429 whose
// Retry-After has not passed (API Priority and Fairness throttling c's
// identity). Until it passes, a refresh sends nothing and fails at once
// with that 429, so a caller that refreshes on its own schedule (a
// lookup's miss, restmapper's) need not ask, nor count the answer against
// its budget. An atomic load and a read of the clock; nothing is
// allocated.
func (c *Client) Throttled() bool { return !c.http.HeldUntil().IsZero() }

// LeaderServesKind says whether c has a followed leader (FollowLeader,
// its watch running) and, if so, whether one of them holds content that
// serves gvk (in any version of its group when gvk.Version is empty) as
// a resource's kind. A lookup of c that finds no such kind again, while
// every followed leader, whose watch vouches for its content, lacks it
// too, has nothing to find in a refresh of c's own; when a leader serves
// it, c's view is behind (restmapper's repeated misses refresh only
// then, when c does not hold its leader's content: behind a balancer over
// servers of two versions, the leader's content joins both servers' views
// and the client's holds one, so it is not Following, and issue 47's
// soak found its identities refreshing at each repeated miss, about once
// a second each). Like LeaderLacks, it tells the caller nothing of the
// leader's content but whether gvk is in it; no request, and nothing is
// allocated.
func (c *Client) LeaderServesKind(gvk schema.GroupVersionKind) (followed, serves bool) {
	for n := c.leaders.head.Load(); n != nil; n = n.next {
		l := n.c
		ls := l.current.Load()
		if l.followers.Load() == 0 || ls == nil {
			continue
		}
		followed = true
		if servesKind(ls, gvk) {
			return true, true
		}
	}
	return followed, false
}

// servesKind says whether s lists a resource of kind gvk in its
// group-version (any version of the group when gvk.Version is empty).
func servesKind(s *Snapshot, gvk schema.GroupVersionKind) bool {
	g, ok := s.Group(gvk.Group)
	if !ok {
		return false
	}
	for i := range g.Versions {
		v := &g.Versions[i]
		if gvk.Version != "" && v.Version != gvk.Version {
			continue
		}
		for j := range v.Resources {
			if v.Resources[j].Kind.Kind == gvk.Kind {
				return true
			}
		}
	}
	return false
}

// serves says whether s lists gvr (its plural name, as a REST mapping's
// Resource names it).
func serves(s *Snapshot, gvr schema.GroupVersionResource) bool {
	v, ok := s.Version(gvr.GroupVersion())
	if !ok {
		return false
	}
	for i := range v.Resources {
		if v.Resources[i].Name == gvr.Resource {
			return true
		}
	}
	return false
}

// leaderShows says whether a followed leader (FollowLeader) holds s's
// content while c has seen its servers agree: a change the leader's
// follower saw and its own refresh confirmed (mixed.go's resample
// included), not a server that disagrees, so c's refresh does not ask
// again on new connections. Only the refresh machine calls it (it reads
// c.views, as observe does).
func (c *Client) leaderShows(s *Snapshot) bool {
	return c.views.history == nil && c.leaderHolds(s)
}

// leaderHolds says whether a leader of c (FollowLeader) is followed and
// holds s's content.
func (c *Client) leaderHolds(s *Snapshot) bool {
	for n := c.leaders.head.Load(); n != nil; n = n.next {
		if l := n.c; l.followers.Load() > 0 && sameContent(l.current.Load(), s) {
			return true
		}
	}
	return false
}

// sameContent says whether a and b hold the same discovery: the same
// content, or documents with the same ETags, each checked against its
// ETag (Surfaces) and complete (content that came back after another is
// renumbered, so the generation alone would part them), or unions of
// disagreeing servers' views (mixed.go) that join views with the same
// ETags: behind a balancer over servers of two versions, a leader and
// its follower each join the two servers' views in a union of their
// own, and issue 47's soak found the follower never Following while two
// versions ran (each of its lookups that needed it proved its view,
// four requests a refresh).
func sameContent(a, b *Snapshot) bool {
	if a == nil || b == nil {
		return false
	}
	if a.content == b.content {
		return true
	}
	ka, okA := a.content.key()
	kb, okB := b.content.key()
	return okA && okB && ka == kb || sameViewKeys(a.content.of, b.content.of)
}

// sameViewKeys says whether unions' views a and b (content.of) are views of
// the same documents, each keyed (content.key): nothing is allocated.
func sameViewKeys(a, b []*content) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for _, x := range a {
		kx, ok := x.key()
		if !ok {
			return false
		}
		if !slices.ContainsFunc(b, func(y *content) bool { ky, ok := y.key(); return ok && ky == kx }) {
			return false
		}
	}
	return true
}

// leaders is FollowLeader's list: written under mu, read with one atomic
// load (Following is on every lookup's path) and a walk. Its nodes are
// never changed once listed (but for the flag of the stop that holds
// each, which the list does not read): a removal copies those before the
// one it drops. A node is 24 bytes, and FollowLeader's
// stop holds it and the follower; a slice and its header were 32 bytes
// more of each follower (package shared's identities).
type leaders struct {
	mu   sync.Mutex
	head atomic.Pointer[leaderNode] // nil: none
}

// leaderNode is one FollowLeader call's entry.
type leaderNode struct {
	c       *Client
	next    *leaderNode
	stopped atomic.Bool // its stop was called (once or more)
}

func (l *leaders) add(c *Client) *leaderNode {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := &leaderNode{c: c, next: l.head.Load()}
	l.head.Store(n)
	return n
}

// remove drops one of c's entries (FollowLeader may be called twice with
// one leader, and each stop drops one).
func (l *leaders) remove(c *Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var before []*leaderNode
	n := l.head.Load()
	for ; n != nil && n.c != c; n = n.next {
		before = append(before, n)
	}
	if n == nil {
		return
	}
	rest := n.next
	for i := len(before) - 1; i >= 0; i-- {
		rest = &leaderNode{c: before[i].c, next: rest} // a copy: its stop's flag stays in the one its stop holds
	}
	l.head.Store(rest)
}

// Load reads the snapshot the disk cache holds (WithDiskCache) and
// publishes it, as the first Snapshot or Refresh would, but sends no
// request: it returns the current snapshot afterwards, nil when neither
// the disk nor the server has given one (an empty cache, or no disk
// cache), and ctx's error if ctx ended first. The disk is read once per
// client, whoever asks first. A program that wants to know what it
// starts from before it reads the server (an offline CLI, a fleet that
// prepares a cold start) calls it. What a store other than a
// *diskcache.Cache holds is not published before the server has confirmed
// it (see WithDiskCache): Load reads it, for the first Snapshot or
// Refresh to confirm, and publishes nothing.
func (c *Client) Load(ctx context.Context) (*Snapshot, error) {
	err := c.warmStart(ctx)
	return c.current.Load(), err
}

// Snapshot returns the latest snapshot, reading discovery first if there is
// none. When the snapshot is older than the max age it is returned at once
// and revalidated in the background. The error is the snapshot's own
// (Snapshot.Err) or, without a snapshot, why none could be read.
//
// Snapshot waits for the network in two cases only: when there is no
// snapshot (also after a warm start from a store other than a
// *diskcache.Cache, whose snapshot the server confirms first: two 304s
// when nothing changed), and once after a warm start (WithDiskCache) from
// a snapshot older than the max age, which is revalidated before it is
// answered from (two 304s when nothing changed). Each waits at most one refresh, bounded
// by ctx and WithRefreshTimeout. When that refresh fails, the persisted
// snapshot is returned with the failure in its RefreshError, and no later
// call waits for it again. After a failed refresh, the next background one
// starts no sooner than the max age (at least a second) later, so that a
// dead server does not get a request per call.
func (c *Client) Snapshot(ctx context.Context) (*Snapshot, error) {
	s := c.current.Load()
	if s == nil {
		if err := c.warmStart(ctx); err != nil {
			return nil, err
		}
		if s = c.current.Load(); s == nil {
			// Any read will do: there is nothing older to be newer than.
			return c.machine.wait(ctx, false)
		}
	}
	now := c.opts.clock.Now()
	if now.Sub(s.validated) > c.opts.maxAge {
		switch {
		case s.FromDisk() && s.RefreshError() == nil:
			r, err := c.Refresh(ctx)
			if r != nil && r.RefreshError() != nil {
				err = r.err // the failure is told by the snapshot
			}
			return r, err
		case s.RefreshError() == nil || now.Sub(time.Unix(0, c.failedAt.Load())) >= max(c.opts.maxAge, time.Second):
			c.machine.background()
		}
	}
	c.stats.cacheHits.Add(1)
	return s, s.err
}

// Refresh revalidates discovery now: a conditional request per endpoint,
// so an unchanged cluster costs two 304s and no decoding. It returns a
// snapshot read after the call began: a refresh already under way (which
// may have read the server before a change the caller must see) is not
// taken, but the callers that arrive while it runs share the one that
// follows it. Each caller waits at most until its ctx ends (it then gets
// the current snapshot and ctx's error), and a refresh that every caller
// has left is cancelled. With WithDiskCache, the first Refresh revalidates
// the persisted snapshot. A failed refresh keeps the previous snapshot's
// content current, marked with the failure (Snapshot.RefreshError), and
// returns it with the error.
func (c *Client) Refresh(ctx context.Context) (*Snapshot, error) {
	// Revalidate what is on disk rather than read it all again.
	if err := c.warmStart(ctx); err != nil {
		return c.current.Load(), err
	}
	return c.machine.wait(ctx, true)
}

// warmStart publishes what the disk cache holds (WithDiskCache) before the
// first read of the server: see loadDisk (persist.go).
func (c *Client) warmStart(ctx context.Context) error {
	if c.opts.disk == nil {
		return nil
	}
	return c.loadDisk(ctx)
}

// refresher is the refresh machine: the client's work (read, join views,
// publish: Client.refresh, then Client.persist) run one at a time, and
// who waits for which run. It reaches the client's snapshot, which
// publish alone writes, and its refresh timeout through one pointer
// (three fields were 24 bytes of each client more).
type refresher struct {
	c *Client

	mu        sync.Mutex
	began     uint64         // runs started
	published uint64         // the run whose snapshot is current; 0 before any
	running   *run           // the run under way, if any
	next      *run           // the run that starts when running ends, if any
	subs      *[]*subscriber // told of each publication; nil before the first Subscribe (a slice is 16 bytes of each client more)
}

// run is one refresh and the callers that wait for it.
type run struct {
	seq     uint64 // order of starting; 0 while queued
	base    context.Context
	done    chan struct{}
	snap    *Snapshot
	err     error
	waiters int
	pinned  bool // someone wants it to finish although nobody waits (background)
	cancel  context.CancelFunc
	// persisted, set before done is closed, is closed once the run's
	// snapshot is written to the disk cache (nil: no write to wait for).
	persisted <-chan struct{}
}

// wait waits for a run that began after this call (fresh) or for any run
// (!fresh), starting one if needed, until ctx ends.
func (r *refresher) wait(ctx context.Context, fresh bool) (*Snapshot, error) {
	r.mu.Lock()
	x := r.next
	switch {
	case x != nil:
	case r.running != nil && !fresh:
		x = r.running
	case r.running != nil:
		x = &run{base: context.WithoutCancel(ctx), done: make(chan struct{})}
		r.next = x
	default:
		x = &run{base: context.WithoutCancel(ctx), done: make(chan struct{})}
		r.startLocked(x)
	}
	x.waiters++
	r.mu.Unlock()
	select {
	case <-x.done:
		// The run has published. Its disk write is waited for, so that a
		// program that refreshes and exits leaves the snapshot on disk,
		// but a slow store is not the refresh's failure: when ctx ends
		// first, or the write takes longer than a refresh may, the result
		// stands.
		if x.persisted != nil {
			t := time.NewTimer(r.c.opts.refreshTimeout)
			defer t.Stop()
			select {
			case <-x.persisted:
			case <-ctx.Done():
			case <-t.C:
			}
		}
		return x.snap, x.err
	case <-ctx.Done():
		r.leave(x)
		return r.c.current.Load(), ctx.Err()
	}
}

// background joins the run under way, or starts one that runs to
// completion (or its timeout) with nobody waiting.
func (r *refresher) background() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.running != nil:
		r.running.pinned = true
	case r.next != nil:
		r.next.pinned = true
	default:
		r.startLocked(&run{base: context.Background(), done: make(chan struct{}), pinned: true})
	}
}

// leave is a caller of x giving up. The last one out of a run that was
// not pinned cancels it (or, queued, drops it).
func (r *refresher) leave(x *run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if x.waiters--; x.waiters > 0 || x.pinned {
		return
	}
	switch {
	case r.next == x:
		r.next = nil
	case x.cancel != nil:
		x.cancel()
	}
}

// startLocked starts x; r.mu is held.
func (r *refresher) startLocked(x *run) {
	r.began++
	x.seq = r.began
	ctx, cancel := context.WithTimeout(x.base, r.c.opts.refreshTimeout)
	x.cancel = cancel
	r.running = x
	go r.run(ctx, x)
}

func (r *refresher) run(ctx context.Context, x *run) {
	defer x.cancel()
	snap, published, err := r.c.refresh(ctx, x.seq)
	r.mu.Lock()
	if r.running == x {
		r.running = nil
	}
	if r.next != nil && r.running == nil {
		n := r.next
		r.next = nil
		r.startLocked(n)
	}
	r.mu.Unlock()
	if published {
		x.persisted = r.c.persist(snap, x.seq)
	}
	x.snap, x.err = snap, err
	close(x.done)
}

// refresh is the machine's work: it reads the server and publishes what
// it read, as run seq. It returns the snapshot its callers get and whether
// it published one to persist (only with a disk cache).
func (c *Client) refresh(ctx context.Context, seq uint64) (*Snapshot, bool, error) {
	start := time.Now()
	prev := c.current.Load()
	s, err := c.fetch(ctx, prev)
	c.stats.refreshes.Add(1)
	c.stats.refreshNanos.Add(int64(time.Since(start)))
	if s == nil {
		c.stats.refreshErrors.Add(1)
		c.failures(true).refreshFailed(c.opts.logger, err)
		if prev == nil || errors.Is(ctx.Err(), context.Canceled) {
			// Nothing to mark, or a run that everyone left: that is not
			// the server's failure (running out of time is).
			return prev, false, err
		}
		c.failedAt.Store(c.opts.clock.Now().UnixNano())
		marked := *prev
		marked.odd = &snapshotOdd{fromDisk: prev.FromDisk(), refreshErr: err}
		pub, _ := c.machine.publish(seq, &marked)
		return pub, false, err
	}
	if l := c.failures(false); l != nil {
		l.refreshFailed(c.opts.logger, nil)
	}
	if prev != nil && !c.leaderShows(s) {
		// Servers behind the URL that disagree (mixed.go) show on a
		// second read at the earliest: a first has nothing to differ from.
		s = c.views.observe(ctx, prev, s)
	}
	pub, ok := c.machine.publish(seq, s)
	if c.disk != nil {
		c.disk.unconfirmed.Store(nil) // confirmed, or replaced by what the server sent
	}
	if !ok {
		return pub, false, pub.err
	}
	if l := c.failures(failedVersions(pub)); l != nil {
		l.versionsFailed(c.opts.logger, pub)
	}
	return pub, c.opts.disk != nil, err
}

// publish makes s the current snapshot, unless a run that began after seq
// has published (then it returns the current one and false): the one
// place where the client's current snapshot changes. Subscribers are
// handed the change here, in publication order, and called later on
// goroutines of their own. Seq 0 is the warm start, which publishes only
// where nothing has been.
func (r *refresher) publish(seq uint64, s *Snapshot) (*Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.c.current.Load()
	if seq == 0 && prev != nil || seq != 0 && seq < r.published {
		return prev, false
	}
	if prev != nil && s.content != prev.content && s.generation <= prev.generation {
		// Content seen before (a surface a fleet holds, a view of a
		// disagreeing server coming back) has the number it was given
		// then; a reader must not see generations go back.
		s.content = s.content.renumbered()
	}
	r.published = seq
	r.c.current.Store(s)
	if prev == nil || prev.generation != s.generation {
		for _, sub := range r.subscribers() {
			sub.offer(s)
		}
	}
	return s, true
}

// subscriber is one Subscribe call's state. Its changes are delivered by
// a goroutine of its own, started when a snapshot is offered and ending
// when it has caught up, so that an idle client runs none: the refresh
// that published never waits for a subscriber, and subscribers never wait
// for each other.
type subscriber struct {
	fn   func(Change)
	gate gate.Gate // closed by unsubscribe; each call of fn is made through it

	mu      sync.Mutex
	seen    *Snapshot // the New of the last change delivered (an empty change leaves it)
	latest  *Snapshot // the newest snapshot offered, not yet delivered
	running bool      // a delivery goroutine is under way
}

// offer hands the subscriber a newly published snapshot. It is called
// under the refresher's lock, in publication order, and never blocks.
func (s *subscriber) offer(snap *Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latest = snap
	if !s.running {
		s.running = true
		go s.deliver()
	}
}

// deliver calls fn with the change from what the subscriber saw last to
// the newest snapshot offered, until it has caught up (or unsubscribe).
// Snapshots offered while fn runs are coalesced into the next call: each
// change's Old is the New of the change before it.
func (s *subscriber) deliver() {
	for {
		s.mu.Lock()
		next := s.latest
		if next == nil {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.latest = nil
		old := s.seen
		s.mu.Unlock()
		change := Diff(old, next)
		if change.Empty() && old != nil {
			// The same API as what the subscriber saw (content that
			// came back): nothing to tell, and Old stays what it saw.
			continue
		}
		if !s.call(change) {
			s.mu.Lock()
			s.running = false
			s.mu.Unlock()
			return
		}
	}
}

// call calls fn unless the subscriber has unsubscribed.
func (s *subscriber) call(change Change) bool {
	if !s.gate.Enter() {
		return false
	}
	defer s.gate.Exit()
	s.mu.Lock()
	s.seen = change.New
	s.mu.Unlock()
	s.fn(change)
	return true
}

// Subscribe calls fn with a Change each time the client publishes a
// snapshot of different content (from any caller's refresh, a background
// revalidation, Poll, Watch, or the disk cache at a warm start). A
// subscriber made before the first snapshot gets it as a Change whose Old
// is nil; one made later gets changes from the snapshot current when it
// subscribed.
//
// fn runs after the snapshot is published (Current and Snapshot already
// return it), on a goroutine that is neither the refresh's nor another
// subscriber's, one call at a time and in publication order. A slow fn
// delays nobody: changes published while it runs are joined into one,
// whose Old is the New of the change before it, so fn never sees a gap or
// a change out of order, only fewer of them. fn may call anything on the
// client: Snapshot, Refresh, a restmapper.Mapper over it (hit or miss),
// and unsubscribe.
//
// The returned function unsubscribes. When it returns, fn is not running
// and is not called again, so that what fn writes to (a channel, say) may
// be closed: it waits for a call under way on another goroutine to
// return. Called from fn itself, it returns at once and fn is not called
// again once it returns. (So fn must not wait for another goroutine's
// unsubscribe of this subscriber, nor unsubscribe a subscriber whose fn
// waits for this one.)
func (c *Client) Subscribe(fn func(Change)) (unsubscribe func()) {
	r := &c.machine
	s := &subscriber{fn: fn}
	r.mu.Lock()
	s.seen = c.current.Load()
	if r.subs == nil {
		r.subs = new([]*subscriber)
	}
	*r.subs = append(*r.subs, s)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		*r.subs = slices.DeleteFunc(*r.subs, func(x *subscriber) bool { return x == s })
		r.mu.Unlock()
		s.gate.Close()
	}
}

// subscribers are r's subscribers, under r.mu.
func (r *refresher) subscribers() []*subscriber {
	if r.subs == nil {
		return nil
	}
	return *r.subs
}

// failureLog logs failures when they start and stop, not on every
// refresh, so that a poller against a dead server, or a long-dead
// aggregated API server, does not flood the log. It decides what to log
// under mu and logs after unlocking it: a handler is the user's code.
type failureLog struct {
	mu             sync.Mutex
	lastFailed     map[string]string // group-version -> error text last logged
	lastRefreshErr string            // the refresh failure last logged
}

// failures is c's failure log; nil when none was made and create is
// false (nothing failed: nothing to log, or to remember).
func (c *Client) failures(create bool) *failureLog {
	if l := c.log.Load(); l != nil || !create {
		return l
	}
	c.log.CompareAndSwap(nil, &failureLog{})
	return c.log.Load()
}

// failedVersions says whether s has group-versions that failed.
func failedVersions(s *Snapshot) bool {
	pe, ok := s.err.(*PartialError)
	return ok && len(pe.Errors) > 0
}

// refreshFailed logs a failed refresh when the reason changes, and once
// when refreshes work again (err nil).
func (l *failureLog) refreshFailed(logger *slog.Logger, err error) {
	msg := ""
	if err != nil {
		msg = fmt.Sprint(err)
	}
	l.mu.Lock()
	last := l.lastRefreshErr
	l.lastRefreshErr = msg
	l.mu.Unlock()
	switch {
	case msg == last:
	case err == nil:
		logger.Info("discovery refresh works again")
	default:
		logger.Warn("discovery refresh failed", "err", err)
	}
}

// versionsFailed logs a group-version when it starts or stops failing.
func (l *failureLog) versionsFailed(logger *slog.Logger, s *Snapshot) {
	var now map[string]string // nil when none failed: a client keeps no empty map
	if failedVersions(s) {
		pe := s.err.(*PartialError)
		now = make(map[string]string, len(pe.Errors))
		for _, gve := range pe.Errors {
			now[gve.GroupVersion.String()] = gve.Err.Error()
		}
	}
	l.mu.Lock()
	before := l.lastFailed
	l.lastFailed = now
	l.mu.Unlock()
	for _, gv := range slices.Sorted(maps.Keys(now)) {
		if msg := now[gv]; before[gv] != msg {
			logger.Warn("discovery: group-version not current", "groupVersion", gv, "err", msg)
		}
	}
	for _, gv := range slices.Sorted(maps.Keys(before)) {
		if _, still := now[gv]; !still {
			logger.Info("discovery: group-version current again", "groupVersion", gv)
		}
	}
}
