package surface

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file decodes aggregated discovery in protobuf straight into the
// snapshot's model. It exists for speed and memory: the generated decoder
// allocates every string of every resource (about 150,000 allocations for
// 3,000 CRDs) and then the model copies them again. Here the strings a
// snapshot keeps are copied into a few large arena blocks, a kind's group and
// version reuse the group-version's own strings, and the few
// distinct verb and category lists are decoded once and shared between the
// resources that have them, found by their encoded bytes (rawList). The
// snapshot is immutable, so sharing is safe.
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
	start    int // where the current field's tag is
	// The current field's value, for the bytes type: body.s[vOff:vEnd].
	vOff, vEnd int
}

func (r *protoReader) next() bool {
	if r.err != nil || r.body == nil || r.off >= r.end {
		return false
	}
	b := r.body.b[r.off:r.end]
	r.start = r.off
	// Most fields of discovery are a one-byte tag of a string or message
	// with a one-byte length; read those without the general path.
	if len(b) >= 2 && b[0] < 0x80 && b[0]&7 == byte(bytesType) && b[0] >= 8 && b[1] < 0x80 && int(b[1]) <= len(b)-2 {
		r.num, r.typ = int32(b[0]>>3), bytesType
		r.vOff = r.off + 2
		r.vEnd = r.vOff + int(b[1])
		r.off = r.vEnd
		return true
	}
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
// protobuf's protowire. Its module is in the graph of a program that
// imports discovery (k8s.io/apimachinery requires it), but no package of it
// is linked: protowire would add three (protowire, internal/errors,
// internal/detrand) to a discovery program's 110, depcheck's bound, for
// these few functions. They follow protowire's rules (a varint of at most 10
// bytes, field numbers from 1 to 2^31-1, groups skipped to their matching
// end), which FuzzWireMatchesProtowire holds against protowire itself.

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

// rawList gathers a repeated string field of one message (a resource's
// verbs, say) as its fields' encoded bytes, which are both the key of the
// list (length-prefixed, so unambiguous) and, on the first sight of a list,
// what it is decoded from: a list is only decoded once per document.
type rawList struct {
	start, end int    // the fields, when each followed the last: body[start:end]
	split      []byte // otherwise, copied together
	n          int
}

func (l *rawList) reset() { l.n, l.split = 0, l.split[:0] }

func (l *rawList) add(r *protoReader) {
	switch {
	case l.n == 0:
		l.start, l.end = r.start, r.off
	case len(l.split) == 0 && r.start == l.end:
		l.end = r.off
	default:
		if len(l.split) == 0 {
			l.split = append(l.split, r.body.b[l.start:l.end]...)
		}
		l.split = append(l.split, r.body.b[r.start:r.off]...)
	}
	l.n++
}

// listKind names a list's field, for listCache's last-list memory.
type listKind int

const (
	verbsList listKind = iota
	shortNamesList
	categoriesList
	subresourceVerbsList
)

// listCache shares identical string lists between resources. Neighbouring
// resources mostly have the same lists (every custom resource the same
// verbs), so the last list of each kind is compared first, before the map.
// Short names are compared with the last only: they are mostly a
// resource's own, and a map of them would cost more than it shares.
type listCache struct {
	lists map[string][]string
	last  [4]struct {
		key  string
		list []string
	}
	slab []string // lists are cut from it, one allocation for many
}

func (c *listCache) intern(kind listKind, l *rawList, body *protoBody, a *arena) []string {
	if l.n == 0 {
		return nil
	}
	r := protoReader{body: body, off: l.start, end: l.end}
	if len(l.split) > 0 { // rare: the key is a copy
		key := string(l.split)
		r = protoReader{body: &protoBody{b: l.split, s: key}, end: len(key)}
	}
	// The key may point into the body: the map is dropped with the decoder,
	// the body with it, and the snapshot holds neither.
	key := r.body.s[r.off:r.end]
	last := &c.last[kind]
	if last.list != nil && key == last.key {
		return last.list
	}
	list, ok := []string(nil), false
	if kind != shortNamesList {
		list, ok = c.lists[key]
	}
	if !ok { // first sight: the strings are copied out of the body
		if cap(c.slab)-len(c.slab) < l.n {
			c.slab = make([]string, 0, max(256, l.n))
		}
		start := len(c.slab)
		for r.next() {
			c.slab = append(c.slab, a.keep(r.str()))
		}
		list = c.slab[start:len(c.slab):len(c.slab)]
		if kind != shortNamesList {
			if c.lists == nil {
				c.lists = map[string][]string{}
			}
			c.lists[key] = list
		}
	}
	last.key, last.list = key, list
	return list
}

// decodeAggregatedProtobuf decodes a Kubernetes protobuf body holding an
// APIGroupDiscoveryList of the given apiVersion.
func decodeAggregatedProtobuf(body []byte, apiVersion string) ([]Group, error) {
	return decodeAggregatedProtobufSplit(body, apiVersion, splitAt, runtime.GOMAXPROCS(0))
}

// splitAt is the size of a list past which its groups are decoded on
// several goroutines (see decodeList): a cold start's /apis at 3,000 CRDs
// is about 1 MB, whose decoding was most of what a first mapping cost
// beyond the two GETs, while the second core sat idle. Below it a
// goroutine's start and a second arena cost more than they save.
const splitAt = 128 << 10

// decodeAggregatedProtobufSplit is decodeAggregatedProtobuf with the
// list's groups decoded by up to workers goroutines once the list holds at
// least split bytes; tests and the fuzzer force the split on small
// documents, to hold it to the one-part result.
func decodeAggregatedProtobufSplit(body []byte, apiVersion string, split, workers int) ([]Group, error) {
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
	groups, err := decodeList(raw, split, workers)
	if err != nil {
		return nil, fmt.Errorf("decoding APIGroupDiscoveryList: %w", err)
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
	// A resource's lists, reused for every resource.
	verbs, shortNames, categories, subVerbs rawList
	slab                                    []Subresource // see subresource
	resSlab                                 []Resource    // see resources
}

// resourceBlock is the fewest resources resources allocates room for at a
// time: about 50 KB.
const resourceBlock = 256

// resources is an empty slice with room for n resources, cut from a shared
// block: a document's group-versions are mostly small (a dozen resources
// each at 3,000 CRDs in 400 group-versions), and one allocation each was a
// tenth of decoding /apis. A block is only ever cut, never reused, so the
// slices never overlap; a resource dropped after decoding (unnamed, or a
// repeat) leaves a zero slot behind.
func (d *protoDecoder) resources(n int) []Resource {
	if n == 0 {
		return []Resource{} // empty, not nil, as before
	}
	if cap(d.resSlab)-len(d.resSlab) < n {
		d.resSlab = make([]Resource, 0, max(n, resourceBlock))
	}
	start := len(d.resSlab)
	d.resSlab = d.resSlab[:start+n]
	return d.resSlab[start : start : start+n]
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

func (d *protoDecoder) fail(r *protoReader) bool {
	if r.err != nil && d.err == nil {
		d.err = r.err
	}
	return d.err != nil
}

// decodeList decodes an APIGroupDiscoveryList's items. Groups are
// independent of each other, so the items of a list of split bytes or more
// are decoded by up to workers goroutines (this one among them), each
// taking the next item no other has taken (one slowed by the collector or
// other load takes fewer) and decoding it on a protoDecoder of its own (its
// own arena and shared lists: a snapshot never tells which decoder a string
// came from). All have returned before decodeList does, whatever they met.
// The result is the one-part decoding's: the groups in the list's order, a
// repeated group name kept at its first sight, and the error the one-part
// decoding would meet first (an item's before the list's own, which comes
// after every item read).
func decodeList(r protoReader, split, workers int) ([]Group, error) {
	whole := r
	size := r.end - r.off
	if size < split || workers < 2 {
		return whole.decodeSerially()
	}
	// The items' places, read first: a list is a run of length-prefixed
	// items, so this skips over them without decoding. An item of the
	// wrong wire type is an empty place, which decodes as an empty group,
	// as r.sub says. A list of more items than real groups could fill
	// (hostile: millions of empty items, each a group of its own until the
	// repeats are dropped) is decoded in one part, which drops each repeat
	// as it meets it.
	var items []span
	for r.next() {
		if r.num == 2 { // items
			if len(items) > max(size/minItemBytes, 1024) {
				return whole.decodeSerially()
			}
			s := r.sub()
			items = append(items, span{s.off, s.end})
		}
	}
	groups := make([]Group, len(items))
	var next atomic.Int64
	var mu sync.Mutex
	errAt, firstErr := len(items), error(nil)
	failed := func(i int, err error) {
		mu.Lock()
		if i < errAt {
			errAt, firstErr = i, err
		}
		mu.Unlock()
		// Every item before i is taken, and is decoded by whoever took
		// it; none after i matters.
		next.Store(int64(len(items)))
	}
	work := func() {
		d := &protoDecoder{}
		i := -1
		defer func() {
			// A bug met on server data is the item's error: on a goroutine
			// of its own, a panic would end the user's process.
			if p := recover(); p != nil {
				failed(i, fmt.Errorf("item %d: internal error: %v", i, p))
			}
		}()
		for i = int(next.Add(1) - 1); i < len(items); i = int(next.Add(1) - 1) {
			if groups[i] = d.group(r.at(items[i])); d.err != nil {
				failed(i, d.err)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for range min(workers, len(items)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	out := groups[:0] // as the JSON path gives an empty list: empty, not nil
	seen := map[string]bool{}
	for _, g := range groups {
		if !seen[g.Name] {
			seen[g.Name] = true
			out = append(out, g)
		}
	}
	clear(groups[len(out):]) // repeats, not to be kept alive
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// minItemBytes is the size below which the items of a list of more than
// 1,024 are too small to be real groups on average (one with a name and a
// version takes more), and the list is decoded in one part: see
// decodeList.
const minItemBytes = 32

// decodeSerially decodes the list's items in one part, on this goroutine;
// a bug met on server data is an error here too, as on decodeList's
// goroutines.
func (r protoReader) decodeSerially() (_ []Group, err error) {
	d := &protoDecoder{}
	i := 0
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("item %d: internal error: %v", i, p)
		}
	}()
	groups := []Group{} // as the JSON path gives an empty list: empty, not nil
	seen := map[string]bool{}
	for r.next() {
		if r.num != 2 { // items
			continue
		}
		g := d.group(r.sub())
		if d.err != nil {
			return nil, d.err
		}
		if i++; !seen[g.Name] {
			seen[g.Name] = true
			groups = append(groups, g)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return groups, nil
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
	v.Resources = d.resources(len(resources))
	var seen seenSet
	d.resourceSpans = resources
	for _, rs := range resources {
		// Decoded in place: a Resource is large, and copying it in would
		// cost a write barrier per pointer while the collector runs.
		n := len(v.Resources)
		v.Resources = v.Resources[:n+1]
		res := &v.Resources[n]
		ok := d.resource(r.at(rs), gv, res)
		if d.err != nil {
			return v, false
		}
		if !ok || !seen.add(res.Name) {
			*res = Resource{}
			v.Resources = v.Resources[:n]
		}
	}
	return v, stale
}

// kindFields is a GroupVersionKind message as read so far. Protobuf merges
// the occurrences of a message field, each field a later one gives
// replacing the earlier's, as the generated decoder does: a kind given
// twice (or given, then given again empty) is read as one.
type kindFields struct{ group, version, kind string }

// readKind merges the GroupVersionKind message r into f.
func (d *protoDecoder) readKind(r protoReader, f *kindFields) {
	for r.next() {
		switch r.num {
		case 1:
			f.group = r.str()
		case 2:
			f.version = r.str()
		case 3:
			f.kind = r.str()
		}
	}
	d.fail(&r)
}

// kind is the GroupVersionKind f read; explicit says whether group or
// version were given, and an empty group and version mean gv's; given,
// whether any of the three was (client-go drops a kind only when all are
// empty).
func (d *protoDecoder) kind(f kindFields, gv schema.GroupVersion) (k schema.GroupVersionKind, explicit, given bool) {
	group, version := f.group, f.version
	explicit = group != "" || version != ""
	given = explicit || f.kind != ""
	if !explicit {
		group, version = gv.Group, gv.Version
	}
	k.Kind = d.arena.keep(f.kind)
	k.Group, k.Version = gv.Group, gv.Version
	if group != gv.Group {
		k.Group = d.arena.keep(group)
	}
	if version != gv.Version {
		k.Version = d.arena.keep(version)
	}
	return k, explicit, given
}

// resource decodes into res, which is zero, and says whether to keep it.
func (d *protoDecoder) resource(r protoReader, gv schema.GroupVersion, res *Resource) bool {
	var kind kindFields
	d.verbs.reset()
	d.shortNames.reset()
	d.categories.reset()
	subs := len(d.slab) // this resource's subresources are d.slab[subs:]
	for r.next() {
		switch r.num {
		case 1:
			res.Name = d.arena.keep(r.str())
		case 2:
			d.readKind(r.sub(), &kind)
		case 3:
			res.Namespaced = r.str() == "Namespaced"
		case 4:
			res.SingularName = d.arena.keep(r.str())
		case 5:
			d.verbs.add(&r)
		case 6:
			d.shortNames.add(&r)
		case 7:
			d.categories.add(&r)
		case 8:
			d.subresource(r.sub(), gv, &subs)
		}
	}
	if len(d.slab) > subs {
		res.Subresources = d.slab[subs:len(d.slab):len(d.slab)]
	}
	var hasKind bool
	res.Kind, res.explicitKind, hasKind = d.kind(kind, gv)
	if d.fail(&r) || res.Name == "" || !hasKind && len(res.Subresources) == 0 {
		clear(d.slab[subs:])
		d.slab = d.slab[:subs]
		res.Subresources = nil
		return false
	}
	if !hasKind {
		// Listed only for its subresources, as kube-aggregator lists
		// custom and external metrics (fromAggregatedResources).
		res.Kind, res.subresourcesOnly = schema.GroupVersionKind{}, true
	}
	res.Verbs = d.lists.intern(verbsList, &d.verbs, r.body, &d.arena)
	res.ShortNames = d.lists.intern(shortNamesList, &d.shortNames, r.body, &d.arena)
	res.Categories = d.lists.intern(categoriesList, &d.categories, r.body, &d.arena)
	return true
}

// subresource decodes a subresource in place at the end of d.slab, a
// shared block (one allocation for many resources' subresources), where
// the resource's own begin at *first; a full block is left to the slices
// already cut from it, and the resource's are moved to the next.
func (d *protoDecoder) subresource(r protoReader, gv schema.GroupVersion, first *int) {
	if len(d.slab) == cap(d.slab) {
		mine := d.slab[*first:]
		d.slab = append(make([]Subresource, 0, max(512, 2*len(mine))), mine...)
		clear(mine) // no slice was cut from them: they are dropped
		*first = 0
	}
	n := len(d.slab)
	d.slab = d.slab[:n+1]
	s := &d.slab[n]
	var kind kindFields
	d.subVerbs.reset()
	for r.next() {
		switch r.num {
		case 1:
			s.Name = d.arena.keep(r.str())
		case 2:
			d.readKind(r.sub(), &kind)
		case 4:
			d.subVerbs.add(&r)
		}
	}
	var given bool
	s.Kind, s.explicitKind, given = d.kind(kind, gv)
	if d.fail(&r) || s.Name == "" || !given {
		*s = Subresource{}
		d.slab = d.slab[:n]
		return
	}
	s.Verbs = d.lists.intern(subresourceVerbsList, &d.subVerbs, r.body, &d.arena)
}
