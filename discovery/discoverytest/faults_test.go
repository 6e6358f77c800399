package discoverytest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

func TestFaultStatus(t *testing.T) {
	srv, base := discoverytest.Start(t)
	srv.InjectFault("/apis", discoverytest.Fault{Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second, Times: 2})
	for i := range 3 {
		resp, _ := get(t, base+"/apis", "Accept", acceptV2JSON)
		want := http.StatusTooManyRequests
		if i == 2 {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
		if i < 2 && resp.Header.Get("Retry-After") != "3" {
			t.Errorf("Retry-After %q, want 3", resp.Header.Get("Retry-After"))
		}
	}
	// Prefix rules, and clearing them.
	srv.InjectFault("/apis/*", discoverytest.Fault{Status: http.StatusServiceUnavailable})
	if resp, _ := get(t, base+"/apis/apps/v1"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("prefix fault: %d", resp.StatusCode)
	}
	if resp, _ := get(t, base+"/api/v1"); resp.StatusCode != http.StatusOK {
		t.Errorf("unmatched path: %d", resp.StatusCode)
	}
	srv.ClearFaults()
	if resp, _ := get(t, base+"/apis/apps/v1"); resp.StatusCode != http.StatusOK {
		t.Errorf("after ClearFaults: %d", resp.StatusCode)
	}
}

func TestFaultLatency(t *testing.T) {
	srv, base := discoverytest.Start(t)
	srv.InjectFault("/apis", discoverytest.Fault{Latency: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/apis", nil)
	_, err := http.DefaultClient.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a minute of latency against a short deadline: %v, want deadline exceeded", err)
	}
	// The slow handler ends with the request instead of holding a goroutine
	// for the rest of the minute. The log records a request when its
	// handler has returned.
	deadline := time.Now().Add(5 * time.Second)
	for !slices.ContainsFunc(srv.Requests(), func(r discoverytest.Request) bool { return r.Path == "/apis" }) {
		if time.Now().After(deadline) {
			t.Fatal("the handler of the abandoned request is still running")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFaultDamagedBodies(t *testing.T) {
	srv, base := discoverytest.Start(t)
	_, whole := get(t, base+"/apis", "Accept", acceptV2JSON)

	srv.InjectFault("/apis", discoverytest.Fault{ResetAfter: 100, Times: 1})
	if err := readAll(base+"/apis", acceptV2JSON); err == nil {
		t.Errorf("reset mid-body: the client read a whole body")
	}

	srv.InjectFault("/apis", discoverytest.Fault{Truncate: 1000, Times: 1})
	if err := readAll(base+"/apis", acceptV2JSON); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated body: %v, want unexpected EOF", err)
	}

	srv.InjectFault("/apis", discoverytest.Fault{ContentType: "text/html", Times: 1})
	resp, body := get(t, base+"/apis", "Accept", acceptV2JSON)
	if resp.Header.Get("Content-Type") != "text/html" || string(body) != string(whole) {
		t.Errorf("wrong content type: %q, body intact=%v", resp.Header.Get("Content-Type"), string(body) == string(whole))
	}

	srv.InjectFault("/apis", discoverytest.Fault{Oversize: 1 << 20, Times: 1})
	_, body = get(t, base+"/apis", "Accept", acceptV2JSON)
	if len(body) != len(whole)+1<<20 {
		t.Errorf("oversized body %d bytes, want %d", len(body), len(whole)+1<<20)
	}

	reqs := srv.Requests()
	if !reqs[1].Aborted || !reqs[2].Aborted || reqs[3].Aborted {
		t.Errorf("log marks aborted: %v %v %v, want true true false", reqs[1].Aborted, reqs[2].Aborted, reqs[3].Aborted)
	}
}

func readAll(url, accept string) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

// TestRequestLog: the log is what a test asserts "exactly 2 requests, both
// 304" with.
func TestRequestLog(t *testing.T) {
	srv, base := discoverytest.Start(t)
	api, _ := get(t, base+"/api", "Accept", acceptV2JSON)
	apis, body := get(t, base+"/apis", "Accept", acceptV2JSON)
	first := srv.Requests()
	if len(first) != 2 || first[1].Path != "/apis" || first[1].Accept != acceptV2JSON || first[1].Status != 200 ||
		first[1].Bytes != int64(len(body)) || first[1].Backend != "apiserver-0" || first[1].Method != http.MethodGet {
		t.Fatalf("log %+v", first)
	}
	srv.ResetRequests()
	get(t, base+"/api", "Accept", acceptV2JSON, "If-None-Match", api.Header.Get("ETag"))
	get(t, base+"/apis", "Accept", acceptV2JSON, "If-None-Match", apis.Header.Get("ETag"))
	st := srv.Stats()
	if st.Requests != 2 || st.NotModified != 2 || st.Bytes != 0 || st.Errors != 0 {
		t.Errorf("stats %+v, want 2 requests, both 304, no bytes", st)
	}
	if r := srv.Requests()[1]; r.IfNoneMatch != apis.Header.Get("ETag") {
		t.Errorf("logged If-None-Match %q", r.IfNoneMatch)
	}
	// The router's bookkeeping header never reaches the client.
	resp, _ := get(t, base+"/apis")
	for k := range resp.Header {
		if k == "X-Discoverytest-Backend" {
			t.Errorf("internal header leaked")
		}
	}
}

// TestConcurrentMutationsAndReads runs under -race in CI: readers of every
// endpoint while backends change. Every read must succeed (all four paths
// exist throughout: g001 comes from WithCRDs and is never churned), every
// reader must have read a number of times while the mutations ran, and the
// server must have answered no error (a recovered panic counts as one).
func TestConcurrentMutationsAndReads(t *testing.T) {
	srv, base := discoverytest.Start(t, discoverytest.WithBackends(2, discoverytest.RoundRobin), discoverytest.WithPeerAggregation(), discoverytest.WithCRDs(20, 4))
	paths := []string{"/apis", "/api", "/apis/g001.stress.example.com/v1", "/openapi/v3"}
	const minReads = 10
	reads := make([]atomic.Int64, len(paths))
	errs := make(chan error, len(paths))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i, path := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := readOK(base+path, acceptAll); err != nil {
					errs <- err
					return
				}
				reads[i].Add(1)
			}
		}()
	}
	enough := func() bool {
		for i := range reads {
			if reads[i].Load() < minReads {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	mutations := 0
	for ; mutations < 20 || (!enough() && len(errs) == 0); mutations++ {
		if time.Now().After(deadline) {
			t.Errorf("after %d mutations in 30s, some reader has fewer than %d reads", mutations, minReads)
			break
		}
		crd := discoverytest.CRD{Group: "churn.example.com", Versions: []string{"v1"}, Kind: "Churn"}
		if err := srv.Backends()[mutations%2].AddCRD(crd); err != nil {
			t.Error(err)
		}
		if err := srv.Backends()[mutations%2].RemoveCRD(crd.Group, "churns"); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, path := range paths {
		t.Logf("%s: %d reads during %d mutations", path, reads[i].Load(), mutations)
	}
	if st := srv.Stats(); st.Errors != 0 {
		t.Errorf("server answered %d errors in %d requests, want 0", st.Errors, st.Requests)
	}
}

// readOK reads url to the end and wants a 200.
func readOK(url, accept string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return fmt.Errorf("%s: %d: %w", url, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d, want 200", url, resp.StatusCode)
	}
	return nil
}
