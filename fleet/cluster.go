package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// Cluster is one cluster of a Fleet: its discovery client, REST mapper
// and OpenAPI v3 client, each sharing what the fleet holds.
type Cluster struct {
	id     string
	fleet  *Fleet
	disc   *discovery.Client
	mapper *restmapper.Mapper
	store  diskcache.Store // the cluster's own entries and the fleet's content, or nil
	like   *Cluster        // WithLike's cluster, or nil

	forwardOnce sync.Once
	unsub       func() // set once forwarding, under forwardOnce

	openapiOnce sync.Once
	openapi     *openapi3.Client
	openapiErr  error

	mu       sync.Mutex // guards the failure state; never held across I/O, a logger or the clock
	failures int
	retryAt  time.Time
	lastErr  *ClusterError
}

func (f *Fleet) newCluster(id string, cfg *rest.Config, co clusterOptions) (*Cluster, error) {
	if id == "" {
		return nil, errors.New("fleet: a cluster needs an ID")
	}
	// Nothing is kept of cfg beyond the discovery client's copy: a
	// cluster costs a few hundred bytes of its own (see Fleet).
	c := &Cluster{id: id, fleet: f}
	if co.like != "" {
		var ok bool
		if c.like, ok = f.Cluster(co.like); !ok {
			return nil, fmt.Errorf("fleet: cluster %s: WithLike(%q): no such cluster", id, co.like)
		}
	}
	if f.content != nil {
		base, _, err := rest.DefaultServerUrlFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("fleet: cluster %s: %w", id, err)
		}
		own, err := diskcache.Open(f.opts.cacheDir, base.String())
		if err != nil {
			return nil, fmt.Errorf("fleet: cluster %s: %w", id, err)
		}
		c.store = &contentStore{own: own, content: f.content, stored: &f.stored}
	}
	dopts := f.discoveryOptions(c.store)
	disc, err := discovery.New(cfg, dopts...)
	if err != nil {
		return nil, fmt.Errorf("fleet: cluster %s: %w", id, err)
	}
	c.disc = disc
	if c.mapper, err = restmapper.New(disc, restmapper.WithIndexes(f.indexes)); err != nil {
		return nil, fmt.Errorf("fleet: cluster %s: %w", id, err)
	}
	return c, nil
}

// forward passes the cluster's changes to the fleet's subscribers, from
// the first Subscribe on: a fleet nobody subscribes to spends nothing per
// cluster on it.
func (c *Cluster) forward() {
	c.forwardOnce.Do(func() {
		c.unsub = c.disc.Subscribe(func(ch discovery.Change) { c.fleet.notify(c.id, ch) })
	})
}

// ID is the cluster's name in the fleet.
func (c *Cluster) ID() string { return c.id }

// Discovery is the cluster's discovery client.
func (c *Cluster) Discovery() *discovery.Client { return c.disc }

// Mapper is the cluster's REST mapper.
func (c *Cluster) Mapper() *restmapper.Mapper { return c.mapper }

// Snapshot is the cluster's latest snapshot, nil before the first read.
func (c *Cluster) Snapshot() *discovery.Snapshot { return c.disc.Current() }

// OpenAPI is the cluster's OpenAPI v3 client, made on first use: its
// documents are shared with the fleet's other clusters by content.
func (c *Cluster) OpenAPI() (*openapi3.Client, error) {
	c.openapiOnce.Do(func() {
		_, cfg := c.disc.Connection() // its own HTTP client: discovery's counts only discovery
		c.openapi, c.openapiErr = openapi3.New(cfg, c.fleet.openAPIOptions(c.store)...)
	})
	return c.openapi, c.openapiErr
}

// Err is why the cluster's latest refresh failed (a *ClusterError), or nil.
func (c *Cluster) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr == nil {
		return nil
	}
	return c.lastErr
}

func (c *Cluster) due(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !now.Before(c.retryAt)
}

