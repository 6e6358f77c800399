package fleet_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/fleet"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// surface is a fake cluster's options: clusters started with the same
// ones serve byte-identical discovery and OpenAPI.
var (
	surfaceA = []docserver.Option{docserver.WithCRDs(20, 4)}
	surfaceB = []docserver.Option{docserver.WithCRDs(30, 5)}
)

type fakeCluster struct {
	id   string
	srv  *docserver.Server
	base string
}

func start(t *testing.T, id string, surface []docserver.Option) fakeCluster {
	srv, base := docserver.Start(t, surface...)
	return fakeCluster{id: id, srv: srv, base: base}
}

func newFleet(t *testing.T, opts ...fleet.Option) *fleet.Fleet {
	t.Helper()
	f, err := fleet.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func add(t *testing.T, f *fleet.Fleet, c fakeCluster, opts ...fleet.ClusterOption) *fleet.Cluster {
	t.Helper()
	fc, err := f.Add(c.id, &rest.Config{Host: c.base}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return fc
}

// requests counts a fake cluster's discovery and OpenAPI requests, and
// how many were 304s, since its last ResetRequests.
func requests(c fakeCluster, pathSuffix string) (n, notModified int) {
	for _, r := range c.srv.Requests() {
		if strings.HasSuffix(r.Path, pathSuffix) {
			n++
			if r.Status == http.StatusNotModified {
				notModified++
			}
		}
	}
	return n, notModified
}

// TestFleetSharesSurfaces: five clusters of two surfaces hold two decoded
// snapshots and, once mapped, two mapper indexes; cold clusters of a held
// surface are confirmed with two 304s (the fingerprint's surface, or Like's);
// each mapper answers for its own cluster; an unchanged round is two 304s
// per cluster.
func TestFleetSharesSurfaces(t *testing.T) {
	f := newFleet(t)
	a := []fakeCluster{start(t, "a1", surfaceA), start(t, "a2", surfaceA), start(t, "a3", surfaceA)}
	b := []fakeCluster{start(t, "b1", surfaceB), start(t, "b2", surfaceB)}
	for _, c := range a {
		add(t, f, c)
	}
	add(t, f, b[0])
	add(t, f, b[1], fleet.WithLike("b1"))
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := f.Stats()
	if st.Clusters != 5 || st.Surfaces != 2 || st.Failing != 0 {
		t.Errorf("stats %+v, want 5 clusters of 2 surfaces", st)
	}
	// a1 seeds; a2 and a3 offer the surface their fingerprint names; b1's
	// is new, so it is offered A's and reads its /apis; b2 offers b1's.
	if st.SurfaceHits != 3 {
		t.Errorf("%d cold starts confirmed by 304s, want 3", st.SurfaceHits)
	}
	for _, c := range []fakeCluster{a[1], a[2], b[1]} {
		if n, nm := requests(c, "/apis"); n != 1 || nm != 1 {
			t.Errorf("%s: /apis %d requests, %d 304s, want one 304", c.id, n, nm)
		}
	}

	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	onlyB := schema.GroupKind{Group: "g004.stress.example.com"}
	for _, id := range f.IDs() {
		m := must(f.Cluster(id)).Mapper()
		if _, err := m.RESTMapping(deploy, "v1"); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		_, err := m.ResourcesFor(schema.GroupVersionResource{Group: onlyB.Group, Resource: "widget0004s"})
		if strings.HasPrefix(id, "b") != (err == nil) {
			t.Errorf("%s: a resource of surface B only: %v", id, err)
		}
	}
	if st := f.Stats(); st.Indexes != 2 {
		t.Errorf("%d mapper indexes for 2 surfaces", st.Indexes)
	}

	for _, c := range append(a, b...) {
		c.srv.ResetRequests()
	}
	before := f.Stats()
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := f.Stats()
	if got := after.Requests - before.Requests; got != 10 || after.NotModified-before.NotModified != 10 || after.Bytes != before.Bytes {
		t.Errorf("an unchanged round: %d requests, %d 304s, %d bytes; want 10 304s", got, after.NotModified-before.NotModified, after.Bytes-before.Bytes)
	}
}

// TestFleetFailures: a cluster that cannot be reached is reported with a
// *ClusterError, is left out of rounds until its backoff ends, and the
// others are read; a cluster that fails after it was read keeps its last
// snapshot, which its mapper still answers from.
func TestFleetFailures(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	f := newFleet(t, fleet.WithClock(clk), fleet.WithBackoff(time.Minute, time.Hour), fleet.WithRefreshTimeout(2*time.Second))
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	good := start(t, "good", surfaceA)
	flaky := start(t, "flaky", surfaceA)
	add(t, f, good)
	add(t, f, flaky)
	if _, err := f.Add("dead", &rest.Config{Host: dead.URL}); err != nil {
		t.Fatal(err)
	}
	err := f.Refresh(context.Background())
	var round *fleet.RoundError
	if !errors.As(err, &round) || len(round.Failed) != 1 || round.Failed[0].Cluster != "dead" {
		t.Fatalf("round: %v, want the dead cluster's failure", err)
	}
	ce := round.Failed[0]
	if ce.Last != nil || ce.Failures != 1 || !ce.RetryAt.After(clk.Now()) {
		t.Errorf("dead cluster's error: %+v", ce)
	}
	if must(f.Cluster("good")).Snapshot() == nil || must(f.Cluster("flaky")).Snapshot() == nil {
		t.Fatalf("the reachable clusters were not read")
	}
	if err := must(f.Cluster("dead")).Err(); !errors.As(err, &ce) {
		t.Errorf("Cluster.Err: %v", err)
	}
	// Backing off: the next round leaves it out.
	if err := f.Refresh(context.Background()); err != nil {
		t.Errorf("a round while the dead cluster backs off: %v", err)
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	flaky.srv.InjectFault("/apis", docserver.Fault{Status: http.StatusInternalServerError})
	err = f.Refresh(context.Background())
	if !errors.As(err, &round) || len(round.Failed) != 2 {
		t.Fatalf("round: %v, want the dead and the flaky cluster", err)
	}
	if ce := round.Failed[0]; ce.Cluster != "dead" || ce.Failures != 2 {
		t.Errorf("dead cluster, retried after its backoff: %+v", ce)
	}
	if ce := round.Failed[1]; ce.Cluster != "flaky" || ce.Last == nil || ce.Failures != 1 {
		t.Errorf("flaky cluster: %+v, want its last snapshot", ce)
	}
	if _, err := must(f.Cluster("flaky")).Mapper().RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err != nil {
		t.Errorf("the failing cluster's mapper: %v", err)
	}
	if st := f.Stats(); st.Failing != 2 {
		t.Errorf("%d failing clusters, want 2", st.Failing)
	}
	flaky.srv.ClearFaults()
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	if err := f.Refresh(context.Background()); !errors.As(err, &round) || len(round.Failed) != 1 {
		t.Errorf("after the flaky cluster recovered: %v", err)
	}
	if must(f.Cluster("flaky")).Err() != nil {
		t.Errorf("a recovered cluster still reports %v", must(f.Cluster("flaky")).Err())
	}
}

// TestFleetDiskCacheAcrossProcesses: a second process over the same cache
// directory starts every cluster from the disk and revalidates each with
// two 304s, no body; the documents are on disk once, whichever clusters
// served them, and so are OpenAPI documents, which the second process
// reads from the disk for every cluster.
func TestFleetDiskCacheAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	clusters := []fakeCluster{start(t, "c1", surfaceA), start(t, "c2", surfaceA), start(t, "c3", surfaceA)}
	const doc = "apis/apps/v1"
	run := func() *fleet.Fleet {
		f := newFleet(t, fleet.WithCacheDir(dir))
		for _, c := range clusters {
			add(t, f, c)
		}
		if err := f.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, id := range f.IDs() {
			oc, err := must(f.Cluster(id)).OpenAPI()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := oc.Document(context.Background(), doc); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	run()
	fetched := 0
	for _, c := range clusters {
		n, _ := requests(c, "/openapi/v3/"+doc)
		fetched += n
		c.srv.ResetRequests()
	}
	if fetched != 1 {
		t.Errorf("first process: %s fetched %d times from 3 clusters of one surface, want once", doc, fetched)
	}
	f := run()
	st := f.Stats()
	if st.DiskLoads != 3 || st.Requests != 6 || st.NotModified != 6 || st.Bytes != 0 {
		t.Errorf("second process: %+v, want 3 disk loads and six 304s", st)
	}
	for _, c := range clusters {
		if n, _ := requests(c, "/openapi/v3/"+doc); n != 0 {
			t.Errorf("second process: %s fetched %s again", c.id, doc)
		}
	}
	// On disk: the content directory holds the two discovery documents
	// and the OpenAPI document, once; each cluster's directory its own
	// small entry.
	var contentBytes, clusterBytes int64
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		if strings.Contains(path, "kubeatlas-fleet-content") {
			contentBytes += info.Size()
		} else {
			clusterBytes += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if clusterBytes*10 > contentBytes {
		t.Errorf("cluster directories hold %d bytes beside %d of content: documents are stored per cluster", clusterBytes, contentBytes)
	}
}

// TestFleetSubscribe: a change of one cluster reaches subscribers as that
// cluster's, and no other cluster reports one.
func TestFleetSubscribe(t *testing.T) {
	f := newFleet(t)
	c1, c2 := start(t, "c1", surfaceA), start(t, "c2", surfaceA)
	add(t, f, c1)
	add(t, f, c2)
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var changes []fleet.Change
	unsubscribe := f.Subscribe(func(c fleet.Change) {
		mu.Lock()
		changes = append(changes, c)
		mu.Unlock()
	})
	defer unsubscribe()
	if err := c2.srv.AddCRD(docserver.CRD{Group: "new.example.com", Versions: []string{"v1"}, Kind: "Thing"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Subscribers are called after publication, on goroutines of their
	// own: wait until c2's current snapshot has been told.
	told := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(changes) > 0 && changes[len(changes)-1].New == must(f.Cluster("c2")).Discovery().Current()
	}
	for deadline := time.Now().Add(10 * time.Second); !told() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 1 || changes[0].Cluster != "c2" || len(changes[0].AddedResources) == 0 {
		t.Errorf("changes: %+v, want one of c2 adding things", changes)
	}
}

// TestAddKubeconfig: the contexts of a kubeconfig matching a glob become
// clusters named after them; a context that cannot be used is reported
// and the others are added.
func TestAddKubeconfig(t *testing.T) {
	c1, c2 := start(t, "x", surfaceA), start(t, "y", surfaceB)
	cfg := clientcmdapi.NewConfig()
	for name, base := range map[string]string{"prod-eu": c1.base, "prod-us": c2.base, "dev": c1.base} {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: base}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.Contexts["prod-broken"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "prod-eu"}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	ids, err := f.AddKubeconfig(path, "prod-*")
	if !slices.Equal(ids, []string{"prod-eu", "prod-us"}) || err == nil || !strings.Contains(err.Error(), "prod-broken") {
		t.Errorf("added %v, error %v; want prod-eu and prod-us, and prod-broken reported", ids, err)
	}
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Surfaces != 2 || st.Clusters != 2 {
		t.Errorf("stats %+v", st)
	}
	if _, err := f.Add("prod-eu", &rest.Config{Host: c1.base}); !errors.Is(err, fleet.ErrExists) {
		t.Errorf("adding an existing ID: %v", err)
	}
	if !f.Remove("prod-eu") || f.Remove("prod-eu") {
		t.Errorf("Remove")
	}
	if c, ok := f.Cluster("prod-eu"); ok || c != nil {
		t.Errorf("a removed cluster: %v %v, want nil, false", c, ok)
	}
}

// TestOptionsCannotLie: an option that cannot mean anything is an error
// from the constructor, not a silent default.
func TestOptionsCannotLie(t *testing.T) {
	if _, err := fleet.New(fleet.WithCacheDir("")); err == nil {
		t.Errorf("WithCacheDir(\"\"): no error")
	}
	f := newFleet(t)
	c := start(t, "c1", surfaceA)
	if _, err := f.Add(c.id, &rest.Config{Host: c.base}, fleet.WithLike("")); err == nil {
		t.Errorf("WithLike(\"\"): no error")
	}
	if _, err := f.Add(c.id, &rest.Config{Host: c.base}, fleet.WithLike("nowhere")); err == nil {
		t.Errorf("Like of a cluster the fleet does not have: no error")
	}
	if _, ok := f.Cluster(c.id); ok {
		t.Errorf("a cluster whose options failed was added")
	}
}

// must is the cluster a test registered (internal/withfake/fleet, whose
// tests need the fake's fleet of clusters, keeps a copy).
func must(c *fleet.Cluster, ok bool) *fleet.Cluster {
	if !ok {
		panic("fleet test: no such cluster")
	}
	return c
}
