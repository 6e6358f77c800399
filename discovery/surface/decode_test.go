package surface

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"reflect"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// generatedDecode is the reference: the generated protobuf decoder, then the
// same conversion the JSON path uses.
func generatedDecode(body []byte) ([]Group, bool) {
	if !bytes.HasPrefix(body, protobufMagic) {
		return nil, false
	}
	var u runtime.Unknown
	if u.Unmarshal(body[len(protobufMagic):]) != nil || u.APIVersion != "apidiscovery.k8s.io/v2" || u.Kind != "APIGroupDiscoveryList" {
		return nil, false
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if list.Unmarshal(u.Raw) != nil {
		return nil, false
	}
	return fromAggregated(list.Items), true
}

func fixtureProtobuf(t testing.TB) []byte {
	t.Helper()
	body, err := os.ReadFile("testdata/k8s-v1.36.3/apis.v2.pb")
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// decodeAsGenerated decodes body (an APIGroupDiscoveryList v2) with the
// hand-written decoder, and fails t unless the generated one gives the
// same and no string the result holds points into body (which it would
// keep alive).
func decodeAsGenerated(t *testing.T, body []byte, what string) []Group {
	t.Helper()
	got, err := decodeAggregatedProtobuf(body, "apidiscovery.k8s.io/v2")
	if err != nil {
		t.Fatal(err)
	}
	want, ok := generatedDecode(body)
	if !ok {
		t.Fatalf("the generated decoder rejects %s", what)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoders disagree on %s (%d groups vs %d)", what, len(got), len(want))
	}
	if where := aliasing(body, got); where != "" {
		t.Errorf("a snapshot string points into the response body, which it would keep alive: %s", where)
	}
	return got
}

// TestProtobufDecoderMatchesGenerated: the hand-written decoder gives what
// the generated one gives, on the real server's document.
func TestProtobufDecoderMatchesGenerated(t *testing.T) {
	body := fixtureProtobuf(t)
	holdSplitToOnePart(t, body)
	holdSplitToOnePart(t, body[:len(body)/2])
	if got := decodeAsGenerated(t, body, "the fixture"); len(got) != 20 {
		t.Errorf("%d groups in the fixture, want 20", len(got))
	}
	if _, err := decodeAggregatedProtobuf(body, "apidiscovery.k8s.io/v2beta1"); err == nil {
		t.Errorf("a v2 document accepted as v2beta1")
	}
	for _, bad := range [][]byte{nil, []byte("k8s"), []byte("{\"kind\":\"APIGroupDiscoveryList\"}"), body[:len(body)/2]} {
		if _, err := decodeAggregatedProtobuf(bad, "apidiscovery.k8s.io/v2"); err == nil {
			t.Errorf("accepted a %d-byte damaged body", len(bad))
		}
	}
}

// FuzzDecodeAggregatedProtobuf: no input makes the decoder panic, and what
// both decoders accept they decode alike.
func FuzzDecodeAggregatedProtobuf(f *testing.F) {
	body := fixtureProtobuf(f)
	f.Add(body)
	f.Add(body[:len(body)-7])
	f.Add(append([]byte(nil), body[:200]...))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decodeAggregatedProtobuf(in, "apidiscovery.k8s.io/v2")
		holdSplitToOnePart(t, in)
		want, ok := generatedDecode(in)
		if err == nil && ok && !reflect.DeepEqual(got, want) {
			t.Errorf("decoders disagree")
		}
		if where := aliasing(in, got); err == nil && where != "" {
			t.Errorf("a snapshot string points into the body: %s", where)
		}
	})
}

// holdSplitToOnePart: a list decoded in parts, on goroutines of their own
// (decodeList), gives what it gives in one part, groups and error alike,
// whatever the number of parts.
func holdSplitToOnePart(t *testing.T, in []byte) {
	t.Helper()
	want, wantErr := decodeAggregatedProtobufSplit(in, "apidiscovery.k8s.io/v2", 0, 1)
	for _, workers := range []int{2, 3, 7} {
		got, err := decodeAggregatedProtobufSplit(in, "apidiscovery.k8s.io/v2", 0, workers)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("in %d parts: error %v, in one: %v", workers, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("in %d parts: %d groups differ from one part's %d", workers, len(got), len(want))
		}
	}
}

