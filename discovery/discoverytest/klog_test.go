package discoverytest_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// TestQuietByDefault: a process that builds and changes a Server prints
// none of the real handlers' "Adding GroupVersion" lines (about 28 a start
// used to go to its stderr), while its own klog lines still reach stderr
// as klog prints them. In a child process, as klog's state is the
// process's.
func TestQuietByDefault(t *testing.T) {
	if os.Getenv("DISCOVERYTEST_QUIET_CHILD") != "" {
		srv, err := discoverytest.NewServer(discoverytest.WithCRDs(10, 2))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.AddCRD(discoverytest.SyntheticCRDs(11, 3)[10]); err != nil {
			t.Fatal(err)
		}
		klog.Info("the program's own line")
		klog.Flush()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestQuietByDefault$")
	cmd.Env = append(os.Environ(), "DISCOVERYTEST_QUIET_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Adding GroupVersion") {
		t.Errorf("the handlers' lines reached stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "] the program's own line") {
		t.Errorf("the program's own klog line is gone; stderr:\n%s", stderr.String())
	}
}

// TestWithLogger: the real handlers' lines go to the logger of the Server
// whose start or change logged them, and only to it.
func TestWithLogger(t *testing.T) {
	var logged bytes.Buffer
	l := slog.New(slog.NewTextHandler(&logged, nil))
	srv, err := discoverytest.NewServer(discoverytest.WithLogger(l))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(logged.String(), "Adding GroupVersion")
	if lines < 20 || !strings.Contains(logged.String(), `msg="Adding GroupVersion apps v1 to ResourceManager" source=handler.go:`) {
		t.Fatalf("%d lines logged:\n%s", lines, logged.String())
	}
	if _, err := discoverytest.NewServer(discoverytest.WithCRDs(10, 2)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logged.String(), "Adding GroupVersion"); n != lines {
		t.Errorf("another server's start logged %d lines here", n-lines)
	}
	if err := srv.AddCRD(discoverytest.SyntheticCRDs(1, 1)[0]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "Adding GroupVersion g000.stress.example.com v1") {
		t.Errorf("a change's lines are not logged:\n%s", logged.String())
	}
}

// TestSlowLoggerHoldsUpNothing pins that a Server's logger, the user's
// code, runs under no lock: while one Server's handler is stuck on a
// change's lines, another Server can be built and changed (klog's router
// is process-wide) and the stuck Server answers its OpenAPI paths (which
// read the Backend's state). Before, the handler ran under the router's
// lock and the Backend's.
func TestSlowLoggerHoldsUpNothing(t *testing.T) {
	h := &stuckHandler{entered: make(chan struct{}), release: make(chan struct{})}
	stuck, err := discoverytest.NewServer(discoverytest.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	other, err := discoverytest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	h.armed.Store(true)
	changed := make(chan error, 1)
	go func() { changed <- stuck.AddCRD(discoverytest.SyntheticCRDs(1, 1)[0]) }()
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the change logged nothing")
	}
	defer func() {
		close(h.release)
		if err := <-changed; err != nil {
			t.Error(err)
		}
	}()

	within := func(what string, fn func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s waits for another Server's logger", what)
		}
	}
	within("NewServer", func() {
		if _, err := discoverytest.NewServer(); err != nil {
			t.Error(err)
		}
	})
	within("a change of another Server", func() {
		if err := other.AddCRD(discoverytest.SyntheticCRDs(1, 1)[0]); err != nil {
			t.Error(err)
		}
	})
	within("a request for an OpenAPI document", func() {
		rec := httptest.NewRecorder()
		stuck.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi/v3/apis/apps/v1", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET /openapi/v3/apis/apps/v1: %d", rec.Code)
		}
	})
}

// stuckHandler is a slog handler that, once armed, blocks every record
// until release is closed, telling entered of the first.
type stuckHandler struct {
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (h *stuckHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *stuckHandler) Handle(context.Context, slog.Record) error {
	if h.armed.Load() {
		h.once.Do(func() { close(h.entered) })
		<-h.release
	}
	return nil
}
func (h *stuckHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *stuckHandler) WithGroup(string) slog.Handler      { return h }
