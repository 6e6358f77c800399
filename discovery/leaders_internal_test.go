package discovery

import (
	"slices"
	"testing"
)

// TestLeadersList: FollowLeader's list keeps each call's entry until its
// stop, whichever entry is dropped (the first, one in the middle, the
// last: a removal copies the entries before it), and a stop called again
// takes nothing.
func TestLeadersList(t *testing.T) {
	a, b, cl, follower := &Client{}, &Client{}, &Client{}, &Client{}
	list := func() []*Client {
		var got []*Client
		for n := follower.leaders.head.Load(); n != nil; n = n.next {
			got = append(got, n.c)
		}
		slices.SortFunc(got, func(x, y *Client) int {
			return slices.Index([]*Client{a, b, cl}, x) - slices.Index([]*Client{a, b, cl}, y)
		})
		return got
	}
	stopA := follower.FollowLeader(a)
	stopB := follower.FollowLeader(b)
	stopC := follower.FollowLeader(cl)
	stopB2 := follower.FollowLeader(b)
	for _, step := range []struct {
		stop func()
		want []*Client
	}{
		{stopB, []*Client{a, b, cl}}, // the newest entry of b, at the head
		{stopB, []*Client{a, b, cl}}, // again: nothing
		{stopA, []*Client{b, cl}},    // the last, after copies of two
		{stopC, []*Client{b}},        // in the middle
		{stopB2, nil},
		{stopB2, nil},
	} {
		step.stop()
		if got := list(); !slices.Equal(got, step.want) {
			t.Fatalf("after a stop the list is %v, want %v", got, step.want)
		}
	}
	if follower.leaders.head.Load() != nil {
		t.Error("an empty list holds a node")
	}
}
