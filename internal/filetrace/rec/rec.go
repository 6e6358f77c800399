// Package rec records which source files a piece of code runs through:
// the recorder that internal/filetrace's instrumented copies of discovery,
// discovery/surface and internal/httpx call at every function entry, and
// the counts the tool reports (issue 34). It imports nothing but the
// standard library, so that any package can call it without a cycle, and
// is linked only into the overlay builds the tool makes.
package rec

import (
	"bytes"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Event is a function entry or its return, on goroutine G.
type Event struct {
	G     uint64
	File  string // relative to the module root: discovery/fetch.go
	Func  string // Name, or Name.funcN for a function literal (N in source order)
	Lit   bool   // a function literal
	Enter bool   // entry; false: return
}

var (
	on     atomic.Bool
	mu     sync.Mutex
	events []Event
	root   uint64
	parent map[uint64]uint64 // goroutine -> the goroutine that created it
	kept   map[uint64]bool   // goroutine -> recorded (root, or created by a recorded one after Start)
	other  map[uint64]int    // goroutines not recorded -> their entries
)

func noop() {}

// Enter records an entry into fn of file and returns what records its
// return: instrumented code calls defer rec.Enter(...)() first thing.
// Only the goroutine that called Start and the goroutines it (or they)
// created while recording are recorded; the others are counted in
// Recording.Others. Outside Start and Stop it costs an atomic load.
func Enter(file, fn string, lit bool) func() {
	if !on.Load() {
		return noop
	}
	g := goid()
	if !record(Event{G: g, File: file, Func: fn, Lit: lit, Enter: true}) {
		return noop
	}
	return func() { record(Event{G: g, File: file, Func: fn, Lit: lit}) }
}

func record(e Event) bool {
	mu.Lock()
	defer mu.Unlock()
	if !on.Load() {
		return false
	}
	k, seen := kept[e.G]
	if !seen {
		p := creator()
		parent[e.G] = p
		k = kept[p]
		kept[e.G] = k
	}
	if !k {
		other[e.G]++
		return false
	}
	events = append(events, e)
	return true
}

// goid is the calling goroutine's id, from the first line of its stack
// ("goroutine 7 [running]:"): the runtime offers no other way, and the
// cost is paid only while recording.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// creator is the id of the goroutine that created the calling one, from
// the last line of its stack ("created by f in goroutine 7"); 0 if none.
func creator() uint64 {
	buf := make([]byte, 1<<16)
	b := buf[:runtime.Stack(buf, false)]
	i := bytes.LastIndex(b, []byte(" in goroutine "))
	if i < 0 {
		return 0
	}
	b = b[i+len(" in goroutine "):]
	if j := bytes.IndexByte(b, '\n'); j >= 0 {
		b = b[:j]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// Start starts recording the calling goroutine and those it creates.
func Start() {
	mu.Lock()
	defer mu.Unlock()
	events, root = nil, goid()
	parent, kept, other = map[uint64]uint64{}, map[uint64]bool{}, map[uint64]int{}
	// The goroutines that exist now are not recorded, whoever created
	// them (a server the caller started before), but the caller.
	buf := make([]byte, 1<<20)
	for len(buf) == runtime.Stack(buf, true) {
		buf = make([]byte, 2*len(buf))
	}
	for _, line := range bytes.Split(buf, []byte("\n")) {
		if g, ok := bytes.CutPrefix(line, []byte("goroutine ")); ok {
			if id, err := strconv.ParseUint(string(g[:bytes.IndexByte(g, ' ')]), 10, 64); err == nil {
				kept[id] = false
			}
		}
	}
	kept[root] = true
	on.Store(true)
}

// Recording is what was recorded between Start and Stop.
type Recording struct {
	Events []Event
	Root   uint64            // the goroutine that called Start
	Parent map[uint64]uint64 // of each recorded goroutine but Root
	Others int               // entries on goroutines not recorded (the fake server's, ...)
}

// Stop stops recording and returns what was recorded.
func Stop() Recording {
	mu.Lock()
	defer mu.Unlock()
	on.Store(false)
	r := Recording{Events: events, Root: root, Parent: map[uint64]uint64{}}
	for g, p := range parent {
		if kept[g] {
			r.Parent[g] = p
		}
	}
	for _, n := range other {
		r.Others += n
	}
	events = nil
	return r
}

// Rule says which of a recording is walked.
type Rule struct {
	// Lits: function literals are functions of their own; otherwise their
	// entries and returns are not steps (their bodies stay in the file of
	// whoever called them).
	Lits bool
	// Caller: the goroutine that called Start (Refresh's) is walked too,
	// not only the first goroutine it started (the refresh's run).
	Caller bool
	// Helpers: the goroutines the run started (and theirs) are walked too.
	Helpers bool
	// Files keeps the files counted (the others are skipped, as frames of
	// uninstrumented code are): the tool counts discovery/surface apart
	// from discovery and internal/httpx.
	Files func(file string) bool
}

func (r Rule) String() string {
	yn := func(b bool, y, n string) string {
		if b {
			return y
		}
		return n
	}
	return strings.Join([]string{
		yn(r.Lits, "lits", "no-lits"),
		yn(r.Caller, "caller", "no-caller"),
		yn(r.Helpers, "helpers", "no-helpers"),
	}, " ")
}

// Walk is a recording read by a Rule: the files the walked goroutines
// were in, one goroutine after the other (the caller's steps up to its
// wait, the run's, then its helpers', each in the order it was first
// recorded).
type Walk struct {
	Steps []string // files stepped into, by an entry or a return, consecutive repeats collapsed
	Files int      // distinct files
	// Returns counts returns to a caller in another file: the walk comes
	// back to a file it left (issue 34's "returns to a file it left").
	Returns int
	// Revisits counts steps into a file the walk had been in before, by a
	// return or by a new call.
	Revisits int
	Calls    map[string]int // function entries in each file
	Visits   map[string]int // steps into each file
}

// Walk reads r by rule.
func (r Recording) Walk(rule Rule) Walk {
	var order []uint64 // goroutines walked, in the order they were first recorded
	run := uint64(0)
	for _, e := range r.Events {
		g := e.G
		if run == 0 && g != r.Root && r.Parent[g] == r.Root {
			run = g
		}
		if !slices.Contains(order, g) && (g == run || rule.Caller && g == r.Root || rule.Helpers && g != r.Root && g != run) {
			order = append(order, g)
		}
	}
	w := Walk{Calls: map[string]int{}, Visits: map[string]int{}}
	steps := map[uint64][]string{}
	stacks := map[uint64][]string{}
	for _, e := range r.Events {
		if !slices.Contains(order, e.G) || !rule.Files(e.File) || e.Lit && !rule.Lits {
			continue
		}
		st := stacks[e.G]
		if e.Enter {
			w.Calls[e.File]++
			stacks[e.G] = append(st, e.File)
			steps[e.G] = append(steps[e.G], e.File)
			continue
		}
		if len(st) == 0 {
			continue // entered before Start
		}
		stacks[e.G] = st[:len(st)-1]
		if len(st) > 1 && st[len(st)-2] != e.File {
			w.Returns++
			steps[e.G] = append(steps[e.G], st[len(st)-2])
		}
	}
	for _, g := range order {
		for _, f := range steps[g] {
			if n := len(w.Steps); n > 0 && w.Steps[n-1] == f {
				continue
			}
			if w.Visits[f] > 0 {
				w.Revisits++
			}
			w.Visits[f]++
			w.Steps = append(w.Steps, f)
		}
	}
	w.Files = len(w.Visits)
	return w
}

// String is the walk's counts, then its steps.
func (w Walk) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "files %d, returns %d (revisits %d, steps %d)\n", w.Files, w.Returns, w.Revisits, len(w.Steps))
	for _, f := range slices.Sorted(maps.Keys(w.Visits)) {
		fmt.Fprintf(&b, "  %-28s %3d function entries, stepped into %2d times\n", f, w.Calls[f], w.Visits[f])
	}
	b.WriteString("  sequence: " + strings.Join(w.Steps, " > ") + "\n")
	return b.String()
}
