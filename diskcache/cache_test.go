package diskcache_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/diskcache"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

func open(t testing.TB, root string, opts ...diskcache.Option) *diskcache.Cache {
	t.Helper()
	c, err := diskcache.Open(root, "https://cluster.example.com:6443", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAcceptanceSuite: the Cache passes the Store suite, corruption, put
// errors and its byte bound included.
func TestAcceptanceSuite(t *testing.T) {
	const bound = 1 << 20
	diskcachetest.Run(t, func(t *testing.T) diskcachetest.Store {
		return open(t, t.TempDir(), diskcache.WithMaxBytes(bound))
	}, diskcachetest.Hooks{
		Corrupt: func(t *testing.T, s diskcachetest.Store, key diskcache.Key) {
			for _, f := range entryFiles(t, s.(*diskcache.Cache).Dir()) {
				b, err := os.ReadFile(f)
				if err != nil || !bytes.Contains(b, []byte(key.Name)) {
					continue
				}
				b[len(b)-3] ^= 0x20
				if err := os.WriteFile(f, b, 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Fatalf("no entry file holds %+v", key)
		},
		// A file where the cache's directory was: every write fails, also
		// for root (CI runs as root, whom permissions do not stop).
		BreakPuts: func(t *testing.T, s diskcachetest.Store) {
			dir := s.(*diskcache.Cache).Dir()
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		MaxBytes: bound,
		Usage: func(s diskcachetest.Store) int64 {
			n, _ := s.(*diskcache.Cache).Usage()
			return n
		},
	})
}

// entryFiles lists the entry files (not locks or temporary files).
func entryFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestCorruptionIsAMiss: a torn, flipped, truncated, empty or foreign file
// is a miss, is removed, and the next write works.
func TestCorruptionIsAMiss(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"truncated":   func(b []byte) []byte { return b[:len(b)/2] },
		"flipped bit": func(b []byte) []byte { b[len(b)-3] ^= 1; return b },
		"empty":       func([]byte) []byte { return nil },
		"foreign":     func([]byte) []byte { return []byte(`{"kind":"APIGroupList"}`) },
		"longer":      func(b []byte) []byte { return append(b, "junk"...) },
	} {
		t.Run(name, func(t *testing.T) {
			c := open(t, t.TempDir())
			c.Put(diskcache.Key{Name: "k"}, []byte("a value worth keeping"))
			files := entryFiles(t, c.Dir())
			if len(files) != 1 {
				t.Fatalf("%d files", len(files))
			}
			b, _ := os.ReadFile(files[0])
			if err := os.WriteFile(files[0], damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if v, ok := c.Get(diskcache.Key{Name: "k"}); ok {
				t.Fatalf("damaged entry read as %q", v)
			}
			if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
				t.Errorf("damaged file not removed")
			}
			if c.Stats().Corrupt != 1 {
				t.Errorf("stats %+v", c.Stats())
			}
			c.Put(diskcache.Key{Name: "k"}, []byte("again"))
			if v, ok := c.Get(diskcache.Key{Name: "k"}); !ok || string(v) != "again" {
				t.Errorf("after rewrite: %q %v", v, ok)
			}
		})
	}
}

// TestClusterDirStaysInside: no server name reaches outside the root.
func TestClusterDirStaysInside(t *testing.T) {
	for _, u := range []string{"https://../../etc", "https://a/b/../../..", "..", "/", "", "https://UPPER.example.com:443/prefix", "https://[::1]:6443", strings.Repeat("x", 500)} {
		d := diskcache.ClusterDir(u)
		if d == "" || strings.ContainsAny(d, `/\`) || strings.HasPrefix(d, ".") || filepath.Clean(d) != d || len(d) > 100 {
			t.Errorf("ClusterDir(%q) = %q", u, d)
		}
	}
	if diskcache.ClusterDir("https://a:1") == diskcache.ClusterDir("https://a:2") {
		t.Errorf("two servers share a directory")
	}
}

// TestCompactionBounds: the cache stays within its bounds, evicting the
// least recently used first (recency from reads, kept in memory).
func TestCompactionBounds(t *testing.T) {
	// Recency is the later of an entry's modification time (real) and its
	// last use in this process (the clock): a clock an hour ahead makes
	// every use later than every file's time, and each step orders them.
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	c := open(t, t.TempDir(), diskcache.WithMaxEntries(20), diskcache.WithMaxBytes(1<<30), diskcache.WithClock(clk))
	set := func(key string) {
		t.Helper()
		clk.Step(time.Millisecond)
		if err := c.Put(diskcache.Key{Name: key}, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		set(fmt.Sprint("k", i))
	}
	clk.Step(time.Second) // k0 read well after every write
	if _, ok := c.Get(diskcache.Key{Name: "k0"}); !ok {
		t.Fatal("k0 missing")
	}
	for i := 20; i < 60; i++ {
		set(fmt.Sprint("k", i))
		clk.Step(time.Millisecond)
		if _, ok := c.Get(diskcache.Key{Name: "k0"}); !ok { // in use all along
			t.Fatalf("k0 evicted at k%d", i)
		}
		if _, n := c.Usage(); n > 20 {
			t.Fatalf("%d entries over a bound of 20", n)
		}
	}
	if _, ok := c.Get(diskcache.Key{Name: "k0"}); !ok {
		t.Errorf("the recently read entry was evicted")
	}
	if _, ok := c.Get(diskcache.Key{Name: "k1"}); ok {
		t.Errorf("an old unread entry survived")
	}
	if c.Stats().Evictions == 0 {
		t.Errorf("no evictions counted")
	}
	sized := open(t, t.TempDir(), diskcache.WithMaxBytes(64<<10))
	for i := range 100 {
		sized.Put(diskcache.Key{Name: fmt.Sprint("k", i)}, bytes.Repeat([]byte("x"), 4000))
	}
	if b, _ := sized.Usage(); b > 64<<10 {
		t.Errorf("%d bytes over a bound of 64 KiB", b)
	}
}

// TestOneFilePerName: after churn, one file per Name is left, whether one
// process wrote every Version or each round was a new process (as kubectl
// explain runs are), and asking for an old Version is a plain miss.
func TestOneFilePerName(t *testing.T) {
	c := open(t, t.TempDir())
	for round := range 5 {
		for _, name := range []string{"apis/apps/v1\njson", "apis/apps/v1\nprotobuf", "apis/batch/v1\njson"} {
			c.Put(diskcache.Key{Name: name, Version: fmt.Sprintf("%04d", round)}, []byte("doc"))
		}
	}
	c.Put(diskcache.Key{Name: "/apis"}, []byte("discovery"))
	if _, n := c.Usage(); n != 4 {
		t.Errorf("%d entries, want 3 live Versions and one without", n)
	}
	if n := len(entryFiles(t, c.Dir())); n != 4 {
		t.Errorf("%d files, want 4", n)
	}

	root := t.TempDir()
	var last *diskcache.Cache
	for round := range 10 {
		last = open(t, root) // a new process's view each round
		last.Put(diskcache.Key{Name: "apis/apps/v1", Version: fmt.Sprintf("%04d", round)}, []byte(fmt.Sprint("doc", round)))
	}
	if n := len(entryFiles(t, last.Dir())); n != 1 {
		t.Fatalf("%d files after 10 processes each wrote a new Version, want 1", n)
	}
	if _, ok := last.Get(diskcache.Key{Name: "apis/apps/v1", Version: "0003"}); ok {
		t.Errorf("an old Version was served")
	}
	if v, ok := open(t, root).Get(diskcache.Key{Name: "apis/apps/v1", Version: "0009"}); !ok || string(v) != "doc9" {
		t.Errorf("the live Version: %q %v", v, ok)
	}
	if st := last.Stats(); st.Corrupt != 0 || st.Misses != 1 {
		t.Errorf("an old Version is not one plain miss: %+v", st)
	}
}

// TestCompactionUnderLoad: readers and writers in this process while
// another cache on the same directory compacts: no reader ever gets a
// value that was not written.
func TestCompactionUnderLoad(t *testing.T) {
	root := t.TempDir()
	a := open(t, root, diskcache.WithMaxEntries(30))
	b := open(t, root, diskcache.WithMaxEntries(30))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprint("k", (i*7+w)%80)
				a.Put(diskcache.Key{Name: k}, []byte(k+"-value"))
				if v, ok := a.Get(diskcache.Key{Name: fmt.Sprint("k", i%80)}); ok && !strings.HasSuffix(string(v), "-value") {
					t.Errorf("torn read %q", v)
					return
				}
			}
		}()
	}
	for range 30 {
		if err := b.Compact(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

// TestHelperWriter is not a test: it is a child process for the tests
// below, writing entries until it is done or killed.
func TestHelperWriter(t *testing.T) {
	root := os.Getenv("DISKCACHE_HELPER_ROOT")
	if root == "" {
		t.Skip("helper process only")
	}
	id := os.Getenv("DISKCACHE_HELPER_ID")
	c := open(t, root, diskcache.WithMaxEntries(200))
	n, _ := strconv.Atoi(os.Getenv("DISKCACHE_HELPER_N"))
	for i := 0; n == 0 || i < n; i++ {
		k := fmt.Sprint("shared-", i%50)
		c.Put(diskcache.Key{Name: k}, bytes.Repeat([]byte(k+"/"+id+";"), 500))
		if v, ok := c.Get(diskcache.Key{Name: fmt.Sprint("shared-", (i+25)%50)}); ok && !validValue(v) {
			t.Fatalf("torn read in writer %s", id)
		}
	}
}

func validValue(v []byte) bool {
	parts := strings.Split(strings.TrimSuffix(string(v), ";"), ";")
	for _, p := range parts {
		if p != parts[0] {
			return false
		}
	}
	return len(parts) == 500
}

func helper(t *testing.T, root, id string, n int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DISKCACHE_HELPER_ROOT="+root, "DISKCACHE_HELPER_ID="+id, "DISKCACHE_HELPER_N="+strconv.Itoa(n))
	return cmd
}

// TestManyProcesses: several OS processes write, read and compact one
// directory at once; every entry left is whole.
func TestManyProcesses(t *testing.T) {
	root := t.TempDir()
	var cmds []*exec.Cmd
	for i := range 4 {
		cmd := helper(t, root, strconv.Itoa(i), 400)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	c := open(t, root)
	for i := range 50 {
		if v, ok := c.Get(diskcache.Key{Name: fmt.Sprint("shared-", i)}); ok && !validValue(v) {
			t.Errorf("entry %d torn", i)
		}
	}
	if c.Stats().Corrupt != 0 {
		t.Errorf("corrupt entries after concurrent writers: %+v", c.Stats())
	}
}

// TestKilledWriter: a process killed while writing leaves a usable cache.
func TestKilledWriter(t *testing.T) {
	root := t.TempDir()
	for round := range 3 {
		cmd := helper(t, root, "doomed", 0)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it while it writes: once entries appear (a test binary can
		// take a while to start under -race), and a moment later.
		deadline := time.Now().Add(30 * time.Second)
		for len(entryFiles(t, root)) <= round && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(30 * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	c := open(t, root)
	read := 0
	for i := range 50 {
		if v, ok := c.Get(diskcache.Key{Name: fmt.Sprint("shared-", i)}); ok {
			read++
			if !validValue(v) {
				t.Errorf("entry %d torn", i)
			}
		}
	}
	if read == 0 {
		t.Errorf("the killed writers left nothing readable")
	}
	if c.Stats().Corrupt != 0 {
		t.Errorf("a killed writer left a corrupt entry in place: %+v", c.Stats())
	}
	c.Put(diskcache.Key{Name: "after"}, []byte("works"))
	if v, ok := c.Get(diskcache.Key{Name: "after"}); !ok || string(v) != "works" {
		t.Errorf("cache unusable after killed writers")
	}
}

// BenchmarkReplace: a value's next Version replacing its entry, as a
// changed OpenAPI document's store does (316 KB, a changed document's size
// at 3000 CRDs), five names in turn, as a round of five changed documents.
// The time is the caller's: what the kernel writes back later is not.
//
//	go test -run '^$' -bench Replace -benchtime 500x ./diskcache/
func BenchmarkReplace(b *testing.B) {
	c := open(b, b.TempDir())
	value := bytes.Repeat([]byte(`{"openapi":"3.0.0"} `), 316<<10/20)
	var i int
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		i++
		if err := c.Put(diskcache.Key{Name: fmt.Sprint("apis/g", i%5, "/v1"), Version: fmt.Sprint(i)}, value); err != nil {
			b.Fatal(err)
		}
	}
}
