package surface

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file decodes aggregated discovery in protobuf straight into the
// snapshot's model. It exists for speed and memory: the generated decoder
// allocates every string of every resource (about 150,000 allocations for
// 3,000 CRDs) and then the model copies them again. Here the strings a
// snapshot keeps are copied into a few large arena blocks, a kind's group and
// version reuse the group-version's own strings, and the few
// distinct verb, short-name and category lists are shared between the
// resources that have them. The snapshot is immutable, so sharing is safe.
//
// Field numbers are those of k8s.io/api/apidiscovery/v2 (and v2beta1, which
// has the same ones), k8s.io/apimachinery's meta/v1 GroupVersionKind and
// ObjectMeta, and runtime.Unknown, the envelope of every Kubernetes protobuf
// body. Unknown fields are skipped, as protobuf requires.

// protoBody is a message as bytes (for parsing) and as a string (for
// values) over the same memory, so a field's value is a substring without
// an allocation of its own.
type protoBody struct {
	b []byte
	s string
}

// protoReader walks the fields of one message, body[off:end].
type protoReader struct {
	body     *protoBody
	off, end int
	err      error
	num      int32
	typ      wireType
	// The current field's value, for the bytes type: body.s[vOff:vEnd].
	vOff, vEnd int
}

func (r *protoReader) next() bool {
	if r.err != nil || r.body == nil || r.off >= r.end {
		return false
	}
	b := r.body.b[r.off:r.end]
	num, typ, n, err := consumeTag(b)
	if err != nil {
		r.err = err
		return false
	}
	r.num, r.typ = num, typ
	var m int
	if typ == bytesType {
		var l uint64
		l, m, err = consumeVarint(b[n:])
		if err == nil && l > uint64(len(b)-n-m) {
			err = errTruncated
		}
		r.vOff = r.off + n + m
		r.vEnd = r.vOff + int(l)
		m += int(l)
	} else {
		m, err = skipValue(num, typ, b[n:], maxGroupDepth)
	}
	if err != nil {
		r.err = err
		return false
	}
	r.off += n + m
	return true
}

// The wire format, read by hand rather than with google.golang.org/
// protobuf's protowire: that package would be the only protobuf code a
// program that imports discovery links (three packages of its 110), and
// what is needed of it is these few functions. They follow protowire's
// rules (a varint of at most 10 bytes, field numbers from 1 to 2^31-1,
// groups skipped to their matching end), which the fuzz test holds against
// the generated decoder.

// wireType is a field's wire type.
type wireType uint8

const (
	varintType     wireType = 0
	fixed64Type    wireType = 1
	bytesType      wireType = 2
	startGroupType wireType = 3
	endGroupType   wireType = 4
	fixed32Type    wireType = 5
)

// maxGroupDepth bounds the nesting of groups skipped, as protowire's
// recursion limit does.
const maxGroupDepth = 10000

var (
	errTruncated   = errors.New("unexpected EOF")
	errOverflow    = errors.New("variable length integer overflow")
	errFieldNumber = errors.New("invalid field number")
	errEndGroup    = errors.New("mismatching end group marker")
	errReserved    = errors.New("cannot parse reserved wire type")
	errDepth       = errors.New("exceeded maximum recursion depth")
)

