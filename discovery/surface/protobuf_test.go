package surface

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// FuzzWireMatchesProtowire: the hand-written wire reading (see protobuf.go)
// takes a field, or refuses it, exactly where protowire, the library it
// stands in for, does.
func FuzzWireMatchesProtowire(f *testing.F) {
	f.Add(fixtureProtobuf(f))
	f.Add([]byte{0x0b, 0x08, 0x01, 0x0c})                                                 // a group holding a varint
	f.Add([]byte{0x0b, 0x14})                                                             // a group closed by another field's end
	f.Add([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02})       // a varint that overflows
	f.Add([]byte{0x0d, 0x01, 0x02, 0x03})                                                 // a truncated fixed32
	f.Add([]byte{0x12, 0x05, 'a', 'b'})                                                   // truncated bytes
	f.Add([]byte{0xf8, 0xff, 0xff, 0xff, 0x0f, 0x00})                                     // the largest field number
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00, 0x00}) // a field number too large
	f.Fuzz(func(t *testing.T, b []byte) {
		wantNum, wantTyp, want := protowire.ConsumeField(b)
		num, typ, n, err := consumeTag(b)
		got := -1
		if err == nil {
			var m int
			if m, err = skipValue(num, typ, b[n:], maxGroupDepth); err == nil {
				got = n + m
			}
		}
		if (want < 0) != (got < 0) || want >= 0 && (got != want || num != int32(wantNum) || typ != wireType(wantTyp)) {
			t.Errorf("% x: field %d type %d, length %d (err %v); protowire: field %d type %d, length %d",
				b, num, typ, got, err, wantNum, wantTyp, want)
		}
	})
}
