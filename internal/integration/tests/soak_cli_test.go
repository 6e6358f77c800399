//go:build linux

package tests

// The CLIs in the soak (issue 47): examples/api-resources and
// examples/explain, built once, run every few seconds through the
// balancer as users run them (a new process each time, their disk cache
// kept across runs as ~/.kube/cache is), their output held to what the
// checker read from the servers while they ran.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// soakCLIEvery is how often a CLI runs; the two alternate, so each runs
// every other time.
const soakCLIEvery = 3 * time.Second

// soakCLIGrace is how long before a run began a state of the servers may
// have ended and still be what the run shows: the checker reads each
// server once a second, so a change it first read at t may have been
// served up to a second before; and the run may show what the checker
// reads only after the run ended (a second, at most, later).
const soakCLIGrace = time.Second

// soakCLIs runs the CLIs and judges each run.
type soakCLIs struct {
	s           *soak
	chk         *checker
	dir         string
	kubeconfigs map[string]string // "api-resources", "explain" → a kubeconfig for the balancer, through a front naming its client kind
	bins        map[string]string // "api-resources", "explain" → path

	mu       sync.Mutex
	history  [][]cliState // per server: what it served for the CLIs, each change
	runs     map[string]int
	failed   map[string]int
	lastErr  map[string]string
	warned   map[string]int // runs that succeeded with something on stderr
	lastWarn map[string]string
	wrong    []*cliRun
	pending  []*cliRun // judged once the checker has read past their end
}

// cliState is what a server served, in each CLI's terms, from at (the
// checker's read that first showed it) on; down: the server did not
// answer.
type cliState struct {
	at   time.Time
	down bool
	out  map[string]string // CLI → its expected output
}

// cliRun is one run of a CLI.
type cliRun struct {
	cli        string
	start, end time.Time
	got        string
	stderr     string // a warning, say, that it printed what it had cached
	// When wrong: what the servers served while it ran, and how long
	// before it began a server last served what it printed (-1: never).
	want []string
	late time.Duration
}

// startSoakCLIs builds the CLIs (go build, once) and writes their
// kubeconfig for the balancer.
func startSoakCLIs(t *testing.T, s *soak, chk *checker, lb *rest.Config) *soakCLIs {
	t.Helper()
	dir := t.TempDir()
	c := &soakCLIs{s: s, chk: chk, dir: dir, kubeconfigs: map[string]string{}, bins: map[string]string{},
		history: make([][]cliState, len(chk.readers)), runs: map[string]int{}, failed: map[string]int{}, lastErr: map[string]string{},
		warned: map[string]int{}, lastWarn: map[string]string{}}
	for _, name := range []string{"api-resources", "explain"} {
		bin := filepath.Join(dir, name)
		if out, err := buildExample(bin, name); err != nil {
			t.Fatalf("go build ./examples/%s: %v\n%s", name, err, out)
		}
		c.bins[name] = bin
	}
	for _, name := range []string{"api-resources", "explain"} {
		front := kindFront(t, lb, name, true)
		c.kubeconfigs[name] = filepath.Join(dir, name+".kubeconfig")
		writeKubeconfig(t, c.kubeconfigs[name], front.Host, front.CAData, front.BearerToken)
	}
	return c
}

// cliExpected is what each CLI should print of soakGroup for one server's
// truth (the checker's values): api-resources' rows for the group's kinds
// (resource, group/preferred version, namespaced, kind), and explain
// widgets.spec's fields, of Widget's preferred version.
func cliExpected(vals map[string]string) map[string]string {
	var rows []string
	for k, version := range vals {
		gk, ok := strings.CutPrefix(k, "preferred "+soakGroup+"/")
		if !ok {
			continue
		}
		resource := vals["mapping "+soakGroup+"/"+version+"/"+gk]
		rows = append(rows, fmt.Sprintf("%s %s/%s true %s", resource, soakGroup, version, gk))
	}
	sort.Strings(rows)
	fields := "error: widgets not served"
	if v, ok := vals["preferred "+soakGroup+"/Widget"]; ok {
		fields = strings.ReplaceAll(vals["schema "+soakGroup+"/"+v+"/Widget"], ",", " ")
	}
	return map[string]string{"api-resources": strings.Join(rows, "; "), "explain": fields}
}

