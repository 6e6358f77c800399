package restmapper

import (
	"testing"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestMapperSize: a Mapper is 80 bytes (a size class of Go's allocator;
// 168, so 176 held, when it held its options rather than a pointer to
// them, 128 with its miss policy, and 96 with the counts of its misses'
// refreshes and its errors, which its miss policy holds): a process may
// hold thousands of mappers, package shared's identities.
func TestMapperSize(t *testing.T) {
	if size := unsafe.Sizeof(Mapper{}); size > 80 {
		t.Errorf("a Mapper is %d bytes, want at most 80", size)
	}
}

// TestMissPolicyAtFirstMiss: a mapper whose lookups all find an answer
// holds no miss policy; its first miss makes one, which refreshes
// discovery at once (a first miss) and then backs off (misses.go).
func TestMissPolicyAtFirstMiss(t *testing.T) {
	m := newTestMapper(t, nil)
	for range 5 {
		if _, err := m.RESTMapping(schema.GroupKind{Kind: "Pod"}, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	if m.misses.Load() != nil {
		t.Fatal("lookups that found their answer made a miss policy")
	}
	gone := schema.GroupKind{Group: "nowhere.example.com", Kind: "Gone"}
	for range 3 {
		if _, err := m.RESTMapping(gone); err == nil {
			t.Fatal("a kind the server does not serve was found")
		}
	}
	if m.misses.Load() == nil {
		t.Fatal("a miss made no miss policy")
	}
	if n := m.Stats().MissRefreshes; n != 1 {
		t.Errorf("three misses at once refreshed %d times, want the first only", n)
	}
}

// TestIndexesMappersShareWhatIsAlike: mappers of one Indexes table given
// the same options hold one copy of them, the table's first; a mapper
// given others (an interval, a clock, a warning handler) holds its own,
// and reads it.
func TestIndexesMappersShareWhatIsAlike(t *testing.T) {
	ix := NewIndexes()
	c, err := discovery.NewForHTTPClient(nil, "https://api.example:6443")
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	newMapper := func(opts ...Option) *Mapper {
		t.Helper()
		m, err := New(c, append([]Option{WithIndexes(ix)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := newMapper(WithClock(clk), WithMissRefreshInterval(time.Minute))
	if b := newMapper(WithClock(clk), WithMissRefreshInterval(time.Minute)); a.opts != b.opts {
		t.Error("two mappers of a table with the same options hold a copy each")
	}
	for name, m := range map[string]*Mapper{
		"another interval":  newMapper(WithClock(clk), WithMissRefreshInterval(time.Hour)),
		"another clock":     newMapper(WithClock(clocktesting.NewFakeClock(time.Now())), WithMissRefreshInterval(time.Minute)),
		"a warning handler": newMapper(WithClock(clk), WithMissRefreshInterval(time.Minute), WithWarningHandler(func(string) {})),
		"no table":          func() *Mapper { m, _ := New(c, WithClock(clk), WithMissRefreshInterval(time.Minute)); return m }(),
	} {
		if m.opts == a.opts {
			t.Errorf("a mapper with %s holds the table's options", name)
		}
	}
	if m := newMapper(WithMissRefreshInterval(time.Hour)); m.opts.missInterval != time.Hour || m.opts.clock == any(clk) {
		t.Errorf("a mapper's own options say interval %v", m.opts.missInterval)
	}
}
