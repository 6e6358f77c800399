package watch

import (
	"context"
	"errors"
	"sync"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// follower holds discovery.Client.Follow for one run of informers
// (runInformers) exactly while the run would see a change and refresh
// the client for it:
//   - every informer has synced its first list (events come from then on);
//   - every informer has a watch open, past the initial list it streams
//     (a watch-list), so it is not listing, backing off or reconnecting;
//   - the last refresh of the run's loop succeeded, and the first one that
//     began after the informers synced has (it catches what changed
//     before their lists, which no event tells of);
//   - no CRD's change is overdue (the watcher's settle): the server is not
//     behind its own objects.
//
// Each condition's end stops following at once; the run's end stops it
// for good. Its methods are called from the informers' watches, the sync
// goroutine and the loop; mu guards every field (Client.Follow and its
// stop are an atomic add each, not a callback).
type follower struct {
	c *discovery.Client

	mu       sync.Mutex
	streams  int    // informers, one stream each
	open     int    // streams with a watch open
	synced   bool   // every informer has synced
	current  bool   // the last refresh succeeded, and one began after synced
	behind   bool   // a CRD's change is overdue
	ended    bool   // the run is over: never again
	stopping func() // Client.Follow's stop, while following
}

func newFollower(c *discovery.Client) *follower { return &follower{c: c} }

// update applies change and follows, or stops, as the state now says.
func (f *follower) update(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
	want := !f.ended && f.synced && f.current && f.open == f.streams && !f.behind
	switch {
	case want && f.stopping == nil:
		f.stopping = f.c.Follow()
	case !want && f.stopping != nil:
		f.stopping()
		f.stopping = nil
	}
}

// stream is one informer's: its watches open and close (opened).
func (f *follower) stream() *stream {
	f.update(func() { f.streams++ })
	return &stream{f: f}
}

// sync records that every informer has synced.
func (f *follower) sync() { f.update(func() { f.synced = true }) }

// refresh refreshes the client for the run's loop and records how it
// ended, and whether it began after the informers synced (one that did
// catches up on what changed before their lists).
func (f *follower) refresh(ctx context.Context) {
	f.mu.Lock()
	afterSync := f.synced
	f.mu.Unlock()
	_, err := f.c.Refresh(ctx)
	f.refreshed(afterSync, err)
}

// refreshed records a refresh of the loop, begun after the informers
// synced (afterSync) or not, and how it ended. One that read the server
// but some group-versions failed (a PartialError) counts as a success:
// a revalidation by anyone else would fail the same way.
func (f *follower) refreshed(afterSync bool, err error) {
	var partial *discovery.PartialError
	ok := err == nil || errors.As(err, &partial)
	f.update(func() {
		if !ok {
			f.current = false
		} else if afterSync {
			f.current = true
		}
	})
}

// setBehind records whether a CRD's change is overdue.
func (f *follower) setBehind(behind bool) { f.update(func() { f.behind = behind }) }

// end stops following for good.
func (f *follower) end() { f.update(func() { f.ended = true }) }

// stream tracks whether one informer's watch is open. Its fields are
// guarded by its follower's mu.
type stream struct {
	f    *follower
	id   uint64 // of the last watch opened
	open bool   // that watch is open
}

// opened records a watch of the stream as open and returns what records
// it closed: called when it ends, as often as need be; once a later watch
// has opened, it does nothing (an old watch may end after its successor
// opened).
func (s *stream) opened() (closed func()) {
	var id uint64
	s.f.update(func() {
		s.id++
		id = s.id
		if !s.open {
			s.open = true
			s.f.open++
		}
	})
	return func() {
		s.f.update(func() {
			if s.id == id && s.open {
				s.open = false
				s.f.open--
			}
		})
	}
}
