//go:build unix

package redisstore

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// netOutput is the bytes Redis has sent to its clients
// (total_net_output_bytes).
func netOutput(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("INFO stats has no total_net_output_bytes")
	return 0
}

// slowCommands are the commands Redis logged as slower than threshold
// since the log was reset (SLOWLOG), with how long each took.
func slowCommands(t *testing.T, c *redis.Client) []string {
	t.Helper()
	logs, err := c.SlowLogGet(t.Context(), -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range logs {
		out = append(out, strings.Join(l.Args[:min(len(l.Args), 2)], " ")+" "+l.Duration.String())
	}
	return out
}

// plant writes a string of n zero bytes (another program's data) without
// sending it over the wire.
func plant(t *testing.T, c *redis.Client, rk string, n int64) {
	t.Helper()
	if err := c.SetRange(t.Context(), rk, n-1, "x").Err(); err != nil {
		t.Fatalf("SETRANGE %s: %v", rk, err)
	}
}

// TestLargeForeignValues: a value larger than any this store writes for a
// key is not read (one bounded read of its head, then removed), and
// removing a bad value, large or not, does not block Redis's other
// clients: nothing the store sends runs for long on the Redis side. (The
// store read a 400 MB foreign value whole, and removed it with a script
// that hashed it, blocking every client of the Redis for seconds.) What
// remains is Redis's own cost of freeing a large string, which it does on
// its main thread whatever removes it (UNLINK frees strings inline): about
// 12 ms per 100 MB here, so the threshold is 100 ms.
func TestLargeForeignValues(t *testing.T) {
	r := startRedis(t)
	admin := r.client(t)
	r.configSet(t, admin, "slowlog-log-slower-than", "100000") // µs
	key := diskcache.Key{Name: "/openapi/v3/apis/apps/v1\napplication/json", Version: "AAAA"}

	t.Run("over the limit", func(t *testing.T) {
		s := newStore(t, r)
		rk := s.RedisKey(key)
		const size = 100 << 20 // over the default limit, 64 MiB
		plant(t, admin, rk, size)
		if err := admin.SlowLogReset(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		before := netOutput(t, admin)
		if v, ok := s.Get(key); ok {
			t.Fatalf("a foreign value was returned (%d bytes)", len(v))
		}
		sent := netOutput(t, admin) - before
		if sent > 2<<20 {
			t.Errorf("Redis sent %d bytes for one Get of a %d-byte foreign value over the %d-byte limit; want at most 2 MiB", sent, size, int64(DefaultMaxValueBytes))
		}
		if n := admin.Exists(t.Context(), rk).Val(); n != 0 {
			t.Errorf("the oversized value is still in Redis")
		}
		if slow := slowCommands(t, admin); len(slow) != 0 {
			t.Errorf("commands that ran over 100ms in Redis: %v", slow)
		}
		if st := s.Stats(); st.Corrupt != 1 {
			t.Errorf("Stats = %+v, want one corrupt value", st)
		}
		t.Logf("Redis sent %d bytes for a Get of a %d MiB foreign value", sent, size>>20)
	})

	t.Run("damaged, within the limit", func(t *testing.T) {
		s := newStore(t, r)
		rk := s.RedisKey(key)
		plant(t, admin, rk, 60<<20)
		if err := admin.SlowLogReset(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Get(key); ok {
			t.Fatal("a foreign value was returned")
		}
		if n := admin.Exists(t.Context(), rk).Val(); n != 0 {
			t.Errorf("the damaged value is still in Redis")
		}
		// The Get itself reads 60 MB, which Redis copies out: only the
		// removal's commands are the removal's cost.
		for _, c := range slowCommands(t, admin) {
			if !strings.HasPrefix(strings.ToLower(c), "multi") && !strings.HasPrefix(strings.ToLower(c), "getrange") {
				t.Errorf("removing a 60 MB damaged value ran in Redis for over 100ms: %s", c)
			}
		}
	})

	t.Run("a large list", func(t *testing.T) {
		s := newStore(t, r)
		rk := s.RedisKey(key)
		items := make([]any, 100000)
		for i := range items {
			items[i] = i
		}
		for range 10 {
			if err := admin.RPush(t.Context(), rk, items...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := admin.SlowLogReset(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Get(key); ok {
			t.Fatal("a list was returned")
		}
		if n := admin.Exists(t.Context(), rk).Val(); n != 0 {
			t.Errorf("the list is still in Redis")
		}
		if slow := slowCommands(t, admin); len(slow) != 0 {
			t.Errorf("commands that ran over 100ms in Redis: %v", slow)
		}
	})
}

// TestDiscoveryKeySpacePerServer: two clusters' discovery clients on one
// Redis, each store made for its own server with the default prefix: the
// second cluster's client reads its own server, not the snapshot the first
// persisted (with one key space, it was served the first cluster's 98
// resources, with no request, for up to the max age). A value copied from
// one server's key space to another's is refused.
func TestDiscoveryKeySpacePerServer(t *testing.T) {
	r := startRedis(t)
	_, urlA := docserver.Start(t, docserver.WithCRDs(30, 5))
	srvB, urlB := docserver.Start(t, docserver.WithCRDs(2, 1))
	rdb := r.client(t)
	newDiscovery := func(url string) (*discovery.Client, *Store) {
		s, err := New(rdb, url)
		if err != nil {
			t.Fatal(err)
		}
		c, err := discovery.NewForHTTPClient(nil, url, discovery.WithDiskCache(s))
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	resources := func(s *discovery.Snapshot) int {
		n := 0
		for _, g := range s.Groups() {
			for _, v := range g.Versions {
				n += len(v.Resources)
			}
		}
		return n
	}
	ctx := t.Context()
	a, _ := newDiscovery(urlA)
	snapA, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The persisted snapshot is written after publication.
	deadline := time.Now().Add(10 * time.Second)
	for len(rdb.Keys(ctx, DefaultPrefix+"*").Val()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("cluster A's snapshot was not persisted within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	plain, err := discovery.NewForHTTPClient(nil, urlB)
	if err != nil {
		t.Fatal(err)
	}
	truthB, err := plain.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resources(truthB) == resources(snapA) {
		t.Fatalf("the two clusters serve %d resources each: the test proves nothing", resources(snapA))
	}
	srvB.ResetRequests()
	b, _ := newDiscovery(urlB)
	gotB, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resources(gotB) != resources(truthB) || gotB.FromDisk() || srvB.Stats().Requests == 0 {
		t.Errorf("cluster B's client: %d resources (B serves %d, A %d), from the store: %v, %d requests to B",
			resources(gotB), resources(truthB), resources(snapA), gotB.FromDisk(), srvB.Stats().Requests)
	}

	// A value copied from A's key space into B's is another server's.
	_, storeA := newDiscovery(urlA)
	_, storeB := newDiscovery(urlB)
	keys := rdb.Keys(ctx, storeA.space+"*").Val()
	if len(keys) == 0 {
		t.Fatal("no key in A's key space")
	}
	for _, rk := range keys {
		raw, err := rdb.Get(ctx, rk).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		_, k, _, err := decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, storeB.RedisKey(k), raw, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok := storeB.Get(k); ok {
			t.Errorf("B's store returned a value A's store wrote (%.40q)", k.Name)
		}
		if _, ok := storeA.Get(k); !ok {
			t.Errorf("A's store lost its value (%.40q)", k.Name)
		}
	}
	if st := storeB.Stats(); st.Corrupt != int64(len(keys)) {
		t.Errorf("B's store: %+v, want %d values refused", st, len(keys))
	}
}

// TestForgedDocumentIsVerifiedOnRead: a value another host wrote that
// passes the store's own checks (anyone who can write to the Redis can
// compute them) but whose OpenAPI document is not the one its ?hash=
// names is a miss: the document is fetched again from the server and
// stored again. (It was served, with no request, until it expired.)
func TestForgedDocumentIsVerifiedOnRead(t *testing.T) {
	f := newFleet(t)
	first, _ := f.run(t)
	const forged = "apis/apps/v1"
	rk := f.redisKeyOf(t, forged)
	raw, err := f.admin.Get(t.Context(), rk).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	server, key, value, err := decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(value, []byte(`"description":"`))
	if i < 0 {
		t.Fatalf("no description in %s's stored document", forged)
	}
	value[i+len(`"description":"`)] ^= 0x20 // a letter's case: still JSON, same length
	if err := f.admin.SetArgs(t.Context(), rk, encode(server, key, value), redis.SetArgs{KeepTTL: true}).Err(); err != nil {
		t.Fatal(err)
	}
	second, fetched := f.run(t)
	if fetched[forged] != 1 || len(fetched) != 1 {
		t.Errorf("after %s's value was forged, the next process fetched %v, want it alone, once", forged, fetched)
	}
	if second.Documents["/openapi/v3/"+forged] != first.Documents["/openapi/v3/"+forged] {
		t.Errorf("the process read the forged %s", forged)
	}
	if second.Stats.Corrupt != 1 {
		t.Errorf("second process's store: %+v, want one value refused", second.Stats)
	}
	if again, err := f.admin.Get(t.Context(), rk).Bytes(); err != nil {
		t.Errorf("the document was not stored again: %v", err)
	} else if _, _, v, err := decode(again); err != nil || bytes.Equal(v, value) {
		t.Errorf("the value stored again: %v, still the forged one: %v", err, bytes.Equal(v, value))
	}
}

// TestVerifyContent: the default check refuses a Content value whose
// body's SHA-512 is not its Version, in either form a value takes, and
// lets through what it cannot check.
func TestVerifyContent(t *testing.T) {
	doc := []byte(`{"openapi":"3.0.0"}`)
	hash := strings.ToUpper(sha512hex(doc))
	resp := func(body []byte) []byte {
		return []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
	}
	other := []byte(`{"openapi":"3.0.1"}`)
	for _, tc := range []struct {
		name  string
		key   diskcache.Key
		value []byte
		ok    bool
	}{
		{"response with the named body", diskcache.Key{Name: "n", Version: hash, Content: true}, resp(doc), true},
		{"response with another body", diskcache.Key{Name: "n", Version: hash, Content: true}, resp(other), false},
		{"lowercase hash", diskcache.Key{Name: "n", Version: strings.ToLower(hash), Content: true}, resp(doc), true},
		{"bare content", diskcache.Key{Name: "n", Version: hash, Content: true}, doc, true},
		{"bare other content", diskcache.Key{Name: "n", Version: hash, Content: true}, other, false},
		{"response that does not parse", diskcache.Key{Name: "n", Version: hash, Content: true}, []byte("HTTP/1.1 nonsense"), false},
		{"not Content", diskcache.Key{Name: "n", Version: hash}, other, true},
		{"a Version of another form", diskcache.Key{Name: "n", Version: "v1", Content: true}, other, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := VerifyContent(tc.key, tc.value); (err == nil) != tc.ok {
				t.Errorf("VerifyContent = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// sha512hex is how kube-openapi names a document (uppercased).
func sha512hex(b []byte) string {
	sum := sha512.Sum512(b)
	return hex.EncodeToString(sum[:])
}

// TestForgedDiscoveryIsVerifiedOnRead: another host that can write the
// Redis rewrites the persisted discovery entry of this server: a
// well-formed value (the store's checks pass) naming the server's real
// ETags, whose /apis maps Deployment to a resource of its own, in the
// form the client reads (protobuf, JSON), or honest documents marked
// validated in the year 3000. The next process does not use what is not
// the ETags' documents (its /apis is read from the server, Deployment maps
// to deployments, and the entry is removed), and revalidates the one of
// the future before answering. On c7f0643 the forged entry was loaded
// (DiskLoads 1), confirmed by two 304s, and mapped pwnedthings.
func TestForgedDiscoveryIsVerifiedOnRead(t *testing.T) {
	r := startRedis(t)
	rdb := r.client(t)
	srv, url := docserver.Start(t, docserver.WithCRDs(20, 4))
	names := func(s *discovery.Snapshot) map[string]bool {
		out := map[string]bool{}
		for _, g := range s.Groups() {
			if g.Name != "apps" {
				continue
			}
			for _, v := range g.Versions {
				for _, res := range v.Resources {
					out[res.Name] = true
				}
			}
		}
		return out
	}
	// rewrite changes the bodies of the persisted entry in place (after
	// the header: 4 bytes of length, then the header's JSON), as the
	// attacker would, keeping the store's own framing valid.
	rewrite := func(t *testing.T, s *Store, change func(header, bodies []byte) ([]byte, []byte)) {
		t.Helper()
		keys := rdb.Keys(t.Context(), s.space+"*").Val()
		found := false
		for _, rk := range keys {
			raw, err := rdb.Get(t.Context(), rk).Bytes()
			if err != nil {
				t.Fatal(err)
			}
			server, k, value, err := decode(raw)
			if err != nil || !strings.HasPrefix(k.Name, "kubeatlas/discovery/v1\n") {
				continue
			}
			n := int(binary.LittleEndian.Uint32(value))
			header, bodies := change(bytes.Clone(value[4:4+n]), bytes.Clone(value[4+n:]))
			forged := binary.LittleEndian.AppendUint32(nil, uint32(len(header)))
			forged = append(append(forged, header...), bodies...)
			if err := rdb.SetArgs(t.Context(), rk, encode(server, k, forged), redis.SetArgs{KeepTTL: true}).Err(); err != nil {
				t.Fatal(err)
			}
			found = true
		}
		if !found {
			t.Fatal("no persisted discovery entry in the Redis")
		}
	}
	for _, tc := range []struct {
		name  string
		opts  []discovery.Option
		forge func(header, bodies []byte) ([]byte, []byte)
	}{
		{"protobuf, hostile /apis", nil, func(h, b []byte) ([]byte, []byte) {
			return h, bytes.ReplaceAll(b, []byte("deployments"), []byte("pwnedthings"))
		}},
		{"JSON, hostile /apis", []discovery.Option{discovery.WithJSONOnly()}, func(h, b []byte) ([]byte, []byte) {
			return h, bytes.ReplaceAll(b, []byte(`"resource":"deployments"`), []byte(`"resource":"pwnedthings"`))
		}},
		{"JSON, validated in the future", []discovery.Option{discovery.WithJSONOnly()}, func(h, b []byte) ([]byte, []byte) {
			var v map[string]any
			if err := json.Unmarshal(h, &v); err != nil {
				t.Fatal(err)
			}
			v["validated"] = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
			h, _ = json.Marshal(v)
			return h, b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := rdb.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			newClient := func() (*discovery.Client, *Store) {
				s, err := New(rdb, url)
				if err != nil {
					t.Fatal(err)
				}
				c, err := discovery.NewForHTTPClient(nil, url, append([]discovery.Option{discovery.WithDiskCache(s)}, tc.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				return c, s
			}
			first, store := newClient()
			if _, err := first.Snapshot(t.Context()); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for len(rdb.Keys(t.Context(), store.space+"*").Val()) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the snapshot was not persisted within 10s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			rewrite(t, store, tc.forge)
			srv.ResetRequests()
			next, _ := newClient()
			snap, err := next.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := names(snap)
			if got["pwnedthings"] || !got["deployments"] {
				t.Fatalf("apps resources %v: the forged entry was used (disk loads %d, %d requests)", got, next.Stats().DiskLoads, srv.Stats().Requests)
			}
			if srv.Stats().Requests == 0 {
				t.Errorf("answered from the store without asking the server")
			}
			if strings.Contains(tc.name, "hostile") {
				if next.Stats().DiskLoads != 0 {
					t.Errorf("DiskLoads = %d, want the forged entry refused", next.Stats().DiskLoads)
				}
			} else if !snap.Validated().Before(time.Now().Add(time.Minute)) {
				t.Errorf("validated %v: the future validation was believed", snap.Validated())
			}
		})
	}
}

// TestAnotherClustersEntryIsConfirmedByTheServer: whoever can write the
// Redis files another cluster's discovery entry, as that cluster's client
// wrote it (its documents are the ones its ETags name: every check of the
// entry's own passes), under this server's key, framed as this server's
// store writes it. A new client of this server does not answer it: it is
// cold until the server confirms the entry's ETags, which it does not
// (/apis answered 200), answers what the server sent, and the entry is
// replaced; the next client's warm start costs two conditional requests,
// both 304, before its first answer. Before, the other cluster's entry was
// answered with no request until the max age (30 s).
func TestAnotherClustersEntryIsConfirmedByTheServer(t *testing.T) {
	r := startRedis(t)
	rdb := r.client(t)
	_, urlA := docserver.Start(t, docserver.WithCRDs(30, 5))
	srvB, urlB := docserver.Start(t, docserver.WithCRDs(2, 1))
	ctx := t.Context()
	newDiscovery := func(url string) (*discovery.Client, *Store) {
		s, err := New(rdb, url)
		if err != nil {
			t.Fatal(err)
		}
		c, err := discovery.NewForHTTPClient(nil, url, discovery.WithDiskCache(s))
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	flat := func(s *discovery.Snapshot) string {
		var b strings.Builder
		for _, g := range s.Groups() {
			for _, v := range g.Versions {
				for _, res := range v.Resources {
					b.WriteString(g.Name + "/" + v.Version + "/" + res.Name + " ")
				}
			}
		}
		return b.String()
	}
	a, storeA := newDiscovery(urlA)
	snapA, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(rdb.Keys(ctx, storeA.space+"*").Val()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("cluster A's snapshot was not persisted within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	plain, err := discovery.NewForHTTPClient(nil, urlB)
	if err != nil {
		t.Fatal(err)
	}
	truthB, err := plain.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if flat(truthB) == flat(snapA) {
		t.Fatal("the two clusters serve the same discovery: the test proves nothing")
	}
	// A's entry, as B's store frames it, under B's key.
	_, storeB := newDiscovery(urlB)
	for _, rk := range rdb.Keys(ctx, storeA.space+"*").Val() {
		raw, err := rdb.Get(ctx, rk).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		_, k, value, err := decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, storeB.RedisKey(k), encode(storeB.server, k, value), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	srvB.ResetRequests()
	b, _ := newDiscovery(urlB)
	if s, err := b.Load(ctx); s != nil || err != nil {
		t.Errorf("Load: %v, %v; want the entry not published before the server confirms it", s, err)
	}
	if st := b.Stats(); st.DiskLoads != 1 {
		t.Fatalf("%+v: the planted entry was not read (the test proves nothing)", st)
	}
	got, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if flat(got) != flat(truthB) {
		t.Fatalf("cluster B's client answered %d resources, B serves %d (A %d): the other cluster's entry was used (%d requests to B)",
			len(strings.Fields(flat(got))), len(strings.Fields(flat(truthB))), len(strings.Fields(flat(snapA))), srvB.Stats().Requests)
	}
	if st := srvB.Statuses(); st["/apis"] != http.StatusOK || len(srvB.Requests()) != 2 {
		t.Errorf("B was asked %v, want /api and /apis once, /apis answered 200", st)
	}

	// The entry is now B's: a warm start costs two 304s, then answers it.
	deadline = time.Now().Add(10 * time.Second)
	for {
		srvB.ResetRequests()
		next, _ := newDiscovery(urlB)
		s, err := next.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := srvB.Statuses()
		if st["/api"] == http.StatusNotModified && st["/apis"] == http.StatusNotModified && len(srvB.Requests()) == 2 && flat(s) == flat(truthB) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a warm start from the replaced entry: %v, %d requests; want two 304s and B's discovery", st, len(srvB.Requests()))
		}
		time.Sleep(10 * time.Millisecond) // the entry is written after publication
	}
}
