package rec

import (
	"slices"
	"sync"
	"testing"
)

// Functions as the tool instruments them, in made-up files: a.go calls
// b.go twice, and its first call starts a helper goroutine.
func a(wg *sync.WaitGroup) {
	defer Enter("a.go", "a", false)()
	b(wg)
	b(nil)
}

func b(wg *sync.WaitGroup) {
	defer Enter("b.go", "b", false)()
	if wg != nil {
		wg.Go(func() { defer Enter("c.go", "b.func1", true)(); c() })
		wg.Wait()
	}
}

func c() { defer Enter("c.go", "c", false)() }

func TestWalk(t *testing.T) {
	// A goroutine started before recording is not recorded.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		<-stop
		c()
	}()
	Start()
	var wg sync.WaitGroup
	done := make(chan struct{})
	c()                                       // the caller's own step
	go func() { defer close(done); a(&wg) }() // the run: the first goroutine the caller starts
	<-done
	close(stop)
	<-stopped
	r := Stop()

	all := func(string) bool { return true }
	for _, tc := range []struct {
		rule    Rule
		steps   []string
		returns int
		calls   int // of c.go
	}{
		// a > b > a > b > a: two returns to a.go; the caller and the helper not walked.
		{Rule{Files: all}, []string{"a.go", "b.go", "a.go", "b.go", "a.go"}, 2, 0},
		{Rule{Caller: true, Files: all}, []string{"c.go", "a.go", "b.go", "a.go", "b.go", "a.go"}, 2, 1},
		// The helper's literal and c are in one file: no return counted.
		{Rule{Caller: true, Helpers: true, Lits: true, Files: all}, []string{"c.go", "a.go", "b.go", "a.go", "b.go", "a.go", "c.go"}, 2, 3},
		{Rule{Helpers: true, Files: func(f string) bool { return f != "b.go" }}, []string{"a.go", "c.go"}, 0, 1},
	} {
		w := r.Walk(tc.rule)
		if !slices.Equal(w.Steps, tc.steps) || w.Returns != tc.returns || w.Calls["c.go"] != tc.calls {
			t.Errorf("%v: steps %v, %d returns, %d calls into c.go; want %v, %d, %d", tc.rule, w.Steps, w.Returns, w.Calls["c.go"], tc.steps, tc.returns, tc.calls)
		}
	}
	if r.Others != 1 {
		t.Errorf("%d entries on goroutines not recorded, want 1 (c on the one started before Start)", r.Others)
	}
	if w := r.Walk(Rule{Caller: true, Files: all}); w.Files != 3 || w.Revisits != 3 {
		t.Errorf("%d files, %d revisits; want 3 and 3", w.Files, w.Revisits)
	}

	// Not recording: nothing is.
	a(&wg)
	if len(r.Events) != 12 {
		t.Errorf("%d events after Stop, want the 12 recorded before it", len(r.Events))
	}
}