// TestDecodeListPanicIsAnError: a bug the decoder meets in an item (here
// a body whose string view is cut short, as no real body is) is an error
// of decodeList, alone or on goroutines of its own, whose panic would end
// the process.
func TestDecodeListPanicIsAnError(t *testing.T) {
	item := []byte{0x12, 6, 0x0a, 4, 0x0a, 2, 'a', 'b'} // items { metadata { name: "ab" } }
	list := bytes.Repeat(item, 8)
	for _, workers := range []int{1, 2, 7} {
		r := protoReader{body: &protoBody{b: list}, end: len(list)}
		groups, err := decodeList(r, 0, workers)
		if err == nil || !strings.Contains(err.Error(), "item 0: internal error") {
			t.Errorf("%d workers: %d groups, error %v", workers, len(groups), err)
		}
	}
}

// aliasing names the first string reachable from vs whose bytes lie inside
// body, or "" when none does: the decoder copies what a snapshot keeps, so
// that the body (mostly framing) can be dropped.
func aliasing(body []byte, vs ...any) string {
	if len(body) == 0 {
		return ""
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	hi := lo + uintptr(len(body))
	var walk func(v reflect.Value, path string) string
	walk = func(v reflect.Value, path string) string {
		switch v.Kind() {
		case reflect.String:
			if v.Len() > 0 {
				p := uintptr(unsafe.Pointer(unsafe.StringData(v.String())))
				if p >= lo && p < hi {
					return fmt.Sprintf("%s = %q", path, v.String())
				}
			}
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				return walk(v.Elem(), path)
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				if w := walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); w != "" {
					return w
				}
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if w := walk(v.Field(i), path+"."+v.Type().Field(i).Name); w != "" {
					return w
				}
			}
		}
		return ""
	}
	for _, v := range vs {
		if w := walk(reflect.ValueOf(v), ""); w != "" {
			return w
		}
	}
	return ""
}

// TestProtobufDecoderMatchesGeneratedAtScale: the same on a document of
// 3000 custom resources, where most lists are shared between resources
// and every short name is a resource's own.
func TestProtobufDecoderMatchesGeneratedAtScale(t *testing.T) {
	srv, err := docserver.NewServer(docserver.WithCRDs(3000, 250))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	body := fetchBody(t, ts.URL+"/apis", Source{Format: FormatAggregatedV2, Protobuf: true}.MediaType(""))
	got := decodeAsGenerated(t, body, "3000 custom resources")
	holdSplitToOnePart(t, body)
	// The promise of protobuf.go: identical verb lists are one list.
	lists := map[*string]bool{}
	resources := 0
	for _, g := range got {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				resources++
				lists[unsafe.SliceData(r.Verbs)] = true
			}
		}
	}
	if resources < 3000 || len(lists) > 20 {
		t.Errorf("%d resources hold %d distinct verb lists, want them shared (at most 20)", resources, len(lists))
	}
}

