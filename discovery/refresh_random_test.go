package discovery_test

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

var machineRounds = flag.Int("machine-rounds", 10000, "rounds of TestRefreshMachineRandomized")

// movingCluster is an aggregated discovery server, in the test's bubble,
// whose API moves on: each change serves a group named after the
// cluster's version (and apps/Deployment always), so a snapshot says which
// version of the cluster it shows. Requests wait a random while (or until
// their context ends), and a few fail.
type movingCluster struct {
	mu      sync.Mutex
	version int
	docs    map[string][2]string // path -> body, ETag
	rng     *rand.Rand
}

func newMovingCluster(seed uint64) *movingCluster {
	m := &movingCluster{rng: rand.New(rand.NewPCG(seed, 1))}
	m.change()
	return m
}

func movingGroup(version int) string { return fmt.Sprintf("v%d.moving.example.com", version) }

// change moves the cluster to its next version and returns it.
func (m *movingCluster) change() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
	resource := func(name, kind string) apidiscoveryv2.APIResourceDiscovery {
		return apidiscoveryv2.APIResourceDiscovery{Resource: name, Scope: apidiscoveryv2.ScopeNamespace, ResponseKind: &metav1.GroupVersionKind{Kind: kind}, Verbs: []string{"get", "list"}}
	}
	group := func(name string, resources ...apidiscoveryv2.APIResourceDiscovery) apidiscoveryv2.APIGroupDiscovery {
		g := apidiscoveryv2.APIGroupDiscovery{Versions: []apidiscoveryv2.APIVersionDiscovery{{Version: "v1", Resources: resources}}}
		g.Name = name
		return g
	}
	doc := func(groups ...apidiscoveryv2.APIGroupDiscovery) [2]string {
		list := apidiscoveryv2.APIGroupDiscoveryList{Items: groups}
		list.APIVersion, list.Kind = "apidiscovery.k8s.io/v2", "APIGroupDiscoveryList"
		b, err := json.Marshal(&list)
		if err != nil {
			panic(err)
		}
		return [2]string{string(b), fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(b)))}
	}
	m.docs = map[string][2]string{
		"/api":  doc(group("", resource("pods", "Pod"))),
		"/apis": doc(group("apps", resource("deployments", "Deployment")), group(movingGroup(m.version), resource("things", "Thing"))),
	}
	return m.version
}

func (m *movingCluster) current() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version
}

func (m *movingCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	wait := time.Duration(m.rng.IntN(300)) * time.Millisecond
	fail := m.rng.IntN(50) == 0
	m.mu.Unlock()
	select {
	case <-time.After(wait):
	case <-r.Context().Done():
		return
	}
	m.mu.Lock()
	d, ok := m.docs[r.URL.Path]
	m.mu.Unlock()
	switch {
	case !ok:
		http.NotFound(w, r)
	case fail:
		http.Error(w, "unavailable", http.StatusInternalServerError)
	case r.Header.Get("If-None-Match") == d[1]:
		w.WriteHeader(http.StatusNotModified)
	default:
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		w.Header().Set("ETag", d[1])
		_, _ = w.Write([]byte(d[0]))
	}
}

// handlerTransport serves requests with a handler in the caller's
// goroutine: no sockets, so everything runs inside a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// randomStore is a store whose reads and writes take a random while, and
// now and then hang for up to a minute: a store another host serves, or a
// disk that stalls. It must delay no caller past its deadline, nor any
// publication.
func randomStore(seed uint64) *diskcachetest.Memory {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 2))
	return &diskcachetest.Memory{Before: func(string, diskcache.Key) {
		mu.Lock()
		d := time.Duration(rng.IntN(400)) * time.Millisecond
		if rng.IntN(40) == 0 {
			d = time.Duration(10+rng.IntN(50)) * time.Second
		}
		mu.Unlock()
		time.Sleep(d)
	}}
}

// comer is a subscriber that comes and goes: it writes each change to a
// channel that whoever unsubscribes it closes right after (the usual
// pattern, which panics on a send after the close), and may unsubscribe
// itself from its callback. It checks what unsubscribe promises.
type comer struct {
	t      *testing.T
	unsub  atomic.Pointer[func()]
	ch     chan discovery.Change
	gone   atomic.Bool // set once an unsubscribe from outside returned
	quit   atomic.Bool // set once fn unsubscribed itself
	calls  atomic.Int64
	drain  chan struct{}        // closed when the reader of ch has seen it closed
	leaves func() bool          // whether this call unsubscribes from inside
	dawdle func() time.Duration // how long this call takes
}

func (c *comer) fn(ch discovery.Change) {
	if c.gone.Load() {
		c.t.Errorf("a subscriber was called after its unsubscribe returned")
	}
	if c.quit.Load() {
		c.t.Errorf("a subscriber was called again after it unsubscribed from its callback")
	}
	c.calls.Add(1)
	time.Sleep(c.dawdle())
	c.ch <- ch // buffered, and drained: panics if the channel is closed
	if c.leaves() {
		if u := c.unsub.Load(); u != nil {
			(*u)()
			c.quit.Store(true)
		}
	}
	if c.gone.Load() {
		c.t.Errorf("an unsubscribe returned while the subscriber's call was under way on another goroutine")
	}
}

