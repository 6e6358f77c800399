package restmapper

import (
	"fmt"
	"testing"
	"time"
)

// TestMissPolicy pins misses.go's promises on the policy alone: a first
// miss refreshes, repeats back off from 50 ms doubling to the interval,
// each budget allows 8 in a row and then one an interval, a question found
// starts afresh, and what it remembers is bounded.
func TestMissPolicy(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newMisses(time.Second)
	k := memoKey{op: opRESTMapping, group: "g", name: "K"}
	var at []time.Duration
	for d := time.Duration(0); d < 3*time.Second; d += time.Millisecond {
		if allowed(p.mayRefresh(k, now.Add(d), false)) {
			at = append(at, d)
		}
	}
	want := []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond, 350 * time.Millisecond, 750 * time.Millisecond, 1550 * time.Millisecond, 2550 * time.Millisecond}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("one question missing every ms refreshed at %v, want %v", at, want)
	}

	p.found(k)
	if !allowed(p.mayRefresh(k, now.Add(3*time.Second), false)) {
		t.Error("a question found and then missing again is not a first miss")
	}

	p = newMisses(time.Second)
	n := 0
	for i := range 100 {
		if allowed(p.mayRefresh(memoKey{name: fmt.Sprint(i)}, now, false)) {
			n++
		}
	}
	if n != missBurst {
		t.Errorf("100 first misses at once refreshed %d times, want the burst of %d", n, missBurst)
	}
	if allowed(p.mayRefresh(memoKey{name: "new"}, now.Add(500*time.Millisecond), false)) {
		t.Error("a first miss refreshed half an interval after the burst was spent")
	}
	if !allowed(p.mayRefresh(memoKey{name: "new"}, now.Add(time.Second), false)) {
		t.Error("a first miss did not refresh an interval after the burst was spent")
	}

	// Repeats spend their own budget, not the first misses'.
	p = newMisses(time.Second)
	for i := range missBurst {
		allowed(p.mayRefresh(memoKey{name: fmt.Sprint(i)}, now, false))
	}
	for d := 50 * time.Millisecond; d < time.Second; d += time.Millisecond {
		for i := range missBurst {
			p.mayRefresh(memoKey{name: fmt.Sprint(i)}, now.Add(d), false)
		}
	}
	if p.repeats.TokensAt(now.Add(time.Second)) >= 1 || p.firsts.TokensAt(now.Add(time.Second)) < 1 {
		t.Errorf("after repeats spent their budget: repeats %.1f, firsts %.1f tokens; want repeats spent and firsts refilled",
			p.repeats.TokensAt(now.Add(time.Second)), p.firsts.TokensAt(now.Add(time.Second)))
	}

	p = newMisses(time.Second)
	for i := range 5 * missKeys {
		p.mayRefresh(memoKey{name: fmt.Sprint(i)}, now.Add(time.Duration(i)*time.Second), false)
	}
	if len(p.backoffs) > missKeys {
		t.Errorf("remembers %d questions, want at most %d", len(p.backoffs), missKeys)
	}
}

// TestNewNilClient: a mapper over no client is an error, not a panic at
// its first lookup.
func TestNewNilClient(t *testing.T) {
	if m, err := New(nil); err == nil || m != nil {
		t.Errorf("New(nil) = %v, %v; want an error", m, err)
	}
}

// allowed is mayRefresh's verdict alone.
func allowed(_ spent, ok bool) bool { return ok }

// TestGiveBackUndoesARefusedRefresh: a refresh the server refused with a
// 429 (misses.giveBack) leaves the question's backoff, the proofs and
// the budgets as they were, so that the first lookup after the server's
// wait asks at once, however many refusals came before.
func TestGiveBackUndoesARefusedRefresh(t *testing.T) {
	p := newMisses(time.Second)
	now := time.Unix(1000, 0)
	k := memoKey{name: "widgets"}
	for i := range 3 * missBurst {
		sp, ok := p.mayRefresh(k, now, false)
		if !ok {
			t.Fatalf("refusal %d given back: the next miss may not refresh", i)
		}
		p.giveBack(sp, now)
	}
	if _, ok := p.mayRefresh(k, now, false); !ok {
		t.Fatal("a first miss after refusals given back may not refresh")
	}
	if _, ok := p.mayRefresh(k, now, false); ok {
		t.Fatal("a repeat within its backoff, not given back, may refresh")
	}
	for i := range 3 * missBurst {
		sp, ok := p.mayProve(7, now)
		if !ok {
			t.Fatalf("proof %d of generation 7, the refused ones given back: not allowed", i)
		}
		p.giveBack(sp, now)
	}
	if _, ok := p.mayProve(7, now); !ok {
		t.Fatal("a proof after refused ones given back: not allowed")
	}
	if _, ok := p.mayProve(7, now); ok {
		t.Fatal("a second proof of a generation proven: allowed")
	}
}