// sample records each server's state in the CLIs' terms when it changed.
func (c *soakCLIs) sample() {
	type state struct {
		at   time.Time
		vals map[string]string
	}
	var states []*state
	c.chk.mu.Lock()
	for i, t := range c.chk.truth {
		if t == nil {
			states = append(states, nil)
			continue
		}
		states = append(states, &state{at: t.at, vals: c.chk.values[i]})
	}
	c.chk.mu.Unlock()
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, st := range states {
		h := c.history[i]
		var last *cliState
		if len(h) > 0 {
			last = &h[len(h)-1]
		}
		if st == nil {
			if last != nil && !last.down {
				c.history[i] = append(h, cliState{at: now, down: true})
			}
			continue
		}
		out := cliExpected(st.vals)
		if last == nil || last.down || !maps.Equal(last.out, out) {
			c.history[i] = append(h, cliState{at: st.at, out: out})
		}
	}
}

// judge decides the pending runs whose end the checker has read past:
// a run is right when it printed what some server served (answering) at
// some moment from soakCLIGrace before it began to soakCLIGrace after it
// ended.
func (c *soakCLIs) judge(now time.Time, final bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.pending[:0]
	for _, r := range c.pending {
		if !final && now.Sub(r.end) < 2*soakCLIGrace {
			kept = append(kept, r)
			continue
		}
		from, to := r.start.Add(-soakCLIGrace), r.end.Add(soakCLIGrace)
		right := false
		var want []string
		r.late = -1
		for _, h := range c.history {
			for j, st := range h {
				until := now
				if j+1 < len(h) {
					until = h[j+1].at
				}
				if st.down || st.at.After(to) {
					continue
				}
				if until.Before(from) {
					if st.out[r.cli] == r.got && (r.late < 0 || r.start.Sub(until) < r.late) {
						r.late = r.start.Sub(until)
					}
					continue
				}
				if st.out[r.cli] == r.got {
					right = true
				}
				want = append(want, st.out[r.cli])
			}
		}
		if !right {
			slices.Sort(want)
			r.want = slices.Compact(want)
			c.wrong = append(c.wrong, r)
		}
	}
	c.pending = kept
}

// run runs the CLIs in turn every soakCLIEvery until ctx ends.
func (c *soakCLIs) run(ctx context.Context, wg *sync.WaitGroup) {
	c.s.goSafe(wg, "cli truth", func() {
		for {
			c.sample()
			c.judge(time.Now(), false)
			if !sleepCtx(ctx, 100*time.Millisecond) {
				return
			}
		}
	})
	c.s.goSafe(wg, "cli", func() {
		for n := 0; sleepCtx(ctx, soakCLIEvery); n++ {
			name := []string{"api-resources", "explain"}[n%2]
			args := map[string][]string{"api-resources": {"--api-group", soakGroup, "-o", "json"}, "explain": {"widgets.spec"}}[name]
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			cmd := exec.CommandContext(rctx, c.bins[name], args...)
			// One cache directory, kept across runs, as a user's
			// ~/.kube/cache (each names its entries by the server's URL,
			// its front's here).
			cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfigs[name], "HOME="+c.dir, "KUBECACHEDIR="+filepath.Join(c.dir, "cache"))
			stderr := &tailBuffer{max: 1024}
			cmd.Stderr = stderr
			start := time.Now()
			out, err := cmd.Output()
			end := time.Now()
			cancel()
			if ctx.Err() != nil {
				return
			}
			c.mu.Lock()
			c.runs[name]++
			c.mu.Unlock()
			got, perr := parseCLI(name, out)
			if err == nil {
				err = perr
			}
			if err != nil {
				// The balancer handed the run to a server that went
				// away, say: a failed run, not a wrong answer.
				c.mu.Lock()
				c.failed[name]++
				c.lastErr[name] = fmt.Sprintf("+%s: %v: %s", fmtOffset(start.Sub(c.s.start)), err, strings.TrimSpace(stderr.String()))
				c.mu.Unlock()
				continue
			}
			warning := strings.TrimSpace(stderr.String())
			c.mu.Lock()
			if warning != "" {
				c.warned[name]++
				c.lastWarn[name] = fmt.Sprintf("+%s: %s", fmtOffset(start.Sub(c.s.start)), warning)
			}
			if strings.Contains(warning, "could not revalidate") {
				// It printed its cache and said so, as kubectl does
				// when the server cannot be reached: a failed run, not
				// a wrong answer.
				c.failed[name]++
				c.lastErr[name] = c.lastWarn[name]
			} else {
				c.pending = append(c.pending, &cliRun{cli: name, start: start, end: end, got: got, stderr: warning})
			}
			c.mu.Unlock()
		}
	})
}