// TestProtobufLists: a repeated field is read as protobuf defines it, even
// where a list's fields are not next to each other or a string holds what
// a joined key would use as a separator; lists that are equal are shared.
func TestProtobufLists(t *testing.T) {
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), []byte(s))
	}
	msg := func(num protowire.Number, fields ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), bytes.Join(fields, nil))
	}
	resource := func(name string, fields ...[]byte) []byte {
		kind := msg(2, str(3, "Kind"+name))
		return msg(2, append([]([]byte){str(1, name), kind, str(3, "Namespaced")}, fields...)...)
	}
	verbs := func(vs ...string) []byte {
		var b []byte
		for _, v := range vs {
			b = append(b, str(5, v)...)
		}
		return b
	}
	subresource := func(name string) []byte {
		return msg(8, str(1, name), msg(2, str(3, "Status")), str(4, "get"))
	}
	// More subresources than a block holds (512), after other resources'
	// and a dropped one's: the decoder moves them to a new block.
	var many [][]byte
	for i := range 600 {
		many = append(many, subresource(fmt.Sprintf("s%03d", i)))
	}
	version := msg(2, str(1, "v1"),
		msg(2, append([][]byte{str(3, "Namespaced")}, many[:3]...)...), // no name: dropped
		resource("contiguous", verbs("get", "list")),
		resource("apart", str(5, "get"), str(4, "apart"), str(5, "list")),
		resource("nul", verbs("get\x00list")),
		resource("reordered", verbs("list", "get")),
		resource("again", verbs("get", "list"), str(6, "ag"), str(4, "again"), str(6, "ain")),
		resource("subs", verbs("get", "list"), msg(8, str(1, "status"), msg(2, str(3, "Status")), str(4, "get"), str(4, "list"))),
		resource("many", many...),
		resource("none"),
	)
	list := msg(2, msg(1, str(1, "example.com")), version)
	envelope := bytes.Join([][]byte{msg(1, str(1, "apidiscovery.k8s.io/v2"), str(2, "APIGroupDiscoveryList")), str(2, string(list))}, nil)
	body := append(append([]byte(nil), protobufMagic...), envelope...)

	got, err := decodeAggregatedProtobuf(body, "apidiscovery.k8s.io/v2")
	if err != nil {
		t.Fatal(err)
	}
	want, ok := generatedDecode(body)
	if !ok {
		t.Fatal("the generated decoder rejects the document")
	}
	if len(got) != 1 || len(want) != 1 {
		t.Fatalf("decoders disagree: %d groups, want %d", len(got), len(want))
	}
	if g, w := got[0].Versions[0].Resources, want[0].Versions[0].Resources; !reflect.DeepEqual(g, w) {
		for i := range min(len(g), len(w)) {
			if !reflect.DeepEqual(g[i], w[i]) {
				t.Errorf("resource %s: verbs %q short names %q, want %q %q", w[i].Name, g[i].Verbs, g[i].ShortNames, w[i].Verbs, w[i].ShortNames)
			}
		}
		t.Fatalf("decoders disagree (%d resources, want %d)", len(g), len(w))
	}
	rs := got[0].Versions[0].Resources
	byName := map[string]Resource{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	if v := byName["nul"].Verbs; !slices.Equal(v, []string{"get\x00list"}) {
		t.Errorf("verbs of nul: %q", v)
	}
	if v := byName["apart"].Verbs; !slices.Equal(v, []string{"get", "list"}) {
		t.Errorf("verbs of apart: %q", v)
	}
	if s := byName["again"].ShortNames; !slices.Equal(s, []string{"ag", "ain"}) {
		t.Errorf("short names of again: %q", s)
	}
	for _, name := range []string{"apart", "again", "subs"} {
		if unsafe.SliceData(byName[name].Verbs) != unsafe.SliceData(byName["contiguous"].Verbs) {
			t.Errorf("%s's verbs are a copy of an equal list, not the list", name)
		}
	}
	if subs := byName["many"].Subresources; len(subs) != 600 || subs[599].Name != "s599" || len(byName["subs"].Subresources) != 1 {
		t.Errorf("%d subresources of many, want 600", len(subs))
	}
	if where := aliasing(body, got); where != "" {
		t.Errorf("a snapshot string points into the body: %s", where)
	}
}

