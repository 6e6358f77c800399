package openapi3_test

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// changedClient is a client of a new server whose root is read once and
// never again by its max age (an hour), on a clock the test moves, with
// apps/v1's document held; the server's request log is then empty.
func changedClient(t *testing.T, opts ...docserver.Option) (*docserver.Server, *openapi3.Client, *clocktesting.FakePassiveClock) {
	t.Helper()
	srv, base := docserver.Start(t, opts...)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newClient(t, base, openapi3.WithClock(clk), openapi3.WithMaxAge(time.Hour))
	if _, err := c.Document(context.Background(), "apis/apps/v1"); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	return srv, c, clk
}

// paths are the paths of the requests srv answered since the last call,
// which forgets them.
func paths(srv *docserver.Server) []string {
	var out []string
	for _, r := range srv.Requests() {
		out = append(out, r.Path)
	}
	srv.ResetRequests()
	return out
}

// TestChangedFetchesTheChangedDocument: after Changed, the next call reads
// the root and the one group-version whose hash changed (a CRD's new
// schema, which discovery does not show), not a max age later; without
// Changed, and for the documents that did not change, nothing is sent; a
// mark within a second of the last read is answered a second after it.
func TestChangedFetchesTheChangedDocument(t *testing.T) {
	srv, c, clk := changedClient(t, docserver.WithCRDs(20, 4))
	ctx := context.Background()
	crd := schema.GroupVersion{Group: "g002.stress.example.com", Version: "v1"}
	held, err := c.Document(ctx, openapi3.PathFor(crd))
	if err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	clk.SetTime(clk.Now().Add(5 * time.Second))
	for range 10 {
		if _, err := c.Document(ctx, openapi3.PathFor(crd)); err != nil {
			t.Fatal(err)
		}
	}
	if got := paths(srv); len(got) != 0 {
		t.Fatalf("an unchanged server, no mark: requests %v; want none", got)
	}

	if err := srv.ChangeSchema(crd); err != nil {
		t.Fatal(err)
	}
	c.Changed()
	d, err := c.Document(ctx, openapi3.PathFor(crd))
	if err != nil {
		t.Fatal(err)
	}
	if d.URL == held.URL {
		t.Fatal("after Changed, the document of the old hash")
	}
	if _, err := c.Document(ctx, "apis/apps/v1"); err != nil {
		t.Fatal(err)
	}
	if got, want := paths(srv), []string{"/openapi/v3", "/openapi/v3/" + openapi3.PathFor(crd)}; !slices.Equal(got, want) {
		t.Errorf("after one change: requests %v; want %v", got, want)
	}

	// A mark within a second of the last read waits for the second.
	if err := srv.ChangeSchema(crd); err != nil {
		t.Fatal(err)
	}
	c.Changed()
	if again, _ := c.Document(ctx, openapi3.PathFor(crd)); again.URL != d.URL {
		t.Error("the root was read again within a second of the last read")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if newer, _ := c.Document(ctx, openapi3.PathFor(crd)); newer.URL == d.URL {
		t.Error("a mark made within a second of the last read was not answered a second later")
	}
	if got := paths(srv); len(got) != 2 {
		t.Errorf("requests %v; want the root and the document once", got)
	}
}

// TestChangedFloodReadsTheRootOnceASecond: however often Changed is
// called, the root is read at most once a second.
func TestChangedFloodReadsTheRootOnceASecond(t *testing.T) {
	srv, c, clk := changedClient(t)
	ctx := context.Background()
	const seconds = 5
	for range seconds * 100 {
		c.Changed()
		if _, err := c.Paths(ctx); err != nil {
			t.Fatal(err)
		}
		clk.SetTime(clk.Now().Add(10 * time.Millisecond))
	}
	if n := rootReads(srv); n > seconds+1 || n < seconds-1 {
		t.Errorf("%d root reads for %d marks over %ds; want about one a second", n, seconds*100, seconds)
	}
}

// TestChangedUnchangedRootReadAgain: a mark whose read finds the root
// unchanged (a server that serves the change a moment after its watch
// event: a real one, a second or so after, later under load) gets more
// reads, half a second apart to 2 s, a second apart to 6 s and then 2, 4,
// 8 and 16 s apart, the next of which finds the change; a mark for a
// change that never shows costs 13 reads over 36 s, no more.
func TestChangedUnchangedRootReadAgain(t *testing.T) {
	srv, c, clk := changedClient(t)
	ctx := context.Background()
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	held, _ := c.Paths(ctx)
	clk.SetTime(clk.Now().Add(2 * time.Second))
	c.Changed()
	reads := func(halves int) []int { // root reads after each half second
		var out []int
		for range halves {
			if _, err := c.Paths(ctx); err != nil {
				t.Fatal(err)
			}
			out = append(out, rootReads(srv))
			clk.SetTime(clk.Now().Add(time.Second / 2))
		}
		return out
	}
	// Reads at 0, 0.5 and 1 s find nothing.
	if got := reads(3); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("root reads by half second %v; want [1 2 3]", got)
	}
	if err := srv.ChangeSchema(apps); err != nil {
		t.Fatal(err)
	}
	root, err := c.Paths(ctx) // at 1.5 s
	if err != nil {
		t.Fatal(err)
	}
	if root[openapi3.PathFor(apps)] == held[openapi3.PathFor(apps)] {
		t.Error("the change served 1.5 s after the mark was not found by its fourth read")
	}
	if n := rootReads(srv); n != 4 {
		t.Errorf("%d root reads; want 4", n)
	}

	srv.ResetRequests()
	clk.SetTime(clk.Now().Add(time.Second))
	c.Changed()    // a change that never shows
	var want []int // reads at 0, 0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 12, 20 and 36 s, then none (in half seconds)
	for h, n := 0, 0; h < 120; h++ {
		if slices.Contains([]int{0, 1, 2, 3, 4, 6, 8, 10, 12, 16, 24, 40, 72}, h) {
			n++
		}
		want = append(want, n)
	}
	if got := reads(120); !slices.Equal(got, want) {
		t.Errorf("root reads by half second %v for a mark whose change never shows; want reads at 0, 0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 12, 20 and 36 s, then none", got)
	}
}

