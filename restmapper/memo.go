package restmapper

import (
	"cmp"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type op uint8

const (
	opKindFor op = iota
	opKindsFor
	opResourceFor
	opResourcesFor
	opRESTMapping
	opRESTMappings
	opSingularizer
)

// memoKey is one question. For resource questions group, version and name
// are the input GroupVersionResource; for mapping questions, the GroupKind
// and the one version asked for (more than one version is not memoized).
type memoKey struct {
	op                   op
	group, version, name string
}

func resourceKey(o op, r schema.GroupVersionResource) memoKey {
	return memoKey{op: o, group: r.Group, version: r.Version, name: r.Resource}
}

func kindKey(o op, gk schema.GroupKind, versions []string) memoKey {
	k := memoKey{op: o, group: gk.Group, name: gk.Kind}
	if len(versions) == 1 {
		k.version = versions[0]
	}
	return k
}

// answer is what one question got: the fields of its method, and its error.
type answer struct {
	gvk      schema.GroupVersionKind
	gvks     []schema.GroupVersionKind
	gvr      schema.GroupVersionResource
	gvrs     []schema.GroupVersionResource
	mapping  *meta.RESTMapping
	mappings []*meta.RESTMapping
	singular string
	err      error
}

// memo keeps client-go's answers, which cost microseconds to milliseconds
// each. It is a sync.Map: a memo in 32 locked shards read no faster from
// two cores and took half as long again to fill (BenchmarkMemo), so it went.
type memo struct {
	m     sync.Map // memoKey → *answer
	n     atomic.Int64
	limit int64 // 0: maxMemo
}

// maxMemo bounds the memo: a caller asking for ever new names cannot grow
// it without end. Past the bound, new questions are answered without being
// kept.
const maxMemo = 1 << 17

func (m *memo) get(k memoKey) (*answer, bool) {
	a, ok := m.m.Load(k)
	if !ok {
		return nil, false
	}
	return a.(*answer), true
}

func (m *memo) put(k memoKey, a *answer) {
	limit := cmp.Or(m.limit, maxMemo)
	if m.n.Load() >= limit {
		return
	}
	if _, loaded := m.m.LoadOrStore(k, a); !loaded {
		m.n.Add(1)
	}
}