// TestVerifyAggregated: a document is used only as the list its ETag
// names, in protobuf (decoded with the generated types) and in JSON; a
// same-length rewrite of a resource is refused (ErrNotTheETags); and what
// it returns to keep is the canonical encoding, whose SHA-512 is the ETag,
// so that a JSON body with a duplicate key (the hostile value first, which
// Go's decoder drops) is never kept as it came.
func TestVerifyAggregated(t *testing.T) {
	pb := fixtureProtobuf(t)
	var u runtime.Unknown
	if err := u.Unmarshal(pb[len(protobufMagic):]); err != nil {
		t.Fatal(err)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := list.Unmarshal(u.Raw); err != nil {
		t.Fatal(err)
	}
	canonical, err := json.Marshal(&list) // no apiVersion or kind: Unmarshal sets none
	if err != nil {
		t.Fatal(err)
	}
	etag := strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(canonical)))
	list.APIVersion, list.Kind = "apidiscovery.k8s.io/v2", "APIGroupDiscoveryList"
	js, err := json.Marshal(&list)
	if err != nil {
		t.Fatal(err)
	}
	dup := bytes.Replace(js, []byte(`"resource":"deployments"`), []byte(`"resource":"pwnedthings","resource":"deployments"`), 1)
	pbType, jsonType := Source{Format: FormatAggregatedV2, Protobuf: true}.MediaType(""), Source{Format: FormatAggregatedV2}.MediaType("")
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		ok                bool
	}{
		{"protobuf", pbType, pb, true},
		{"protobuf rewritten", pbType, bytes.Replace(pb, []byte("deployments"), []byte("pwnedthings"), 1), false},
		{"JSON", jsonType, js, true},
		{"JSON rewritten", jsonType, bytes.Replace(js, []byte(`"deployments"`), []byte(`"pwnedthings"`), 1), false},
		{"JSON with a duplicate key", jsonType, dup, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups, _, kept, err := VerifyAggregated(tc.body, tc.contentType, etag)
			if !tc.ok {
				if !errors.Is(err, ErrNotTheETags) {
					t.Errorf("err = %v, want ErrNotTheETags", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(kept, canonical) || bytes.Contains(kept, []byte("pwnedthings")) {
				t.Errorf("kept %d bytes, not the canonical encoding", len(kept))
			}
			want, _ := generatedDecode(pb)
			if !reflect.DeepEqual(groups, want) {
				t.Errorf("groups differ from the generated decoder's")
			}
		})
	}
}

// TestKindGivenTwiceIsMerged: protobuf merges the occurrences of a message
// field, so a resource (or subresource) whose kind comes twice, the second
// time empty or partial, keeps the first's fields as the generated decoder
// does; the hand-written one read the second alone and dropped the
// resource as kindless (found by mutating the fixture).
func TestKindGivenTwiceIsMerged(t *testing.T) {
	msg := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	str := func(num protowire.Number, s string) []byte { return field(num, []byte(s)) }
	kind := field(2, msg(str(3, "Widget")))
	partial := field(2, msg(str(2, "v1")))
	empty := field(2, nil)
	sub := field(8, msg(str(1, "status"), kind, empty, str(4, "get")))
	widgets := field(2, msg(str(1, "widgets"), kind, empty, str(3, "Namespaced"), str(5, "get"), sub))
	gadgets := field(2, msg(str(1, "gadgets"), kind, partial, str(5, "list")))
	version := field(2, msg(str(1, "v1"), widgets, gadgets))
	group := field(2, msg(field(1, msg(str(1, "example.com"))), version))
	list := msg(group)
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "apidiscovery.k8s.io/v2", Kind: "APIGroupDiscoveryList"}, Raw: list}
	raw, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got := decodeAsGenerated(t, append(append([]byte(nil), protobufMagic...), raw...), "a kind given twice")
	if len(got) != 1 || len(got[0].Versions) != 1 || len(got[0].Versions[0].Resources) != 2 {
		t.Fatalf("decoded %+v; want example.com/v1 with widgets and gadgets", got)
	}
	if rs := got[0].Versions[0].Resources; rs[0].Kind.Kind != "Widget" || len(rs[0].Subresources) != 1 || rs[1].Kind.Kind != "Widget" {
		t.Errorf("resources %+v; want both of kind Widget, widgets with its status", rs)
	}
}

// TestManyEmptyItemsStayCheap: a list of millions of empty items (two
// bytes each: hostile, as no server sends one) decodes to one group, as
// the one-part decoding gives, without a group and a place held for each
// item on the way: the split decoding gives such a list to the one-part
// decoding, which drops each repeat as it meets it.
func TestManyEmptyItemsStayCheap(t *testing.T) {
	list := bytes.Repeat([]byte{0x12, 0}, 2<<20) // items {} x 2M: 4 MiB
	r := protoReader{body: &protoBody{b: list, s: string(list)}, end: len(list)}
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	groups, err := decodeList(r, 0, 4)
	goruntime.ReadMemStats(&after)
	if err != nil || len(groups) != 1 || groups[0].Name != "" {
		t.Fatalf("decodeList: %d groups, %v; want the one empty group", len(groups), err)
	}
	// Split, it held 2M groups and places (over 100 MB); the bound is
	// what the places read before the list is given to the one-part
	// decoding take, with room.
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("decoding 4 MiB of empty items allocated %d MB", got>>20)
	}
}
