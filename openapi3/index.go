package openapi3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// A document is indexed, not parsed, when it arrives: one pass over its
// bytes finds where each components/schemas entry lies, checking that
// brackets balance and strings end. A schema is parsed (into spec.Schema)
// the first time something asks for it. Parsing a whole group-version
// document into spec3 costs ~50x the index; most callers need a few
// schemas of it.

// span is where a value lies in a document: b[start:end].
type span struct{ start, end int }

// maxDepth bounds nesting, against a document that is all brackets.
const maxDepth = 10000

// SyntaxError reports a document that is not well-formed JSON, with the
// byte offset where reading stopped.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

type scanner struct {
	b []byte
	i int

	// What indexDocument counts as it goes, and the bounds it stops at
	// (nil: none but maxDepth).
	depth int // objects open around s.i, outside value's own stack
	stats DocumentStats
	lim   *DocumentLimits
}

// propertiesName is the member whose object's members the scanner counts
// as properties.
var propertiesName = []byte("properties")

// opened counts one more object or array open, depth deep, against the
// bounds.
func (s *scanner) opened(depth int, object bool) error {
	if depth > s.stats.Depth {
		s.stats.Depth = depth
	}
	if object {
		s.stats.Objects++
	}
	if s.lim == nil {
		return nil
	}
	if s.stats.Depth > s.lim.Depth {
		return &LimitError{Limit: "depth", Max: int64(s.lim.Depth), Offset: s.i}
	}
	if s.stats.Objects > s.lim.Objects {
		return &LimitError{Limit: "objects", Max: int64(s.lim.Objects), Offset: s.i}
	}
	return nil
}

// property counts one more member of a properties object.
func (s *scanner) property() error {
	s.stats.Properties++
	if s.lim != nil && s.stats.Properties > s.lim.Properties {
		return &LimitError{Limit: "properties", Max: int64(s.lim.Properties), Offset: s.i}
	}
	return nil
}

// after is the index of the first byte at or after i that is not
// whitespace (len(s.b) if none).
func (s *scanner) after(i int) int {
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (s *scanner) fail(msg string) error { return &SyntaxError{Offset: s.i, Msg: msg} }

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// expect consumes c after whitespace.
func (s *scanner) expect(c byte) error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != c {
		if s.i >= len(s.b) {
			return s.fail(fmt.Sprintf("want %q, found the end", c))
		}
		return s.fail(fmt.Sprintf("want %q, found %q", c, s.b[s.i]))
	}
	s.i++
	return nil
}

// str consumes a string whose opening quote is at s.i and returns what lies
// between the quotes, and whether it holds escapes.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	start := s.i + 1
	if err := s.skipStr(); err != nil {
		return nil, false, err
	}
	raw = s.b[start : s.i-1]
	return raw, bytes.IndexByte(raw, '\\') >= 0, nil
}

// skipStr moves past the string at s.i (its opening quote), without
// looking inside it beyond the quotes: most of a document's bytes are in
// strings (descriptions) that the index only steps over.
func (s *scanner) skipStr() error {
	start := s.i + 1
	for j := start; ; {
		k := bytes.IndexByte(s.b[j:], '"')
		if k < 0 {
			s.i = len(s.b)
			return s.fail("unterminated string")
		}
		j += k
		// The quote ends the string unless an odd run of backslashes
		// precedes it.
		n := 0
		for p := j - 1; p >= start && s.b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			s.i = j + 1
			return nil
		}
		j++
	}
}

// name consumes an object member's name and its colon.
func (s *scanner) name() (string, error) {
	name, err := s.string()
	if err != nil {
		return "", err
	}
	return name, s.expect(':')
}

// string consumes a string value, unescaped.
func (s *scanner) string() (string, error) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", s.fail("want a string")
	}
	at := s.i
	raw, escaped, err := s.str()
	if err != nil {
		return "", err
	}
	v := string(raw)
	if escaped || !utf8.Valid(raw) { // as encoding/json does: U+FFFD for bad bytes
		v = ""
		if err := json.Unmarshal(s.b[at:s.i], &v); err != nil {
			return "", s.fail("bad string: " + err.Error())
		}
	}
	return v, nil
}

// value consumes one value and returns where it lies. Inside objects and
// arrays it checks only that brackets pair up and strings end; whoever
// parses the value checks the rest.
func (s *scanner) value() (span, error) {
	s.ws()
	start := s.i
	if s.i >= len(s.b) {
		return span{}, s.fail("want a value, found the end")
	}
	switch c := s.b[s.i]; c {
	case '"':
		err := s.skipStr()
		return span{start, s.i}, err
	case '{', '[':
		// The stack holds what closes each open value: '}' or ']', or
		// propsClose for the object of a "properties" member, whose
		// members are counted (DocumentStats.Properties).
		const propsClose = 'P'
		stack := make([]byte, 0, 64) // on the goroutine's stack while it fits
		for s.i < len(s.b) {
			switch c := s.b[s.i]; c {
			case '"':
				at := s.i
				if err := s.skipStr(); err != nil {
					return span{}, err
				}
				top := byte(0)
				if len(stack) > 0 {
					top = stack[len(stack)-1]
				}
				inProps := top == propsClose
				if !inProps && (s.i-at-2 != len(propertiesName) || !bytes.Equal(s.b[at+1:s.i-1], propertiesName)) {
					continue
				}
				// A member's name, if a colon follows.
				colon := s.after(s.i)
				if colon >= len(s.b) || s.b[colon] != ':' {
					continue
				}
				if inProps {
					if err := s.property(); err != nil {
						return span{}, err
					}
					continue
				}
				// "properties": an object whose members are properties
				// (a property called "properties" is not one).
				open := s.after(colon + 1)
				if open >= len(s.b) || s.b[open] != '{' {
					continue
				}
				s.i = open
				if len(stack) == maxDepth {
					return span{}, s.fail("nested too deep")
				}
				stack = append(stack, propsClose)
				if err := s.opened(s.depth+len(stack), true); err != nil {
					return span{}, err
				}
			case '{', '[':
				if len(stack) == maxDepth {
					return span{}, s.fail("nested too deep")
				}
				stack = append(stack, c+2) // '{'+2 = '}', '['+2 = ']'
				if err := s.opened(s.depth+len(stack), c == '{'); err != nil {
					return span{}, err
				}
			case '}', ']':
				if len(stack) == 0 || (stack[len(stack)-1] != c && (c != '}' || stack[len(stack)-1] != propsClose)) {
					return span{}, s.fail(fmt.Sprintf("unexpected %q", c))
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					s.i++
					return span{start, s.i}, nil
				}
			}
			s.i++
		}
		return span{}, s.fail("unterminated " + string(c))
	default: // a number, true, false or null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if s.i == start {
					return span{}, s.fail(fmt.Sprintf("unexpected %q", s.b[s.i]))
				}
				return span{start, s.i}, nil
			}
			s.i++
		}
		return span{start, s.i}, nil
	}
}