// chain checks, as changes arrive, what a subscriber is promised: one
// first snapshot (Old nil) and it first, each Old the New before it,
// generations that grow, never a snapshot of two servers' views.
type chain struct {
	t     *testing.T
	mu    sync.Mutex
	last  *discovery.Snapshot
	calls int
}

func (c *chain) see(ch discovery.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.calls == 0 && ch.Old != nil:
		c.t.Errorf("a subscriber's first change has an Old snapshot")
	case c.calls > 0 && ch.Old == nil:
		c.t.Errorf("a subscriber was told a second first snapshot")
	case c.calls > 0 && ch.Old != c.last:
		c.t.Errorf("a change's Old (generation %d) is not the New of the change before (%d): a gap or a reordering", ch.Old.Generation(), c.last.Generation())
	}
	if c.last != nil && ch.New.Generation() <= c.last.Generation() {
		c.t.Errorf("a subscriber was told generation %d after %d", ch.New.Generation(), c.last.Generation())
	}
	if ch.New.Mixed() {
		c.t.Errorf("one server's progress was taken for disagreeing servers: a mixed snapshot")
	}
	c.last, c.calls = ch.New, c.calls+1
}

// shows is the version of the moving cluster a snapshot shows.
func shows(s *discovery.Snapshot) int {
	for v := 1; ; v++ {
		if _, ok := s.Group(movingGroup(v)); ok {
			return v
		}
		if v > 1<<20 {
			return 0
		}
	}
}

