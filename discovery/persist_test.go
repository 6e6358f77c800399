package discovery_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/diskcache"
)

// TestWarmStart: a second client on the same disk cache starts from one
// file: no request while the snapshot is younger than the max age, two
// 304s after, and a full read when the file is damaged.
func TestWarmStart(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithCRDs(30, 5))
	root := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Now())
	newDisk := func() *diskcache.Cache {
		d, err := diskcache.Open(root, base)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := newClient(t, base, discovery.WithDiskCache(newDisk()), discovery.WithClock(clk), discovery.WithMaxAge(time.Minute))
	want, err := first.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	srv.ResetRequests()
	second := newClient(t, base, discovery.WithDiskCache(newDisk()), discovery.WithClock(clk), discovery.WithMaxAge(time.Minute))
	got, err := second.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Stats().Requests; n != 0 || second.Stats().DiskLoads != 1 {
		t.Errorf("warm start inside the max age: %d requests, %d disk loads", n, second.Stats().DiskLoads)
	}
	if !slices.Equal(flatten(got), flatten(want)) || got.Source() != want.Source() {
		t.Errorf("the warm snapshot differs from the one persisted")
	}

	clk.Step(2 * time.Minute)
	third := newClient(t, base, discovery.WithDiskCache(newDisk()), discovery.WithClock(clk), discovery.WithMaxAge(time.Minute))
	srv.ResetRequests()
	if _, err := third.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Requests != 2 || st.NotModified != 2 {
		t.Errorf("warm start past the max age: %+v, want two 304s", st)
	}

	// Damage every file: the next client reads from the server instead.
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && info.Name()[0] != '.' {
			os.WriteFile(p, []byte("garbage"), 0o600)
		}
		return nil
	})
	srv.ResetRequests()
	fourth := newClient(t, base, discovery.WithDiskCache(newDisk()), discovery.WithClock(clk))
	s, err := fourth.Snapshot(context.Background())
	if err != nil || len(s.Groups()) != len(want.Groups()) {
		t.Fatalf("after damage: %v", err)
	}
	if st := srv.Stats(); st.Requests != 2 || st.NotModified != 0 {
		t.Errorf("after damage: %+v, want a full read", st)
	}
}