// refresh revalidates the cluster, recording a failure and its backoff. A
// cold start is first offered a surface to confirm (surfaces.prepare), here
// on the round's goroutine: the cluster's refresh does no fleet work.
func (c *Cluster) refresh(ctx context.Context) *ClusterError {
	var tell func(*discovery.Snapshot)
	if c.disc.Current() == nil {
		// A cold start, unless the disk cache has a snapshot: one Load
		// published, or one it read but keeps for the server to confirm
		// (the fleet's store is not a *diskcache.Cache), which the
		// refresh's requests are conditional on, as they would be on a
		// surface offered: nothing to prepare, no probe to send.
		s, err := c.disc.Load(ctx)
		if err != nil {
			return nil // the round was cancelled: not the cluster's failure
		}
		if s == nil && c.disc.Stats().DiskLoads == 0 {
			var like *discovery.Client
			if c.like != nil {
				like = c.like.disc
			}
			if tell, err = c.fleet.surfaces.prepare(ctx, c.disc, like); err != nil {
				return nil
			}
		}
	}
	snap, err := c.disc.Refresh(ctx)
	if tell != nil {
		if err != nil {
			tell(nil)
		} else {
			tell(snap)
		}
	}
	var partial *discovery.PartialError
	if err != nil && errors.As(err, &partial) && snap != nil && snap.RefreshError() == nil {
		err = nil // read; some group-versions are not current (Snapshot.Err says which)
	}
	if err != nil && ctx.Err() != nil {
		return nil // the round was cancelled: not the cluster's failure
	}
	o := &c.fleet.opts
	var now time.Time
	if err != nil {
		now = o.clock.Now() // the user's clock: read holding no lock
	}
	c.mu.Lock()
	if err == nil {
		recovered := c.failures
		c.failures, c.retryAt, c.lastErr = 0, time.Time{}, nil
		c.mu.Unlock()
		if recovered > 0 {
			o.logger.Info("fleet: cluster recovered", "cluster", c.id, "after", recovered)
		}
		return nil
	}
	c.failures++
	c.retryAt = now.Add(o.backoff(c.failures))
	c.lastErr = &ClusterError{Cluster: c.id, Err: err, Last: c.disc.Current(), Failures: c.failures, RetryAt: c.retryAt}
	cerr := c.lastErr
	c.mu.Unlock()
	// Logged after unlocking: a handler is the user's code.
	if cerr.Failures == 1 {
		o.logger.Warn("fleet: cluster failed", "cluster", c.id, "err", err)
	}
	return cerr
}

func (c *Cluster) close() {
	c.forwardOnce.Do(func() {}) // no forwarding from now on
	if c.unsub != nil {
		c.unsub()
	}
}

// contentStore is a cluster's disk store, for discovery and OpenAPI v3:
// what is named by its content (a diskcache.Key with Content set: a
// discovery document a client persists under its ETag, an OpenAPI document
// at a ?hash= URL, each verified against that name before it is stored and
// again when it is read back) goes to the fleet's content cache, once
// whichever cluster (and path prefix) served it; everything else is the
// cluster's own. The key's fields decide, never its text.
type contentStore struct {
	own, content diskcache.Store
	// stored holds the content keys this process has put in content: a
	// thousand clusters of one surface write it once.
	stored *sync.Map
}

// route is the store of k, and the key it has there: content is filed by
// what names it (its ETag or hash) alone.
func (s *contentStore) route(k diskcache.Key) (diskcache.Store, diskcache.Key) {
	if k.Content {
		return s.content, diskcache.Key{Name: "kubeatlas/content/v3\n" + k.Version, Version: k.Version, Content: true}
	}
	return s.own, k
}

func (s *contentStore) Get(key diskcache.Key) ([]byte, bool) {
	st, k := s.route(key)
	v, ok := st.Get(k)
	if !ok && k.Content {
		// Gone (evicted, or dropped as not what it is named by): the
		// next Put writes it again.
		s.stored.Delete(k)
	}
	return v, ok
}

func (s *contentStore) Put(key diskcache.Key, value []byte) error {
	st, k := s.route(key)
	if !k.Content {
		return st.Put(k, value)
	}
	if _, done := s.stored.Load(k); done {
		return nil
	}
	if err := st.Put(k, value); err != nil {
		return err
	}
	s.stored.Store(k, true)
	return nil
}

func (s *contentStore) Delete(key diskcache.Key) {
	st, k := s.route(key)
	if k.Content {
		s.stored.Delete(k)
	}
	st.Delete(k)
}
