// Package wire writes and reads the stores' records that have no protobuf
// message of their own, in the protobuf wire format field by field
// (protowire): a reader skips the fields it does not know and reads a
// missing one as its zero value, so a record can gain fields without a new
// layout. The records themselves (intents, de-duplication entries in
// package cachestore; meta, cache entries and file versions in
// cachestore/badger) list their field numbers; a number is never reused.
package wire

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrCorrupt marks a stored value that does not decode (cachestore.ErrCorrupt).
var ErrCorrupt = errors.New("cachestore: corrupt record")

// AppendString appends field num holding s.
func AppendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// SizeString is the size AppendString gives field num holding s.
func SizeString(num protowire.Number, s string) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// SizeVarint is the size AppendVarint gives field num holding v.
func SizeVarint(num protowire.Number, v uint64) int {
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

// AppendBytes appends field num holding v.
func AppendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// AppendVarint appends field num holding v.
func AppendVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// Field is one decoded field: Bytes for a bytes field, Varint for a
// varint field. Bytes points into the decoded record.
type Field struct {
	Num    protowire.Number
	Type   protowire.Type
	Bytes  []byte
	Varint uint64
}

// Decode calls fn for each varint and bytes field of b in order, skipping
// fixed-width and group fields; a record that does not parse is ErrCorrupt.
func Decode(b []byte, fn func(f Field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", ErrCorrupt, protowire.ParseError(n))
		}
		b = b[n:]
		f := Field{Num: num, Type: typ}
		switch typ {
		case protowire.VarintType:
			f.Varint, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.Bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %w", ErrCorrupt, num, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.VarintType && typ != protowire.BytesType {
			continue
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// Int reads a varint that holds an index or a length, capped at
// math.MaxInt32 so that a corrupt record cannot make a caller allocate
// without bound or go negative.
func Int(x uint64) int {
	if x > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(x)
}