// consumeVarint reads a varint at the start of b, and its length.
func consumeVarint(b []byte) (v uint64, n int, err error) {
	if len(b) > 0 && b[0] < 0x80 { // most tags and lengths
		return uint64(b[0]), 1, nil
	}
	for i := 0; i < 10; i++ {
		if i >= len(b) {
			return 0, 0, errTruncated
		}
		c := b[i]
		if i == 9 && c > 1 {
			return 0, 0, errOverflow
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errOverflow
}

// consumeTag reads a field's tag at the start of b, and its length.
func consumeTag(b []byte) (num int32, typ wireType, n int, err error) {
	v, n, err := consumeVarint(b)
	if err != nil {
		return 0, 0, 0, err
	}
	if v>>3 == 0 || v>>3 > 1<<31-1 {
		return 0, 0, 0, errFieldNumber
	}
	return int32(v >> 3), wireType(v & 7), n, nil
}

// skipValue is the length of the value of field num, of type typ, at the
// start of b.
func skipValue(num int32, typ wireType, b []byte, depth int) (int, error) {
	switch typ {
	case varintType:
		_, n, err := consumeVarint(b)
		return n, err
	case fixed32Type, fixed64Type:
		n := 4
		if typ == fixed64Type {
			n = 8
		}
		if len(b) < n {
			return 0, errTruncated
		}
		return n, nil
	case bytesType:
		l, n, err := consumeVarint(b)
		if err != nil {
			return 0, err
		}
		if l > uint64(len(b)-n) {
			return 0, errTruncated
		}
		return n + int(l), nil
	case startGroupType:
		if depth < 0 {
			return 0, errDepth
		}
		off := 0
		for {
			num2, typ2, n, err := consumeTag(b[off:])
			if err != nil {
				return 0, err
			}
			off += n
			if typ2 == endGroupType {
				if num2 != num {
					return 0, errEndGroup
				}
				return off, nil
			}
			if n, err = skipValue(num2, typ2, b[off:], depth-1); err != nil {
				return 0, err
			}
			off += n
		}
	case endGroupType:
		return 0, errEndGroup
	default:
		return 0, errReserved
	}
}

// str is the current field as a string, or "" when its type is wrong.
func (r *protoReader) str() string {
	if r.typ != bytesType {
		return ""
	}
	return r.body.s[r.vOff:r.vEnd]
}

// span is where an embedded message lies in the body.
type span struct{ off, end int }

// span is the current field's place, to be read later with at.
func (r *protoReader) span() span { return span{r.vOff, r.vEnd} }

// at reads a message at a place in the same body.
func (r *protoReader) at(s span) protoReader {
	return protoReader{body: r.body, off: s.off, end: s.end}
}

// sub reads the current field as an embedded message.
func (r *protoReader) sub() protoReader {
	if r.typ != bytesType {
		return protoReader{}
	}
	return protoReader{body: r.body, off: r.vOff, end: r.vEnd}
}

// listCache shares identical string lists between resources. Lookups build
// their key in a reused buffer; Go does not allocate for m[string(buf)].
type listCache struct {
	lists map[string][]string
	key   []byte
}

func (c *listCache) intern(scratch []string, a *arena) []string {
	if len(scratch) == 0 {
		return nil
	}
	c.key = c.key[:0]
	for _, s := range scratch {
		c.key = append(c.key, s...)
		c.key = append(c.key, 0)
	}
	if l, ok := c.lists[string(c.key)]; ok {
		return l
	}
	if c.lists == nil {
		c.lists = map[string][]string{}
	}
	// The scratch strings point into the body: the kept list gets copies.
	l := a.keepAll(slices.Clone(scratch))
	c.lists[string(c.key)] = l
	return l
}

// decodeAggregatedProtobuf decodes a Kubernetes protobuf body holding an
// APIGroupDiscoveryList of the given apiVersion.
func decodeAggregatedProtobuf(body []byte, apiVersion string) ([]Group, error) {
	if len(body) < len(protobufMagic) || string(body[:len(protobufMagic)]) != string(protobufMagic) {
		return nil, fmt.Errorf("body is not Kubernetes protobuf (no magic prefix)")
	}
	// The body viewed as a string, for reading only: what the snapshot
	// keeps is copied out of it (see arena), so the body can be dropped.
	pb := &protoBody{b: body, s: unsafe.String(unsafe.SliceData(body), len(body))}
	var gotVersion, gotKind string
	var raw protoReader
	env := protoReader{body: pb, off: len(protobufMagic), end: len(body)}
	for env.next() {
		switch env.num {
		case 1: // typeMeta
			tm := env.sub()
			for tm.next() {
				switch tm.num {
				case 1:
					gotVersion = tm.str()
				case 2:
					gotKind = tm.str()
				}
			}
			if tm.err != nil {
				return nil, fmt.Errorf("protobuf envelope: %w", tm.err)
			}
		case 2: // raw
			raw = env.sub()
		}
	}
	if env.err != nil {
		return nil, fmt.Errorf("protobuf envelope: %w", env.err)
	}
	if (gotVersion != "" || gotKind != "") && (gotVersion != apiVersion || gotKind != "APIGroupDiscoveryList") {
		return nil, fmt.Errorf("body holds %s %s, want %s APIGroupDiscoveryList", gotVersion, gotKind, apiVersion)
	}
	d := protoDecoder{}
	groups := d.list(raw)
	if d.err != nil {
		return nil, fmt.Errorf("decoding APIGroupDiscoveryList: %w", d.err)
	}
	return groups, nil
}

type protoDecoder struct {
	err   error
	lists listCache
	arena arena
	// Where a group's versions and a version's resources lie, collected
	// before they are decoded (a group's name or a version's may come after
	// them); reused, since neither nests in itself.
	versionSpans, resourceSpans []span
	// Scratch lists, reused for every resource before interning.
	verbs, shortNames, categories []string
	subs                          []Subresource
	slab                          []Subresource
}

// arena copies strings into shared blocks, so that a snapshot holds neither
// the response body (mostly protobuf framing) nor one allocation per name.
type arena struct {
	block []byte
	size  int // of the next block
}

const arenaBlock = 64 << 10

func (a *arena) keep(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > arenaBlock/8 {
		return strings.Clone(s)
	}
	if len(a.block)+len(s) > cap(a.block) {
		// Strings already handed out keep the old block alive. Blocks
		// start small, for small documents, and double up to arenaBlock.
		a.size = min(max(2*a.size, 1<<10), arenaBlock)
		a.block = make([]byte, 0, a.size)
	}
	start := len(a.block)
	a.block = append(a.block, s...)
	return unsafe.String(&a.block[start], len(s))
}

// keepAll copies a list's strings into the arena.
func (a *arena) keepAll(l []string) []string {
	for i := range l {
		l[i] = a.keep(l[i])
	}
	return l
}

func (d *protoDecoder) fail(r *protoReader) bool {
	if r.err != nil && d.err == nil {
		d.err = r.err
	}
	return d.err != nil
}

func (d *protoDecoder) list(r protoReader) []Group {
	groups := []Group{} // as the JSON path gives an empty list: empty, not nil
	seen := map[string]bool{}
	for r.next() {
		if r.num != 2 { // items
			continue
		}
		g := d.group(r.sub())
		if d.err != nil {
			return nil
		}
		if seen[g.Name] {
			continue
		}
		seen[g.Name] = true
		groups = append(groups, g)
	}
	d.fail(&r)
	return groups
}

func (d *protoDecoder) group(r protoReader) Group {
	var g Group
	versions := d.versionSpans[:0]
	for r.next() {
		switch r.num {
		case 1: // metadata
			m := r.sub()
			for m.next() {
				if m.num == 1 {
					g.Name = d.arena.keep(m.str())
				}
			}
			d.fail(&m)
		case 2: // versions; decoded once the group's name is known
			versions = append(versions, r.span())
		}
	}
	if d.fail(&r) {
		return g
	}
	g.Versions = make([]Version, 0, len(versions))
	var seen seenSet
	d.versionSpans = versions
	for _, vs := range versions {
		v, stale := d.version(r.at(vs), g.Name)
		if d.err != nil {
			return g
		}
		if v.Version == "" || !seen.add(v.Version) {
			continue
		}
		if stale {
			v.Freshness = FreshnessStale
		}
		g.Versions = append(g.Versions, v)
	}
	return g
}

func (d *protoDecoder) version(r protoReader, group string) (Version, bool) {
	var v Version
	var stale bool
	resources := d.resourceSpans[:0]
	for r.next() {
		switch r.num {
		case 1:
			v.Version = d.arena.keep(r.str())
		case 2: // resources; decoded once the version is known
			resources = append(resources, r.span())
		case 3:
			stale = r.str() == "Stale"
		}
	}
	if d.fail(&r) {
		return v, false
	}
	gv := schema.GroupVersion{Group: group, Version: v.Version}
	v.Resources = make([]Resource, 0, len(resources))
	var seen seenSet
	d.resourceSpans = resources
	for _, rs := range resources {
		res, ok := d.resource(r.at(rs), gv)
		if d.err != nil {
			return v, false
		}
		if ok && seen.add(res.Name) {
			v.Resources = append(v.Resources, res)
		}
	}
	return v, stale
}

// kind reads a GroupVersionKind; explicit says whether group or version
// were given, and an empty group and version mean gv's; given, whether any
// of the three was (client-go drops a kind only when all are empty).
func (d *protoDecoder) kind(r protoReader, gv schema.GroupVersion) (k schema.GroupVersionKind, explicit, given bool) {
	var group, version, kind string
	for r.next() {
		switch r.num {
		case 1:
			group = r.str()
		case 2:
			version = r.str()
		case 3:
			kind = r.str()
		}
	}
	d.fail(&r)
	explicit = group != "" || version != ""
	given = explicit || kind != ""
	if !explicit {
		group, version = gv.Group, gv.Version
	}
	k.Kind = d.arena.keep(kind)
	k.Group, k.Version = gv.Group, gv.Version
	if group != gv.Group {
		k.Group = d.arena.keep(group)
	}
	if version != gv.Version {
		k.Version = d.arena.keep(version)
	}
	return k, explicit, given
}

func (d *protoDecoder) resource(r protoReader, gv schema.GroupVersion) (Resource, bool) {
	var res Resource
	hasKind := false
	verbs, shortNames, categories := d.verbs[:0], d.shortNames[:0], d.categories[:0]
	subs := d.subs[:0]
	for r.next() {
		switch r.num {
		case 1:
			res.Name = d.arena.keep(r.str())
		case 2:
			res.Kind, res.explicitKind, hasKind = d.kind(r.sub(), gv)
		case 3:
			res.Namespaced = r.str() == "Namespaced"
		case 4:
			res.SingularName = d.arena.keep(r.str())
		case 5:
			verbs = append(verbs, r.str())
		case 6:
			shortNames = append(shortNames, r.str())
		case 7:
			categories = append(categories, r.str())
		case 8:
			if s, ok := d.subresource(r.sub(), gv); ok {
				subs = append(subs, s)
			}
		}
	}
	d.verbs, d.shortNames, d.categories, d.subs = verbs, shortNames, categories, subs
	res.Subresources = d.subresourceSlab(subs)
	if d.fail(&r) || res.Name == "" || !hasKind && len(res.Subresources) == 0 {
		return res, false
	}
	if !hasKind {
		// Listed only for its subresources, as kube-aggregator lists
		// custom and external metrics (fromAggregatedResources).
		res.Kind, res.subresourcesOnly = schema.GroupVersionKind{}, true
	}
	res.Verbs = d.lists.intern(verbs, &d.arena)
	res.ShortNames = d.lists.intern(shortNames, &d.arena)
	res.Categories = d.lists.intern(categories, &d.arena)
	return res, true
}

// subresourceSlab copies a resource's subresources into a shared block, one
// allocation per many resources instead of one or two per resource. A full
// block is left to the slices already cut from it.
func (d *protoDecoder) subresourceSlab(subs []Subresource) []Subresource {
	if len(subs) == 0 {
		return nil
	}
	if cap(d.slab)-len(d.slab) < len(subs) {
		d.slab = make([]Subresource, 0, max(512, len(subs)))
	}
	start := len(d.slab)
	d.slab = append(d.slab, subs...)
	return d.slab[start:len(d.slab):len(d.slab)]
}

func (d *protoDecoder) subresource(r protoReader, gv schema.GroupVersion) (Subresource, bool) {
	var s Subresource
	given := false
	var buf [8]string // subresources have few verbs; intern copies them out
	verbs := buf[:0]
	for r.next() {
		switch r.num {
		case 1:
			s.Name = d.arena.keep(r.str())
		case 2:
			s.Kind, s.explicitKind, given = d.kind(r.sub(), gv)
		case 4:
			verbs = append(verbs, r.str())
		}
	}
	if d.fail(&r) || s.Name == "" || !given {
		return s, false
	}
	s.Verbs = d.lists.intern(verbs, &d.arena)
	return s, true
}
