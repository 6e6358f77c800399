package shared

import (
	"context"
	"slices"

	"github.com/kubeatlas/kubeatlas/discovery/watch"
)

// One watch per server. The clients of a server (one per identity) are
// its members; one of them, the leader, runs the server's discovery/watch
// with its own credentials, and every other member follows it
// (discovery.Client.FollowLeader): a member counts as followed while the
// watch follows the leader and the member holds the leader's content. A
// change the watch sees refreshes the leader, whose new content marks
// every other member's view stale at once, with no request, no callback
// and no goroutine per member; a member proves its view again with its
// own conditional requests at its next lookup that needs it (a miss, or
// a lookup without a version, restmapper's freshness), and one that is
// not looked at sends nothing. Nothing but "followed or not" crosses
// identities: no credential, no connection, no content.
//
// The leader is any member whose credentials may watch CRDs and
// APIServices: the first to come, and when the watch tells it may not
// (watch.WithOnForbidden), another member not refused yet; a newcomer is
// tried while the leader is refused. With no member that may watch, the
// refused leader's run polls (watch.WithFallbackPoll), one poller for the
// server; its members are then not followed (a poll does not see a
// change as it is made), and prove their views as without a watch. When
// the leader is forgotten, another member leads, a new run of the watch
// with its credentials.
//
// Everything here is under Registry.mu, and none of it is I/O or the
// user's code: FollowLeader and its stop are a few atomic operations,
// starting a run is a goroutine, ending one is a context's cancel.

// lead is one run of a server's watch, over its leader's client.
type lead struct {
	c       *client
	watcher *watch.Watcher
	cancel  context.CancelFunc
	done    chan struct{} // closed when the run has returned
}

// watchOptions is the registry's options for a watch, with onForbidden
// told of a 403 and onChange of each change it sees (New tries them, so
// that a user's WithOnForbidden or WithOnChange is its error).
func watchOptions(o options, onForbidden, onChange func()) []watch.Option {
	return append(slices.Clip(o.watchOpts), watch.WithOnForbidden(onForbidden), watch.WithOnChange(onChange))
}

// joinLocked makes c, just held, a member of its server's watch: it
// leads when there is no leader, or when the leader's credentials were
// refused (c's may watch), and follows the leader otherwise.
func (r *Registry) joinLocked(c *client) {
	if r.opts.noWatch {
		return
	}
	s := c.srv
	if s.members == nil {
		s.members = map[*client]struct{}{}
	}
	s.members[c] = struct{}{}
	if s.lead == nil || s.lead.c.refused {
		r.leadLocked(s, c)
		return
	}
	c.unfollow = c.dc.FollowLeader(s.lead.c.dc)
}

// leaveLocked takes c, being forgotten, out of its server's watch: its
// objects are no longer followed, and when c led, another member leads
// (one not refused, if any), or the watch ends with the last member.
func (r *Registry) leaveLocked(c *client) {
	if r.opts.noWatch {
		return
	}
	s := c.srv
	delete(s.members, c)
	c.unfollow()
	c.unfollow = func() {}
	if s.lead == nil || s.lead.c != c {
		return
	}
	var next *client
	for m := range s.members {
		if next == nil || next.refused && !m.refused {
			next = m
		}
	}
	if next != nil {
		r.leadLocked(s, next)
		return
	}
	s.lead.cancel()
	s.lead = nil
}

// leadLocked makes c the leader of s: the previous run ends, a run over
// c's client starts, and every other member follows c.
func (r *Registry) leadLocked(s *server, c *client) {
	prev := s.lead
	if prev != nil {
		prev.cancel()
	}
	for m := range s.members {
		m.unfollow()
		m.unfollow = func() {}
		if m != c {
			m.unfollow = m.dc.FollowLeader(c.dc)
		}
	}
	l := &lead{c: c, done: make(chan struct{})}
	w, err := watch.New(c.dc, watchOptions(r.opts, func() { r.refuse(s, l) }, func() { r.changed(s) })...)
	if err != nil {
		// New tried these options: not reached. Without a watch the
		// members prove their views as with WithoutWatch.
		s.lead = nil
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.watcher, l.cancel = w, cancel
	s.lead = l
	go func() {
		defer close(l.done)
		if prev != nil {
			// One watch at a time: the run before, cancelled, returns
			// within a moment (watch.Run's promise), and a run ended
			// while waiting keeps the order for the one after it.
			<-prev.done
		}
		if ctx.Err() == nil {
			_ = w.Run(ctx)
		}
	}()
}

// refuse is told by l's run that its leader's credentials may not watch:
// another member not refused yet leads, if any; else l's run polls.
func (r *Registry) refuse(s *server, l *lead) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.lead != l {
		return // superseded
	}
	l.c.refused = true
	for m := range s.members {
		if !m.refused {
			r.leadLocked(s, m)
			return
		}
	}
}

// changed is told by the server's watch of a change it saw (a CRD's new
// schema, which discovery does not show, included): every member's
// OpenAPI client reads its root again at its next call that needs it,
// at most once a second, with its own credentials (openapi3.Client.
// Changed, a mark that sends nothing); a member not used sends nothing,
// and one whose OpenAPI client is not built yet needs no mark (it reads
// the root at its first use).
func (r *Registry) changed(s *server) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for m := range s.members {
		if oa := m.openapi.Load(); oa != nil {
			oa.Changed()
		}
	}
}