// TestRefreshMachineRandomized: many goroutines read, refresh (with
// random deadlines, which cancel, and without any), map (hits and misses),
// change the cluster, and subscribe and unsubscribe, against a server and
// a disk cache that are randomly slow (the store now and then hangs for up
// to a minute), while subscribers refresh, map, dawdle and unsubscribe
// themselves in their callbacks. On every observation: generations never
// go back for any reader; a Refresh that succeeds shows the cluster as of
// its call or later; no snapshot joins views (one server is not a
// disagreement); every call returns within its context, and one without a
// deadline within three refresh timeouts (the run under way, its own, and
// the wait for its disk write) however long the store hangs; no subscriber
// is called after its unsubscribe returned, nor is running on another
// goroutine then; subscribers get a chain with one first snapshot, and
// catch up. In a synctest bubble: the waits are of bubble time, and a call
// that returned "within its context" did so to the nanosecond.
func TestRefreshMachineRandomized(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const refreshTimeout = 2 * time.Second
		cluster := newMovingCluster(1)
		store := randomStore(2)
		hc := &http.Client{Transport: handlerTransport{cluster}}
		c, err := discovery.NewForHTTPClient(hc, "https://moving.invalid", discovery.WithDiskCache(store),
			discovery.WithRefreshTimeout(refreshTimeout), discovery.WithMaxAge(500*time.Millisecond), discovery.WithJSONOnly())
		if err != nil {
			t.Fatal(err)
		}
		m, err := restmapper.New(c, restmapper.WithMissRefreshInterval(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
		missing := schema.GroupKind{Group: "never.example.com", Kind: "Never"}

		// Subscribers: one refreshes from its callback, one maps, one is slow.
		var subRNG sync.Mutex
		rng := rand.New(rand.NewPCG(3, 3))
		randN := func(n int) int {
			subRNG.Lock()
			defer subRNG.Unlock()
			return rng.IntN(n)
		}
		refresher, mapper, slow := &chain{t: t}, &chain{t: t}, &chain{t: t}
		c.Subscribe(func(ch discovery.Change) {
			refresher.see(ch)
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(randN(1000))*time.Millisecond)
			defer cancel()
			_, _ = c.Refresh(ctx)
		})
		c.Subscribe(func(ch discovery.Change) {
			mapper.see(ch)
			if _, err := m.RESTMapping(deployment); err != nil {
				t.Errorf("Deployment from a subscriber: %v", err)
			}
			if _, err := m.RESTMapping(missing); !meta.IsNoMatchError(err) {
				t.Errorf("a missing kind from a subscriber: %v", err)
			}
		})
		c.Subscribe(func(ch discovery.Change) {
			slow.see(ch)
			time.Sleep(time.Duration(randN(3000)) * time.Millisecond)
		})

		// Subscribers that come and go, unsubscribed from outside by the
		// workers, or from inside by themselves.
		var comersMu sync.Mutex
		var comers []*comer
		subscribe := func() {
			k := &comer{t: t, ch: make(chan discovery.Change, 1), drain: make(chan struct{}),
				leaves: func() bool { return randN(8) == 0 }, dawdle: func() time.Duration { return time.Duration(randN(100)) * time.Millisecond }}
			go func() {
				defer close(k.drain)
				for ch := range k.ch {
					time.Sleep(time.Duration(randN(50)) * time.Millisecond)
					_ = ch
				}
			}()
			u := c.Subscribe(k.fn)
			k.unsub.Store(&u)
			comersMu.Lock()
			comers = append(comers, k)
			comersMu.Unlock()
		}
		unsubscribe := func(i int) bool {
			comersMu.Lock()
			if len(comers) == 0 {
				comersMu.Unlock()
				return false
			}
			k := comers[i%len(comers)]
			comers = slices.Delete(comers, i%len(comers), i%len(comers)+1)
			comersMu.Unlock()
			(*k.unsub.Load())()
			k.gone.Store(true)
			close(k.ch)
			<-k.drain
			return true
		}

		var rounds atomic.Int64
		var wg sync.WaitGroup
		const workers = 8
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w)+10, 4))
				var lastGen uint64
				observe := func(s *discovery.Snapshot, what string) {
					if s == nil {
						return
					}
					if s.Generation() < lastGen {
						t.Errorf("%s: generation %d after %d: went back", what, s.Generation(), lastGen)
					}
					if s.Mixed() {
						t.Errorf("%s: a mixed snapshot of one server", what)
					}
					lastGen = s.Generation()
				}
				for rounds.Add(1) <= int64(*machineRounds) {
					timeout := time.Duration(rng.IntN(800)) * time.Millisecond
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					start := time.Now()
					switch op := rng.IntN(13); {
					case op < 3:
						s, _ := c.Snapshot(ctx)
						observe(s, "Snapshot")
						if d := time.Since(start); d > timeout {
							t.Errorf("Snapshot returned %v after its start, past its context's %v", d, timeout)
						}
					case op < 6:
						asked := cluster.current()
						s, err := c.Refresh(ctx)
						observe(s, "Refresh")
						if d := time.Since(start); d > timeout {
							t.Errorf("Refresh returned %v after its start, past its context's %v", d, timeout)
						}
						if err == nil && shows(s) < asked {
							t.Errorf("a Refresh called at version %d returned a snapshot of version %d, older than its call", asked, shows(s))
						}
					case op < 7:
						observe(c.Current(), "Current")
					case op < 8:
						// A lookup waits at most for the refresh under way
						// and the one after it: a miss's, or a hit's without
						// a version past the mapper's interval.
						lookup := time.Now()
						_, err := m.RESTMapping(deployment)
						if c.Current() != nil && err != nil {
							t.Errorf("Deployment: %v", err)
						}
						if d := time.Since(lookup); d > 2*refreshTimeout {
							t.Errorf("a versionless hit took %v of bubble time, more than two refreshes", d)
						}
						lookup = time.Now()
						if _, err := m.RESTMapping(missing); err == nil {
							t.Errorf("a missing kind was found")
						}
						if d := time.Since(lookup); d > 2*refreshTimeout {
							t.Errorf("a miss took %v of bubble time, more than two refreshes", d)
						}
						observe(c.Current(), "Current after lookups")
					case op < 9:
						cluster.change()
					case op < 10:
						// No deadline: bounded by the refresh timeout alone,
						// whatever the store does.
						asked := cluster.current()
						s, err := c.Refresh(context.Background())
						observe(s, "Refresh without a deadline")
						if d := time.Since(start); d > 3*refreshTimeout {
							t.Errorf("a Refresh without a deadline returned after %v, more than three refresh timeouts", d)
						}
						if err == nil && shows(s) < asked {
							t.Errorf("a Refresh called at version %d returned a snapshot of version %d, older than its call", asked, shows(s))
						}
					case op < 11:
						comersMu.Lock()
						n := len(comers)
						comersMu.Unlock()
						if n < 16 {
							subscribe()
						}
					default:
						unsubscribe(rng.IntN(1 << 10))
					}
					cancel()
				}
			})
		}
		wg.Wait()
		for unsubscribe(0) {
		}
		// Quiet: every refresh, write (the store hangs a minute at most)
		// and delivery ends.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		cur := c.Current()
		if cur == nil {
			t.Fatal("no snapshot after all the rounds")
		}
		for name, ch := range map[string]*chain{"refreshing": refresher, "mapping": mapper, "slow": slow} {
			ch.mu.Lock()
			if ch.last == nil || !discovery.Diff(ch.last, cur).Empty() {
				t.Errorf("the %s subscriber has not caught up with the current snapshot", name)
			}
			t.Logf("the %s subscriber was called %d times", name, ch.calls)
			ch.mu.Unlock()
		}
		st := c.Stats()
		t.Logf("%d rounds, cluster version %d, current shows %d; %d refreshes, %d requests, %d 304s", *machineRounds, cluster.current(), shows(cur), st.Refreshes, st.Requests, st.NotModified)
	})
}
