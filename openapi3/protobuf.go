package openapi3

import (
	"errors"
	"fmt"
	"unicode/utf8"

	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A protobuf document is bounded as a JSON one (DocumentLimits), before it
// is decoded: decoding is where it costs, each message a Go struct of its
// own (a Schema alone is 456 B) for a few bytes on the wire: 20 MB of
// empty allOf entries decodes into some 2.3 GB (4.5 GB of peak RSS).
// protobuf carries no names, but gnostic-models' descriptors say which
// fields hold messages: one pass over the wire format, allocating nothing,
// counts what DocumentLimits counts in the JSON form and checks what
// proto.Unmarshal would refuse (a malformed field, a string that is not
// UTF-8), so that what passes decodes, and what does not is refused for
// its bytes.
//
// The forms differ in shape: gnostic wraps each schema in a message of
// its name and one of its reference-or-schema (NamedSchemaOrReference,
// SchemaOrReference). The fake server's api/v1 is 1,652 JSON objects and
// 4,107 messages, 9 and 15 deep; its 3,000-CRD group-version 294,056
// objects and 735,138 messages, 9 and 15 deep.
// Messages and their nesting are therefore bounded at twice Objects and
// Depth (protobufScale), which the defaults' headroom covers; an Objects
// set close to a document's JSON count may refuse its protobuf form.
// Schemas and Properties are the same entries in both forms.
const protobufScale = 2

// The messages whose entries DocumentLimits counts.
const (
	schemasOrReferences protoreflect.FullName = "openapi.v3.SchemasOrReferences" // components/schemas
	properties          protoreflect.FullName = "openapi.v3.Properties"          // a schema's properties
)

// checkGnostic checks body, a protobuf OpenAPI v3 document, against lim
// without decoding it: a *LimitError over a bound, an error wrapping
// errNotProtobuf for what proto.Unmarshal would refuse.
func checkGnostic(body []byte, lim *DocumentLimits) (DocumentStats, error) {
	w := &protobufWalk{lim: lim}
	err := w.message(body, (*openapi_v3.Document)(nil).ProtoReflect().Descriptor(), 1, 0)
	return w.stats, err
}

// protobufWalk counts a protobuf document as DocumentLimits does.
type protobufWalk struct {
	lim   *DocumentLimits
	stats DocumentStats
}

// message walks b, a message of type md at byte base of the document.
func (w *protobufWalk) message(b []byte, md protoreflect.MessageDescriptor, depth, base int) error {
	if w.stats.Objects++; w.stats.Objects > protobufScale*w.lim.Objects {
		return &LimitError{Limit: "objects", Max: int64(protobufScale * w.lim.Objects), Offset: base}
	}
	if w.stats.Depth = max(w.stats.Depth, depth); depth > protobufScale*w.lim.Depth {
		return &LimitError{Limit: "depth", Max: int64(protobufScale * w.lim.Depth), Offset: base}
	}
	counts := md.FullName()
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return malformed(base+i, protowire.ParseError(n))
		}
		if !num.IsValid() { // ConsumeTag takes up to MaxInt32
			return malformed(base+i, fmt.Errorf("field number %d", num))
		}
		i += n
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType || (fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.StringKind) {
			// A scalar, or a field gnostic does not know (which
			// proto.Unmarshal keeps as bytes, as long as they are).
			if n = protowire.ConsumeFieldValue(num, typ, b[i:]); n < 0 {
				return malformed(base+i, protowire.ParseError(n))
			}
			i += n
			continue
		}
		v, n := protowire.ConsumeBytes(b[i:])
		if n < 0 {
			return malformed(base+i, protowire.ParseError(n))
		}
		at := base + i + n - len(v) // where v starts
		i += n
		if fd.Kind() == protoreflect.StringKind {
			if !utf8.Valid(v) {
				return malformed(at, fmt.Errorf("%s is not UTF-8", fd.FullName()))
			}
			continue
		}
		switch counts {
		case schemasOrReferences:
			if w.stats.Schemas++; w.stats.Schemas > w.lim.Schemas {
				return &LimitError{Limit: "schemas", Max: int64(w.lim.Schemas), Offset: at}
			}
		case properties:
			if w.stats.Properties++; w.stats.Properties > w.lim.Properties {
				return &LimitError{Limit: "properties", Max: int64(w.lim.Properties), Offset: at}
			}
		}
		if err := w.message(v, fd.Message(), depth+1, at); err != nil {
			return err
		}
	}
	return nil
}

// malformed is the error of bytes proto.Unmarshal would refuse at byte at.
func malformed(at int, err error) error {
	return fmt.Errorf("%w: at byte %d: %w", errNotProtobuf, at, err)
}

// decodeGnostic decodes a protobuf document within the client's
// DocumentLimits (checkGnostic first).
func (c *Client) decodeGnostic(body []byte) (*openapi_v3.Document, error) {
	if _, err := checkGnostic(body, &c.opts.limits); err != nil {
		return nil, err
	}
	return c.unmarshalGnostic(body)
}

// unmarshalGnostic decodes a protobuf document checkGnostic passed.
func (c *Client) unmarshalGnostic(body []byte) (*openapi_v3.Document, error) {
	c.work.decodes.Add(1)
	doc := &openapi_v3.Document{}
	if err := proto.Unmarshal(body, doc); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotProtobuf, err)
	}
	return doc, nil
}

// gnosticError is the error of path's protobuf document that err refused.
func gnosticError(path string, err error) error {
	if errors.As(err, new(*LimitError)) {
		return fmt.Errorf("openapi3: %s (protobuf): %w", path, err)
	}
	return fmt.Errorf("openapi3: %s %w", path, err)
}