// TestChangedFindsAndForgetsGroupVersions: after Changed, a group-version
// the server serves since is found, and one it no longer serves is an
// ErrNotFound for Document and Kind, with the document held for it
// before.
func TestChangedFindsAndForgetsGroupVersions(t *testing.T) {
	srv, c, clk := changedClient(t)
	ctx := context.Background()
	widget := schema.GroupVersionKind{Group: "late.example.com", Version: "v1", Kind: "Widget"}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if _, err := c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddCRD(docserver.CRD{Group: widget.Group, Versions: []string{widget.Version}, Kind: widget.Kind}); err != nil {
		t.Fatal(err)
	}
	c.Changed()
	clk.SetTime(clk.Now().Add(time.Second))
	root, err := c.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := root[openapi3.PathFor(widget.GroupVersion())]; !ok {
		t.Fatal("the new group-version is not listed after Changed")
	}
	if _, err := c.Kind(ctx, widget); err != nil {
		t.Fatalf("the new kind: %v", err)
	}

	if err := srv.RemoveCRD(widget.Group, "widgets"); err != nil {
		t.Fatal(err)
	}
	c.Changed()
	clk.SetTime(clk.Now().Add(time.Second))
	srv.ResetRequests()
	if _, err := c.Kind(ctx, widget); !errors.Is(err, openapi3.ErrNotFound) {
		t.Errorf("Kind of a removed group-version: %v; want ErrNotFound", err)
	}
	if _, err := c.Document(ctx, openapi3.PathFor(widget.GroupVersion())); !errors.Is(err, openapi3.ErrNotFound) {
		t.Errorf("Document of a removed group-version: %v; want ErrNotFound", err)
	}
	if got := paths(srv); !slices.Equal(got, []string{"/openapi/v3"}) {
		t.Errorf("requests %v; want the root alone", got)
	}
}

