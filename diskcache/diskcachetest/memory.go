package diskcachetest

import (
	"bytes"
	"sync"
)

// Memory is a Store in memory, for tests of what keeps its bytes in a
// Store (a discovery client's warm starts, say). Like a disk cache it keeps
// one value per Name, the last Put's, and Get finds it only under the
// Version it was put with. Before and After, when set, are called on every
// Get, Put and Delete with the operation's name ("get", "put", "delete")
// and key, outside Memory's lock: a test makes the store slow, or hang
// until it lets go, by blocking in them, and counts or fails operations
// there. It is safe for concurrent use; the zero value is empty.
type Memory struct {
	// Before is called first; After once the operation is done.
	Before, After func(op string, k Key)

	mu     sync.Mutex
	values map[string]versioned
}

type versioned struct {
	version string
	value   []byte
}

var _ Store = (*Memory)(nil)

// Get returns the value put under k, or false.
func (m *Memory) Get(k Key) ([]byte, bool) {
	m.hook(m.Before, "get", k)
	defer m.hook(m.After, "get", k)
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[k.Name]
	if !ok || v.version != k.Version {
		return nil, false
	}
	return bytes.Clone(v.value), true
}

// Put stores a copy of value under k, replacing what k.Name held.
func (m *Memory) Put(k Key, value []byte) error {
	m.hook(m.Before, "put", k)
	defer m.hook(m.After, "put", k)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.values == nil {
		m.values = map[string]versioned{}
	}
	m.values[k.Name] = versioned{version: k.Version, value: bytes.Clone(value)}
	return nil
}

// Delete removes what k.Name holds.
func (m *Memory) Delete(k Key) {
	m.hook(m.Before, "delete", k)
	defer m.hook(m.After, "delete", k)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.values, k.Name)
}

// Len is how many values the store holds.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.values)
}

func (m *Memory) hook(fn func(string, Key), op string, k Key) {
	if fn != nil {
		fn(op, k)
	}
}