// members calls fn for each member of the object at s.i; fn consumes the
// member's value. null is an object without members, as encoding/json and
// kube-openapi read it.
func (s *scanner) members(fn func(name string) error) error {
	s.ws()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += len("null")
		return nil
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	s.depth++
	defer func() { s.depth-- }()
	if err := s.opened(s.depth, true); err != nil {
		return err
	}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		name, err := s.name()
		if err != nil {
			return err
		}
		if err := fn(name); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unterminated object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail(fmt.Sprintf("want ',' or '}', found %q", s.b[s.i]))
		}
	}
}

// end checks that nothing but whitespace follows.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("data after the document")
	}
	return nil
}

// uniqueMembers is members, with a name given twice an error (as it is to
// kube-openapi's parser).
func (s *scanner) uniqueMembers(fn func(name string) error) error {
	seen := map[string]bool{}
	return s.members(func(name string) error {
		if seen[name] {
			return s.fail(fmt.Sprintf("member %q given twice", name))
		}
		seen[name] = true
		return fn(name)
	})
}

// into reads an object's members, each name once, handing the one called
// want to inner (which consumes its value) and skipping the others.
func (s *scanner) into(want string, inner func() error) error {
	return s.uniqueMembers(func(name string) error {
		if name != want {
			_, err := s.value()
			return err
		}
		return inner()
	})
}

// docIndex is where a document's parts lie: each components/schemas entry,
// the other components (securitySchemes), and the top-level members but
// components (paths, info, security).
type docIndex struct {
	schemas, components, top map[string]span
	stats                    DocumentStats
}

// indexDocument indexes a JSON document in one pass, checking that the
// whole of it is one well-bracketed object. A name given twice at the
// levels it reads is an error, as it is to kube-openapi's parser. With
// lim, it stops at the first bound passed, with a *LimitError: a hostile
// document costs no more than its bytes and the bounds' worth of index.
func indexDocument(b []byte, lim *DocumentLimits) (docIndex, error) {
	s := &scanner{b: b, lim: lim}
	idx := docIndex{schemas: map[string]span{}, components: map[string]span{}, top: map[string]span{}}
	// record reads the members of an object, recording each value in
	// spans but the one called want, which inner reads (none, for a nil
	// inner).
	record := func(spans map[string]span, want string, inner func() error) error {
		return s.uniqueMembers(func(name string) error {
			if inner != nil && name == want {
				return inner()
			}
			v, err := s.value()
			spans[name] = v
			return err
		})
	}
	err := record(idx.top, "components", func() error {
		return record(idx.components, "schemas", func() error {
			return s.uniqueMembers(func(name string) error {
				if lim != nil && len(idx.schemas) >= lim.Schemas {
					return &LimitError{Limit: "schemas", Max: int64(lim.Schemas), Offset: s.i}
				}
				v, err := s.value()
				idx.schemas[name] = v
				return err
			})
		})
	})
	if err == nil {
		err = s.end()
	}
	idx.stats = s.stats
	idx.stats.Schemas = len(idx.schemas)
	return idx, err
}

// indexSchemas finds each components/schemas entry of a JSON document (see
// indexDocument).
func indexSchemas(b []byte) (map[string]span, error) {
	idx, err := indexDocument(b, nil)
	if err != nil {
		return nil, err
	}
	return idx.schemas, nil
}

// memberOf returns the value of the member called name of the JSON object
// b, or nil if it has none.
func memberOf(b []byte, name string) ([]byte, error) {
	s := &scanner{b: b}
	var found []byte
	err := s.members(func(n string) error {
		v, err := s.value()
		if n == name && err == nil {
			found = b[v.start:v.end]
		}
		return err
	})
	return found, err
}

// parseRoot reads the /openapi/v3 root: each path's serverRelativeURL.
// (encoding/json took a millisecond and a half over a 470-path root; this
// is what a new process pays before its first document.) A root of more
// than maxPaths paths is a *LimitError, found before the next is kept.
func parseRoot(b []byte, maxPaths int) (map[string]string, error) {
	s := &scanner{b: b}
	root := map[string]string{}
	n := 0 // paths, counted before their URL (one may have none)
	err := s.into("paths", func() error {
		return s.uniqueMembers(func(path string) error {
			if n++; n > maxPaths {
				return &LimitError{Limit: "paths", Max: int64(maxPaths), Offset: s.i}
			}
			return s.into("serverRelativeURL", func() error {
				u, err := s.string()
				root[path] = u
				return err
			})
		})
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, err
	}
	return root, nil
}