// TestChangedDropsRemovedDocuments: the document of a group-version the
// root no longer lists is dropped once the root is read, not held until
// the client is: a table the client shares (WithDocuments), which holds
// what some client holds, forgets it.
func TestChangedDropsRemovedDocuments(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	table := openapi3.NewDocuments()
	c := newClient(t, base, openapi3.WithClock(clk), openapi3.WithMaxAge(time.Hour), openapi3.WithDocuments(table))
	ctx := context.Background()
	late := schema.GroupVersion{Group: "late.example.com", Version: "v1"}
	if err := srv.AddCRD(docserver.CRD{Group: late.Group, Versions: []string{late.Version}, Kind: "Widget"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"apis/apps/v1", openapi3.PathFor(late)} {
		if _, err := c.Document(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if n := table.Len(); n != 2 {
		t.Fatalf("the table holds %d documents; want 2", n)
	}
	if err := srv.RemoveCRD(late.Group, "widgets"); err != nil {
		t.Fatal(err)
	}
	c.Changed()
	clk.SetTime(clk.Now().Add(time.Second))
	if _, err := c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC() // the cleanup of a weak entry runs after the cycle that frees it
	if n := table.Len(); n != 1 {
		t.Errorf("after the root dropped %s, the table holds %d documents; want 1 (apps/v1's)", late, n)
	}
	runtime.KeepAlive(c) // which holds apps/v1's
}

// TestChangedThrottledReadKeepsTheMark: a root read the server refuses
// with a 429 (API Priority and Fairness throttling the identity) does not
// answer Changed's mark: once its Retry-After has passed, the first call a
// second after the refusal reads the root again and finds the change,
// where a failed read otherwise answers the marks and leaves the next read
// to the max age. A call answered with the held 429 while told to wait
// sends nothing and is no try: it does not put the next read a second
// after it. Issue 47's soak found a throttled identity's schemas up
// to 13.7 s behind the server, of the time it was free to ask.
func TestChangedThrottledReadKeepsTheMark(t *testing.T) {
	srv, base := docserver.Start(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	// No retries: the 429 is not waited out within the read, so the
	// client holds it for its Retry-After.
	c := newClient(t, base, openapi3.WithClock(clk), openapi3.WithMaxAge(time.Hour), openapi3.WithMaxRetries(0))
	ctx := context.Background()
	if _, err := c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	widget := schema.GroupVersion{Group: "late.example.com", Version: "v1"}
	if err := srv.AddCRD(docserver.CRD{Group: widget.Group, Versions: []string{widget.Version}, Kind: "Widget"}); err != nil {
		t.Fatal(err)
	}
	srv.InjectFault("/openapi/v3", docserver.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Times: 1})
	srv.ResetRequests()
	c.Changed()
	clk.SetTime(clk.Now().Add(2 * time.Second))
	root, err := c.Paths(ctx)
	if err != nil {
		t.Fatalf("the refused read: %v; want the root held", err)
	}
	if _, ok := root[openapi3.PathFor(widget)]; ok {
		t.Fatal("the refused read listed the new group-version")
	}
	if st := srv.Statuses(); st["/openapi/v3"] != http.StatusTooManyRequests {
		t.Fatalf("statuses %v; want the root refused with a 429", st)
	}
	// A call a second and a half later, still told to wait: answered
	// with the held 429 and nothing sent, which is no try.
	clk.SetTime(clk.Now().Add(1500 * time.Millisecond))
	if _, err := c.Paths(ctx); err != nil {
		t.Fatal(err)
	}
	if st := srv.Statuses(); len(st) != 1 {
		t.Fatalf("requests %v while told to wait; want the refused read alone", st)
	}
	time.Sleep(1100 * time.Millisecond) // the Retry-After, which the client holds in real time
	// Half a second after the held answer, two after the refused read.
	clk.SetTime(clk.Now().Add(500 * time.Millisecond))
	root, err = c.Paths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := root[openapi3.PathFor(widget)]; !ok {
		t.Errorf("the first call a second after the refusal, its wait passed: the new group-version is not listed (requests %v)", paths(srv))
	}
}