// parseCLI reduces a CLI's output to what cliExpected says: api-resources
// -o json's rows, explain's field names (the lines at the first indent
// under FIELDS).
func parseCLI(name string, out []byte) (string, error) {
	switch name {
	case "api-resources":
		var items []struct {
			Name       string `json:"name"`
			APIVersion string `json:"apiVersion"`
			Namespaced bool   `json:"namespaced"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(out, &items); err != nil {
			return "", fmt.Errorf("api-resources -o json: %w", err)
		}
		var rows []string
		for _, it := range items {
			rows = append(rows, fmt.Sprintf("%s %s %v %s", it.Name, it.APIVersion, it.Namespaced, it.Kind))
		}
		sort.Strings(rows)
		return strings.Join(rows, "; "), nil
	default:
		_, fields, ok := strings.Cut(string(out), "FIELDS:\n")
		if !ok {
			return "", fmt.Errorf("explain: no FIELDS in %q", short(string(out)))
		}
		var names []string
		for l := range strings.SplitSeq(fields, "\n") {
			if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") {
				if f := strings.Fields(l); len(f) > 0 {
					names = append(names, f[0])
				}
			}
		}
		sort.Strings(names)
		return strings.Join(names, " "), nil
	}
}

// report writes the CLIs' section, and returns their wrong runs.
func (c *soakCLIs) report(b *strings.Builder, end time.Time) []*cliRun {
	c.judge(end, true)
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(b, "\n== the CLIs every %v in turn (a new process each run, through the balancer, their disk cache kept): api-resources --api-group %s -o json, explain widgets.spec\n", soakCLIEvery, soakGroup)
	for _, name := range []string{"api-resources", "explain"} {
		fmt.Fprintf(b, "%s: %d runs, %d failed (last: %s); %d printed on stderr too (last: %s)\n", name, c.runs[name], c.failed[name], short(c.lastErr[name]), c.warned[name], short(c.lastWarn[name]))
	}
	fmt.Fprintf(b, "runs whose output no server served from %v before they began to %v after they ended: %d\n", soakCLIGrace, soakCLIGrace, len(c.wrong))
	for _, r := range c.wrong {
		last := "never served"
		if r.late >= 0 {
			last = fmt.Sprintf("last served %v before the run began", r.late.Round(10*time.Millisecond))
		}
		fmt.Fprintf(b, "! %s ran +%s to +%s: got %q (%s), the servers served %q; its stderr: %q\n", r.cli, fmtOffset(r.start.Sub(c.s.start)), fmtOffset(r.end.Sub(c.s.start)), short(r.got), last, r.want, short(r.stderr))
	}
	return slices.Clone(c.wrong)
}

// cliTargets writes the CLIs' target line.
func cliTargets(b *strings.Builder, wrong []*cliRun) {
	fmt.Fprintf(b, "CLI runs that printed what no server served from %v before they began: %d (target 0): %s\n", soakCLIGrace, len(wrong), metOrNot(len(wrong) == 0))
}

// cliFail fails the test on a CLI run that printed what no server served
// within failAfter before it began, or never.
func cliFail(t *testing.T, c *soakCLIs, wrong []*cliRun, failAfter time.Duration) {
	t.Helper()
	for _, r := range wrong {
		if r.late < 0 || r.late > failAfter {
			t.Errorf("%s, run at +%s, printed %q, which no server served within %v before (the report lists it with '!')", r.cli, fmtOffset(r.start.Sub(c.s.start)), short(r.got), failAfter)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range []string{"api-resources", "explain"} {
		if c.runs[name] == c.failed[name] {
			t.Errorf("%s never ran to its end: %d runs, %d failed (last: %s)", name, c.runs[name], c.failed[name], c.lastErr[name])
		}
	}
}

// TestCLIRunsJudged pins how a CLI run is judged, without servers: what
// the CLIs should print follows the checker's truth (api-resources' rows
// of soakGroup's kinds at their preferred versions, explain's fields of
// Widget's preferred version); a run is right when it printed what some
// answering server served from soakCLIGrace before it began to
// soakCLIGrace after it ended; otherwise it is wrong, with how long
// before it began its output was last served (or never).
func TestCLIRunsJudged(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	chk := newChecker(make([]*truthReader, 2), nil, nil)
	c := &soakCLIs{s: &soak{t: t, start: t0}, chk: chk, history: make([][]cliState, 2), runs: map[string]int{}, failed: map[string]int{}, lastErr: map[string]string{}}
	truth := func(i int, s float64, vals map[string]string) {
		chk.mu.Lock()
		if vals == nil {
			chk.truth[i] = nil
		} else {
			chk.values[i], chk.truth[i] = vals, &soakTruth{at: at(s)}
		}
		chk.mu.Unlock()
		c.sample()
	}
	g := soakGroup
	v1 := map[string]string{"preferred " + g + "/Widget": "v1", "mapping " + g + "/v1/Widget": "widgets", "schema " + g + "/v1/Widget": "field00,field01"}
	v2 := map[string]string{"preferred " + g + "/Widget": "v2", "mapping " + g + "/v2/Widget": "widgets", "mapping " + g + "/v1/Widget": "widgets",
		"schema " + g + "/v2/Widget": "field00,field01,field02", "preferred " + g + "/Gadget": "v1", "mapping " + g + "/v1/Gadget": "gadgets"}
	if got, want := cliExpected(v2), map[string]string{"api-resources": "gadgets " + g + "/v1 true Gadget; widgets " + g + "/v2 true Widget", "explain": "field00 field01 field02"}; !maps.Equal(got, want) {
		t.Fatalf("cliExpected: %q, want %q", got, want)
	}
	explainOut := "GROUP:      " + g + "\nKIND:       Widget\nVERSION:    v2\n\nFIELD: spec <Object>\n\nDESCRIPTION:\n    <empty>\nFIELDS:\n  field02\t<string>\n\n  field00\t<string>\n    a description\n\n  field01\t<string>\n\n"
	if got, err := parseCLI("explain", []byte(explainOut)); err != nil || got != "field00 field01 field02" {
		t.Errorf("parseCLI(explain): %q, %v", got, err)
	}
	arOut := `[{"name": "widgets", "apiVersion": "` + g + `/v2", "namespaced": true, "kind": "Widget", "verbs": ["get"]}, {"name": "gadgets", "apiVersion": "` + g + `/v1", "namespaced": true, "kind": "Gadget"}]`
	if got, err := parseCLI("api-resources", []byte(arOut)); err != nil || got != cliExpected(v2)["api-resources"] {
		t.Errorf("parseCLI(api-resources): %q, %v", got, err)
	}

	truth(0, 0, v1)
	truth(1, 0, v1)
	truth(0, 10, v2) // kas-0 serves v2 from 10 s, kas-1 from 20 s
	truth(1, 20, v2)
	// run records a run that printed what vals (a server's truth) says.
	run := func(cli string, start, end float64, vals map[string]string) {
		c.pending = append(c.pending, &cliRun{cli: cli, start: at(start), end: at(end), got: cliExpected(vals)[cli]})
	}
	run("explain", 5, 5.5, v1)                                                                           // right
	run("explain", 9.5, 10.2, v2)                                                                        // right: kas-0 served v2 by its end
	run("explain", 8.5, 9.2, v2)                                                                         // right: within the grace after its end
	run("api-resources", 15, 15.3, v1)                                                                   // right: kas-1 still served v1
	run("api-resources", 25, 25.3, v1)                                                                   // wrong: last served by kas-1 until 20 s
	c.pending = append(c.pending, &cliRun{cli: "explain", start: at(25), end: at(25.3), got: "field00"}) // wrong: never served
	c.judge(at(30), false)
	if len(c.wrong) != 2 || c.wrong[0].cli != "api-resources" || c.wrong[0].late != 5*time.Second || c.wrong[1].late != -1 {
		for _, r := range c.wrong {
			t.Logf("wrong: %+v", *r)
		}
		t.Fatalf("%d wrong, want the api-resources run at 25 s (last served 5 s before) and the explain run never served", len(c.wrong))
	}
	// A run is judged only once the checker has read past its end.
	run("explain", 29, 29.5, v1)
	c.judge(at(30), false)
	if len(c.pending) != 1 || len(c.wrong) != 2 {
		t.Errorf("a run that ended 0.5 s ago: %d pending, %d wrong; want it pending", len(c.pending), len(c.wrong))
	}
	// A server down serves nothing: with kas-1 down and kas-0 at v2, v1
	// is wrong.
	truth(1, 40, nil)
	run("explain", 41, 41.5, v1)
	c.judge(at(50), false)
	if len(c.wrong) != 4 {
		t.Errorf("%d wrong, want 4 (the runs at 29 s and 41 s too)", len(c.wrong))
	}
}
