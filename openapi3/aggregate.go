package openapi3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Aggregate merges group-version documents into one OpenAPI v3 document,
// the client-side aggregation KEP-2896 promised, returned as a Document
// (call OpenAPI on it for spec3). Paths are united (a path in two
// documents is an error). A schema that several documents define alike
// (ObjectMeta, say) appears once, and so does one they define alike but
// for the kinds its x-kubernetes-group-version-kind lists (DeleteOptions),
// listing them all. A schema name that two documents define
// differently is kept for the first and renamed for the others
// ("<name>_<path>"), and so is any schema of theirs that refers to a
// renamed one, with that document's $refs rewritten, so every $ref still
// resolves to what its document meant. Other components (securitySchemes)
// are united by name, the first definition kept.
//
// Documents are merged as bytes: only a document with a conflicting schema
// is decoded, to rewrite its references.
func Aggregate(docs []*Document) (*Document, error) {
	m := merger{
		schemas:    map[string][]byte{},
		paths:      map[string][]byte{},
		components: map[string]map[string][]byte{},
		version:    []byte(`"aggregated"`),
	}
	for _, d := range docs {
		if err := m.add(d); err != nil {
			return nil, err
		}
	}
	return NewDocument("aggregated", "", m.json())
}

type merger struct {
	schemas    map[string][]byte
	paths      map[string][]byte
	components map[string]map[string][]byte // other components, by kind
	security   []byte
	version    []byte
}

// member is an object member's name and raw value.
type member struct {
	name string
	raw  []byte
}

// membersOf lists the members of the JSON object b, in order; nil b has
// none.
func membersOf(b []byte) ([]member, error) {
	if b == nil {
		return nil, nil
	}
	s := &scanner{b: b}
	var out []member
	err := s.uniqueMembers(func(name string) error {
		v, err := s.value()
		out = append(out, member{name, b[v.start:v.end]})
		return err
	})
	return out, err
}

func lookup(ms []member, name string) []byte {
	for _, m := range ms {
		if m.name == name {
			return m.raw
		}
	}
	return nil
}

func (m *merger) add(d *Document) error {
	idx, err := d.indexAll()
	if err != nil {
		return err
	}
	paths, err := membersOf(d.raw(idx.top["paths"]))
	if err != nil {
		return fmt.Errorf("openapi3: %s: paths: %w", d.Path, err)
	}
	schemas := make(map[string][]byte, len(idx.schemas))
	for name, at := range idx.schemas {
		schemas[name] = d.raw(at)
	}

	// Names merged already under a different definition.
	var differ []string
	for name, raw := range schemas {
		have, ok := m.schemas[name]
		if !ok {
			continue
		}
		if merged, ok := merge(have, raw); ok {
			m.schemas[name] = merged
		} else {
			differ = append(differ, name)
		}
	}
	if len(differ) > 0 {
		if schemas, paths, err = m.rename(d.Path, schemas, paths, differ); err != nil {
			return err
		}
	}

	for name, raw := range schemas {
		if _, ok := m.schemas[name]; !ok {
			m.schemas[name] = raw
		}
	}
	for _, p := range paths {
		if _, dup := m.paths[p.name]; dup {
			return fmt.Errorf("openapi3: path %s is in two documents (the second is %s)", p.name, d.Path)
		}
		m.paths[p.name] = p.raw
	}
	for kind, at := range idx.components {
		named, err := membersOf(d.raw(at))
		if err != nil {
			return fmt.Errorf("openapi3: %s: components.%s: %w", d.Path, kind, err)
		}
		if m.components[kind] == nil {
			m.components[kind] = map[string][]byte{}
		}
		for _, n := range named {
			if _, ok := m.components[kind][n.name]; !ok {
				m.components[kind][n.name] = n.raw
			}
		}
	}
	if sec := d.raw(idx.top["security"]); sec != nil && m.security == nil {
		m.security = sec
	}
	if info, err := membersOf(d.raw(idx.top["info"])); err == nil {
		if v := lookup(info, "version"); v != nil {
			m.version = v
		}
	}
	return nil
}

// merge returns the one definition of a schema two documents define:
// either, when they are alike (equal bytes, or equal once decoded), or
// one carrying both x-kubernetes-group-version-kind lists when that is all
// they differ in (each group-version's DeleteOptions and WatchEvent list
// that group-version's kinds).
func merge(have, raw []byte) ([]byte, bool) {
	if bytes.Equal(have, raw) {
		return have, true
	}
	var x, y map[string]any
	if json.Unmarshal(have, &x) != nil || json.Unmarshal(raw, &y) != nil {
		return nil, false
	}
	xk, yk := x[gvkExtension], y[gvkExtension]
	delete(x, gvkExtension)
	delete(y, gvkExtension)
	if !reflect.DeepEqual(x, y) {
		return nil, false
	}
	if reflect.DeepEqual(xk, yk) {
		return have, true
	}
	xl, xok := xk.([]any)
	yl, yok := yk.([]any)
	if (xk != nil && !xok) || (yk != nil && !yok) {
		return nil, false
	}
	for _, k := range yl {
		if !slices.ContainsFunc(xl, func(h any) bool { return reflect.DeepEqual(h, k) }) {
			xl = append(xl, k)
		}
	}
	x[gvkExtension] = xl
	out, err := json.Marshal(x)
	return out, err == nil
}

