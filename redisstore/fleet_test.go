//go:build unix

package redisstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// childEnv makes the test binary a replica of a fleet (see replica)
// instead of running tests.
const childEnv = "KUBEATLAS_REDISSTORE_REPLICA"

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // its dial errors are what the tests provoke
	if os.Getenv(childEnv) != "" {
		if err := replica(); err != nil {
			fmt.Fprintln(os.Stderr, "replica:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// replicaReport is what a replica process reports on stdout.
type replicaReport struct {
	Documents map[string]string // path -> SHA-256 of its JSON
	Sizes     map[string]int
	Stats     Stats
}

// replica is one process of a fleet: an OpenAPI client on a Redis store
// that reads every document of the API server, as a controller replica
// that starts does.
func replica() error {
	max, err := strconv.ParseInt(os.Getenv("MAX_VALUE_BYTES"), 10, 64)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	store, err := New(rdb, os.Getenv("API_URL"), WithPrefix(os.Getenv("PREFIX")), WithMaxValueBytes(max))
	if err != nil {
		return err
	}
	c, err := openapi3.NewForHTTPClient(nil, os.Getenv("API_URL"), openapi3.WithDiskCache(store))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	docs, err := c.FetchAll(ctx)
	if err != nil {
		return err
	}
	rep := replicaReport{Documents: map[string]string{}, Sizes: map[string]int{}}
	for _, d := range docs {
		sum := sha256.Sum256(d.JSON)
		rep.Documents[d.Path] = hex.EncodeToString(sum[:])
		rep.Sizes[d.Path] = len(d.JSON)
	}
	rep.Stats = store.Stats()
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// fleet runs replica processes against one API server and one Redis.
type fleet struct {
	redis  *redisServer
	admin  *redis.Client
	srv    *docserver.Server
	url    string
	prefix string
	max    int64
}

func newFleet(t *testing.T) *fleet {
	r := startRedis(t)
	srv, url := docserver.Start(t, docserver.WithCRDs(40, 8))
	return &fleet{redis: r, admin: r.client(t), srv: srv, url: url, prefix: "fleet:", max: DefaultMaxValueBytes}
}

// run runs one replica process to its end, and returns its report and the
// documents it fetched from the API server (path -> requests).
func (f *fleet) run(t *testing.T) (replicaReport, map[string]int) {
	t.Helper()
	f.srv.ResetRequests()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", "REDIS_ADDR="+f.redis.addr, "API_URL="+f.url,
		"PREFIX="+f.prefix, "MAX_VALUE_BYTES="+strconv.FormatInt(f.max, 10))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replica: %v\n%s", err, stderr.String())
	}
	var rep replicaReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("replica's report %q: %v", stdout.String(), err)
	}
	if len(rep.Documents) < 10 {
		t.Fatalf("the replica read %d documents; the fake server serves more", len(rep.Documents))
	}
	fetched := map[string]int{}
	for _, req := range f.srv.Requests() {
		if path, ok := strings.CutPrefix(req.Path, "/openapi/v3/"); ok && req.Method == "GET" {
			fetched[path]++
		}
	}
	return rep, fetched
}

// TestFleetFetchesEachDocumentOnce: two processes, each with its own
// client and Store, sharing one redis-server: the second reads every
// document from Redis, so that between them each document is fetched from
// the API server once.
func TestFleetFetchesEachDocumentOnce(t *testing.T) {
	f := newFleet(t)
	first, fetched1 := f.run(t)
	second, fetched2 := f.run(t)

	for path := range first.Documents {
		if n := fetched1[path] + fetched2[path]; n != 1 {
			t.Errorf("%s was fetched %d times by the two processes", path, n)
		}
	}
	if len(fetched2) != 0 {
		t.Errorf("the second process fetched documents: %v", fetched2)
	}
	if !maps.Equal(first.Documents, second.Documents) {
		t.Errorf("the processes read different documents")
	}
	if second.Stats.Hits != int64(len(first.Documents)) || second.Stats.Corrupt != 0 || second.Stats.Errors != 0 {
		t.Errorf("second process's store: %+v, want %d hits", second.Stats, len(first.Documents))
	}
	t.Logf("%d documents: first process %+v, second %+v", len(first.Documents), first.Stats, second.Stats)

	// A damaged value is a miss: that document alone is fetched again,
	// and stored again.
	const damaged = "apis/apps/v1"
	rk := f.redisKeyOf(t, damaged)
	raw, err := f.admin.Get(t.Context(), rk).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-2] ^= 0x20
	if err := f.admin.SetArgs(t.Context(), rk, raw, redis.SetArgs{KeepTTL: true}).Err(); err != nil {
		t.Fatal(err)
	}
	third, fetched3 := f.run(t)
	if !maps.Equal(fetched3, map[string]int{damaged: 1}) {
		t.Errorf("after %s's value was damaged, the next process fetched %v, want it alone, once", damaged, fetched3)
	}
	if third.Stats.Corrupt != 1 || !maps.Equal(third.Documents, first.Documents) {
		t.Errorf("third process: %+v, same documents: %v", third.Stats, maps.Equal(third.Documents, first.Documents))
	}
	again, err := f.admin.Get(t.Context(), rk).Bytes()
	if err != nil {
		t.Fatalf("the document was not stored again: %v", err)
	}
	if _, _, _, err := decode(again); err != nil {
		t.Errorf("the value stored again: %v", err)
	}
	if _, fetched4 := f.run(t); len(fetched4) != 0 {
		t.Errorf("after it was stored again, a process fetched %v", fetched4)
	}
}

