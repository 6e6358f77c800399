package httpx

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"
)

// recorder is a set of client-go metrics adapters that write down what
// they are told, one line per call, as a program's adapters
// (controller-runtime's) would count it.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// take returns the lines written since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

type resultAdapter struct{ r *recorder }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.r.add("result %s %s %s", code, method, host)
}

type retryAdapter struct{ r *recorder }

func (a retryAdapter) IncrementRetry(_ context.Context, code, method, host string) {
	a.r.add("retry %s %s %s", code, method, host)
}

type latencyAdapter struct{ r *recorder }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, _ time.Duration) {
	a.r.add("latency %s %s", verb, u.String())
}

type sizeAdapter struct{ r *recorder }

func (a sizeAdapter) Observe(_ context.Context, verb, host string, size float64) {
	a.r.add("size %s %s %v", verb, host, size)
}

var (
	registerOnce sync.Once
	recorded     = &recorder{}
)

// record registers the recording adapters (client-go takes one
// registration per process) and empties what they hold.
func record(t *testing.T) *recorder {
	t.Helper()
	registerOnce.Do(func() {
		metrics.Register(metrics.RegisterOpts{
			RequestResult:  resultAdapter{recorded},
			RequestRetry:   retryAdapter{recorded},
			RequestLatency: latencyAdapter{recorded},
			ResponseSize:   sizeAdapter{recorded},
		})
	})
	recorded.take()
	return recorded
}

// TestMetricsAsClientGoReportsThem: for the same requests (discovery's,
// openapi3's, a resource path, a 404, a 429 retried, a path outside /api),
// under a base with and without a path prefix, Get reports to client-go's
// metrics adapters exactly what client-go's rest.Request reports: the same
// calls with the same labels (code, method, host, the URL template), so
// that a program's rest_client_requests_total counts both alike.
func TestMetricsAsClientGoReportsThem(t *testing.T) {
	rec := record(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/apis/flaky.example/v1"):
			// Every other request is told to come back at once.
			if hits.Add(1)%2 == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
		case strings.HasSuffix(r.URL.Path, "/apis/missing.example/v1"):
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"APIGroupList"}`)
	}))
	defer srv.Close()

	refs := []string{
		"/api", "/apis", "/api/v1", "/apis/apps/v1",
		"/openapi/v3", "/openapi/v3/apis/apps/v1?hash=AB12",
		"/api/v1/namespaces/ns/pods/p", "/apis/apps/v1/namespaces/ns/deployments/d/status",
		"/apis/apps/v1/namespaces/ns/deployments", "/api/v1/namespaces/ns/finalize",
		"/apis/missing.example/v1", "/apis/flaky.example/v1", "/version",
	}
	for _, prefix := range []string{"", "/k8s/clusters/c-1"} {
		base, _ := url.Parse(srv.URL + prefix)
		ours := NewClient(srv.Client(), base, 3)
		ours.MaxRetries = 3
		ours.Body = Options{Limit: 1 << 20}
		theirs, err := rest.NewRESTClient(base, "", rest.ClientContentConfig{}, nil, srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range refs {
			p, query, _ := strings.Cut(ref, "?")
			req := theirs.Get().AbsPath(p) // under the base path, as ours
			if query != "" {
				q, _ := url.ParseQuery(query)
				for k, v := range q {
					req = req.Param(k, v[0])
				}
			}
			_, _ = req.DoRaw(context.Background())
			want := rec.take()
			if len(want) < 2 {
				t.Fatalf("client-go reported %q for GET %s: are the adapters registered?", want, ref)
			}
			_, _ = ours.Get(context.Background(), Request{Ref: ref, Accept: "application/json"})
			got := rec.take()
			if !slices.Equal(got, want) {
				t.Errorf("base %q, GET %s: reported\n\t%s\nclient-go reports\n\t%s", base, ref, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
			}
		}
	}
}

// TestMetricsTransportError: a request that gets no response is counted
// with the code "<error>", as client-go counts it, and still observed for
// latency.
func TestMetricsTransportError(t *testing.T) {
	rec := record(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	base, _ := url.Parse(srv.URL)
	srv.Close()
	if _, err := NewClient(nil, base, 3).Get(context.Background(), Request{Ref: "/apis"}); err == nil {
		t.Fatal("a closed server answered")
	}
	want := []string{"result <error> GET " + base.Host, "latency GET " + srv.URL + "/apis"}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("reported %q, want %q", got, want)
	}
}
