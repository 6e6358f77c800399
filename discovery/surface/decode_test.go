package surface

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"testing"
	"unsafe"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime"
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

// TestProtobufDecoderMatchesGenerated: the hand-written decoder gives what
// the generated one gives, on the real server's document.
func TestProtobufDecoderMatchesGenerated(t *testing.T) {
	body := fixtureProtobuf(t)
	got, err := decodeAggregatedProtobuf(body, "apidiscovery.k8s.io/v2")
	if err != nil {
		t.Fatal(err)
	}
	want, ok := generatedDecode(body)
	if !ok {
		t.Fatal("the generated decoder rejects the fixture")
	}
	if len(got) != 20 || !reflect.DeepEqual(got, want) {
		t.Errorf("decoders disagree on the fixture (%d groups vs %d)", len(got), len(want))
	}
	if where := aliasing(body, got); where != "" {
		t.Errorf("a snapshot string points into the response body, which it would keep alive: %s", where)
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
		want, ok := generatedDecode(in)
		if err == nil && ok && !reflect.DeepEqual(got, want) {
			t.Errorf("decoders disagree")
		}
		if where := aliasing(in, got); err == nil && where != "" {
			t.Errorf("a snapshot string points into the body: %s", where)
		}
	})
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
