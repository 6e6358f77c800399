//go:build unix

package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// redisServer is a real redis-server on loopback, for one test: no
// persistence, its files in a temporary directory.
type redisServer struct {
	path, dir string
	addr      string
	cmd       *exec.Cmd
	out       *syncBuffer
	waitExit  chan struct{} // closed when the server exits; nil when stopped
}

// startRedis starts redis-server (the Debian package redis-server) on a
// free loopback port, or skips where it is not installed (fails with
// KUBEATLAS_REQUIRE_EXTERNAL set, as in .ci/run). The tests that use it
// build on Unix only: redis-server is Unix software, and they signal it.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	r := &redisServer{path: testenv.Tool(t, "redis-server"), dir: t.TempDir()}
	var err error
	for range 3 { // another process may take the free port first
		if r.addr, err = freePort(); err == nil {
			if err = r.start(); err == nil {
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(r.stop)
	return r
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs redis-server on r.addr and waits until it answers PING.
func (r *redisServer) start() error {
	_, port, _ := net.SplitHostPort(r.addr)
	r.out = &syncBuffer{}
	r.cmd = exec.Command(r.path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(exited) }()
	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("exited before answering:\n%s", r.out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			r.waitExit = exited
			return nil
		}
		if time.Now().After(deadline) {
			_ = r.cmd.Process.Kill()
			<-exited
			return fmt.Errorf("no PING answer within 10s (%v):\n%s", err, r.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the server (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (r *redisServer) stop() {
	if r.waitExit == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT) // in case a test stopped it
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.waitExit:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.waitExit
	}
	r.waitExit = nil
}

// restart starts the server again on the same address.
func (r *redisServer) restart(t *testing.T) {
	t.Helper()
	r.stop()
	if err := r.start(); err != nil {
		t.Fatalf("restarting redis-server: %v", err)
	}
}

// client returns a client of the server, closed when the test ends.
func (r *redisServer) client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// configSet sets a server setting for the rest of the test.
func (r *redisServer) configSet(t *testing.T, c *redis.Client, name, value string) {
	t.Helper()
	old, err := c.ConfigGet(t.Context(), name).Result()
	if err != nil {
		t.Fatalf("CONFIG GET %s: %v", name, err)
	}
	if err := c.ConfigSet(t.Context(), name, value).Err(); err != nil {
		t.Fatalf("CONFIG SET %s %s: %v", name, value, err)
	}
	t.Cleanup(func() {
		if r.waitExit != nil {
			_ = c.ConfigSet(context.Background(), name, old[name]).Err()
		}
	})
}

// usedMemory is the server's used_memory (INFO memory).
func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatalf("INFO memory: %v", err)
	}
	for _, line := range bytes.Split([]byte(info), []byte("\r\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("used_memory:")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				t.Fatalf("used_memory %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO memory has no used_memory:\n%s", info)
	return 0
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
