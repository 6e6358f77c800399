package restmapper

import (
	"testing"
	"time"
	"unsafe"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestMapperSize: a Mapper is 128 bytes (a size class of Go's allocator;
// 168, so 176 held, when it held its options rather than a pointer to
// them): a process may hold thousands of mappers, package shared's
// identities.
func TestMapperSize(t *testing.T) {
	if size := unsafe.Sizeof(Mapper{}); size > 128 {
		t.Errorf("a Mapper is %d bytes, want at most 128", size)
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