const schemaRef = "#/components/schemas/"

// rename gives the schemas in differ, and every schema already merged
// that refers to a renamed one, a name of this document's own, and
// rewrites the document's references to them.
func (m *merger) rename(path string, schemas map[string][]byte, paths []member, differ []string) (map[string][]byte, []member, error) {
	decoded := make(map[string]any, len(schemas))
	refs := make(map[string]map[string]bool, len(schemas))
	for name, raw := range schemas {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, nil, fmt.Errorf("openapi3: %s: schema %q: %w", path, name, err)
		}
		decoded[name] = v
		refs[name] = map[string]bool{}
		walkRefs(v, func(ref string) string {
			if target, ok := strings.CutPrefix(ref, schemaRef); ok {
				refs[name][target] = true
			}
			return ref
		})
	}
	renames := map[string]string{}
	suffix := "_" + strings.NewReplacer("/", "_", ".", "_").Replace(path)
	var mark func(string)
	mark = func(name string) {
		if _, done := renames[name]; done {
			return
		}
		target := name + suffix
		for _, taken := m.schemas[target]; taken; _, taken = m.schemas[target] {
			target += "_"
		}
		renames[name] = target
		// A schema that refers to this one, and would otherwise be
		// shared with another document, must follow it.
		for other, r := range refs {
			if _, merged := m.schemas[other]; merged && r[name] {
				mark(other)
			}
		}
	}
	for _, name := range differ {
		mark(name)
	}
	rewrite := func(v any) ([]byte, error) {
		v = walkRefs(v, func(ref string) string {
			if target, ok := strings.CutPrefix(ref, schemaRef); ok {
				if r, ok := renames[target]; ok {
					return schemaRef + r
				}
			}
			return ref
		})
		return json.Marshal(v)
	}
	out := make(map[string][]byte, len(schemas))
	for name, v := range decoded {
		raw, err := rewrite(v)
		if err != nil {
			return nil, nil, err
		}
		if r, ok := renames[name]; ok {
			name = r
		}
		out[name] = raw
	}
	outPaths := make([]member, 0, len(paths))
	for _, p := range paths {
		var v any
		if err := json.Unmarshal(p.raw, &v); err != nil {
			return nil, nil, fmt.Errorf("openapi3: %s: path %s: %w", path, p.name, err)
		}
		raw, err := rewrite(v)
		if err != nil {
			return nil, nil, err
		}
		outPaths = append(outPaths, member{p.name, raw})
	}
	return out, outPaths, nil
}

// walkRefs calls fn on every "$ref" string in a decoded document, putting
// back what it returns.
func walkRefs(node any, fn func(string) string) any {
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			n["$ref"] = fn(ref)
		}
		for _, v := range n {
			walkRefs(v, fn)
		}
	case []any:
		for _, v := range n {
			walkRefs(v, fn)
		}
	}
	return node
}

// json writes the merged document, its names sorted.
func (m *merger) json() []byte {
	size := 1 << 10
	for _, raw := range m.schemas {
		size += len(raw) + 64
	}
	for _, raw := range m.paths {
		size += len(raw) + 64
	}
	b := bytes.NewBuffer(make([]byte, 0, size))
	b.WriteString(`{"openapi":"3.0.0","info":{"title":"Kubernetes","version":`)
	b.Write(m.version)
	b.WriteString(`},"paths":`)
	writeObject(b, m.paths)
	b.WriteString(`,"components":{"schemas":`)
	writeObject(b, m.schemas)
	kinds := make([]string, 0, len(m.components))
	for kind := range m.components {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		writeName(b, kind)
		writeObject(b, m.components[kind])
	}
	b.WriteByte('}')
	if m.security != nil {
		b.WriteString(`,"security":`)
		b.Write(m.security)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// writeObject writes members as a JSON object, sorted by name.
func writeObject(b *bytes.Buffer, members map[string][]byte) {
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(n)
		b.Write(key)
		b.WriteByte(':')
		b.Write(members[n])
	}
	b.WriteByte('}')
}

// writeName writes ,"name": after an object's first member.
func writeName(b *bytes.Buffer, name string) {
	key, _ := json.Marshal(name)
	b.WriteByte(',')
	b.Write(key)
	b.WriteByte(':')
}