// TestFleetValuesOverTheLimitAreNotStored: with a limit below some
// values' size, those are not stored (each process fetches them) and the
// rest are shared. The limit is on the value the cache hands the store
// (a document's JSON and its HTTP headers), so the sizes come from the
// values the first run stored.
func TestFleetValuesOverTheLimitAreNotStored(t *testing.T) {
	f := newFleet(t)
	f.prefix = "small:"
	f.run(t)
	values := f.valueSizes(t)
	sizes := slices.Sorted(maps.Values(values))
	f.max = int64(sizes[len(sizes)/2]) // the median value
	if err := f.admin.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	f.prefix = "limited:"
	_, fetched1 := f.run(t)
	_, fetched2 := f.run(t)
	var over, under int
	for path, size := range values {
		got := fetched1[path] + fetched2[path]
		if int64(size) > f.max {
			over++
			if got != 2 {
				t.Errorf("%s (a %d-byte value, over the limit of %d) was fetched %d times, want once by each process", path, size, f.max, got)
			}
			continue
		}
		under++
		if got != 1 {
			t.Errorf("%s (a %d-byte value, within the limit of %d) was fetched %d times, want once", path, size, f.max, got)
		}
	}
	if over == 0 || under == 0 {
		t.Fatalf("%d values over the limit and %d within it: the test proves nothing", over, under)
	}
	t.Logf("limit %d bytes: %d documents over it fetched by each process, %d within it fetched once", f.max, over, under)
}

// valueSizes returns the size of each OpenAPI document's stored value,
// by its path ("apis/apps/v1").
func (f *fleet) valueSizes(t *testing.T) map[string]int {
	t.Helper()
	keys, err := f.admin.Keys(t.Context(), f.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{}
	for _, rk := range keys {
		raw, err := f.admin.Get(t.Context(), rk).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		_, key, value, err := decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", rk, err)
		}
		name, _, _ := strings.Cut(key.Name, "\n")
		if _, path, ok := strings.Cut(name, "/openapi/v3/"); ok {
			path, _, _ = strings.Cut(path, "?")
			sizes[path] = len(value)
		}
	}
	if len(sizes) < 10 {
		t.Fatalf("%d OpenAPI documents stored; the server serves more", len(sizes))
	}
	return sizes
}

// redisKeyOf finds the Redis key of an OpenAPI document by the keys the
// values hold.
func (f *fleet) redisKeyOf(t *testing.T, docPath string) string {
	t.Helper()
	keys, err := f.admin.Keys(t.Context(), f.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, rk := range keys {
		raw, err := f.admin.Get(t.Context(), rk).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		_, key, _, err := decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", rk, err)
		}
		if strings.HasSuffix(key.Name, "/openapi/v3/"+docPath+"\napplication/json") {
			return rk
		}
	}
	t.Fatalf("no value for %s among %d keys", docPath, len(keys))
	return ""
}
