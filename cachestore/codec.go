package cachestore

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Records without a protobuf message of their own are encoded in the
// protobuf wire format by hand (protowire): tagged fields, so a reader skips
// fields it does not know and a missing field reads as its zero value. Field
// numbers are listed by each encoder and in doc.go; never reuse one.

// errCorrupt marks a stored value that does not decode.
var errCorrupt = errors.New("cachestore: corrupt record")

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// sizeStringField is the size appendStringField gives field num holding s.
func sizeStringField(num protowire.Number, s string) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// field is one decoded field: v for bytes fields, x for varint fields.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	x   uint64
}

// decodeFields calls fn for each field of b in order, skipping fixed-width
// and group fields.
func decodeFields(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errCorrupt, protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %w", errCorrupt, num, protowire.ParseError(n))
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

// Number record: meta (1 next_turn) and turn-id index (1 turn).

func encodeNumber(n int64) []byte {
	return appendVarintField(nil, 1, uint64(n))
}

func decodeNumber(b []byte) (int64, error) {
	var n int64
	err := decodeFields(b, func(f field) error {
		if f.num == 1 && f.typ == protowire.VarintType {
			n = int64(f.x)
		}
		return nil
	})
	return n, err
}

// Intent record:
//
//	1 session, 2 turn, 3 run, 4 turn_id, 5 provider,
//	6 assistant (messages.AssistantMessage),
//	7 decided (repeated {1 index, 2 messages.ToolMessage}),
//	8 started (repeated index), 9 names (repeated), 10 ids (repeated),
//	11 calls_hash.
//
// EncodeIntent and DecodeIntent, like EncodeDedup and DecodeDedup, are the
// record formats every store of this module writes (Badger keys, PostgreSQL
// columns); a Store implemented elsewhere may use them too.
func EncodeIntent(in *Intent) ([]byte, error) {
	var b []byte
	b = appendStringField(b, 1, in.Session)
	b = appendVarintField(b, 2, uint64(in.Turn))
	b = appendStringField(b, 3, in.Run)
	b = appendStringField(b, 4, in.TurnID)
	b = appendStringField(b, 5, in.Provider)
	if in.Assistant != nil {
		ab, _, err := MarshalValid(in.Assistant)
		if err != nil {
			return nil, fmt.Errorf("encoding assistant message: %w", err)
		}
		b = appendBytesField(b, 6, ab)
	}
	for _, i := range sortedIndexes(in.Decided) {
		m := in.Decided[i]
		mb, _, err := MarshalValid(m)
		if err != nil {
			return nil, fmt.Errorf("encoding decided message %d: %w", i, err)
		}
		var d []byte
		d = appendVarintField(d, 1, uint64(i))
		d = appendBytesField(d, 2, mb)
		b = appendBytesField(b, 7, d)
	}
	for _, i := range in.Started {
		b = appendVarintField(b, 8, uint64(i))
	}
	for _, s := range in.Names {
		b = appendStringField(b, 9, s)
	}
	for _, s := range in.IDs {
		b = appendStringField(b, 10, s)
	}
	if in.CallsHash != "" {
		b = appendStringField(b, 11, in.CallsHash)
	}
	return b, nil
}

// DecodeIntent reads a record written by EncodeIntent; unknown fields are
// skipped.
func DecodeIntent(b []byte) (*Intent, error) {
	in := &Intent{}
	err := decodeFields(b, func(f field) error {
		switch f.num {
		case 1:
			in.Session = string(f.v)
		case 2:
			in.Turn = int64(f.x)
		case 3:
			in.Run = string(f.v)
		case 4:
			in.TurnID = string(f.v)
		case 5:
			in.Provider = string(f.v)
		case 6:
			in.Assistant = &messages.AssistantMessage{}
			if err := proto.Unmarshal(f.v, in.Assistant); err != nil {
				return fmt.Errorf("%w: assistant message: %w", errCorrupt, err)
			}
		case 7:
			idx, m, err := decodeDecided(f.v)
			if err != nil {
				return err
			}
			if in.Decided == nil {
				in.Decided = make(map[int]*messages.ToolMessage)
			}
			in.Decided[idx] = m
		case 8:
			in.Started = append(in.Started, clampIndex(f.x))
		case 9:
			in.Names = append(in.Names, string(f.v))
		case 10:
			in.IDs = append(in.IDs, string(f.v))
		case 11:
			in.CallsHash = string(f.v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding intent: %w", err)
	}
	return in, nil
}

func decodeDecided(b []byte) (int, *messages.ToolMessage, error) {
	var idx int
	m := &messages.ToolMessage{}
	err := decodeFields(b, func(f field) error {
		switch f.num {
		case 1:
			idx = clampIndex(f.x)
		case 2:
			if err := proto.Unmarshal(f.v, m); err != nil {
				return fmt.Errorf("%w: decided message: %w", errCorrupt, err)
			}
		}
		return nil
	})
	return idx, m, err
}

func clampIndex(x uint64) int {
	if x > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(x)
}

// Dedup record: 1 key, 2 tool, 3 content, 4 paths (repeated), 5 stale_on_mutation,
// 6 stamp (absent in entries written before stamps: those match only a tool
// without a Stamp, so a stamped tool runs again once). EncodeDedup writes it.
func EncodeDedup(e *DedupEntry) []byte {
	n := sizeStringField(1, e.Key) + sizeStringField(2, e.Tool) + sizeStringField(3, e.Content)
	for _, p := range e.Paths {
		n += sizeStringField(4, p)
	}
	if e.StaleOnMutation {
		n += protowire.SizeTag(5) + protowire.SizeVarint(1)
	}
	if e.Stamp != "" {
		n += sizeStringField(6, e.Stamp)
	}
	b := make([]byte, 0, n)
	b = appendStringField(b, 1, e.Key)
	b = appendStringField(b, 2, e.Tool)
	b = appendStringField(b, 3, e.Content)
	for _, p := range e.Paths {
		b = appendStringField(b, 4, p)
	}
	if e.StaleOnMutation {
		b = appendVarintField(b, 5, 1)
	}
	if e.Stamp != "" {
		b = appendStringField(b, 6, e.Stamp)
	}
	return b
}

// DecodeDedup reads a record written by EncodeDedup.
func DecodeDedup(b []byte) (*DedupEntry, error) {
	e := &DedupEntry{}
	err := decodeFields(b, func(f field) error {
		switch f.num {
		case 1:
			e.Key = string(f.v)
		case 2:
			e.Tool = string(f.v)
		case 3:
			e.Content = string(f.v)
		case 4:
			e.Paths = append(e.Paths, string(f.v))
		case 5:
			e.StaleOnMutation = f.x != 0
		case 6:
			e.Stamp = string(f.v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding dedup entry: %w", err)
	}
	return e, nil
}

// Cache record: 1 expires (unix nanoseconds; absent means no expiry), 2 value.
func encodeCache(e CacheEntry) []byte {
	b := make([]byte, 0, len(e.Value)+24)
	if !e.Expires.IsZero() {
		b = appendVarintField(b, 1, uint64(e.Expires.UnixNano()))
	}
	return appendBytesField(b, 2, e.Value)
}

// decodeCache returns the value, its expiry in unix nanoseconds and whether
// it has one.
func decodeCache(b []byte) (value []byte, expires int64, hasExpiry bool, err error) {
	err = decodeFields(b, func(f field) error {
		switch f.num {
		case 1:
			expires, hasExpiry = int64(f.x), true
		case 2:
			value = f.v
		}
		return nil
	})
	if err != nil {
		return nil, 0, false, fmt.Errorf("decoding cache entry: %w", err)
	}
	return value, expires, hasExpiry, nil
}

// cacheLive reports whether an entry with this expiry is readable at now:
// the expiry is exclusive, so an entry expiring at T is gone at T.
func cacheLive(expires int64, hasExpiry bool, now time.Time) bool {
	return !hasExpiry || now.UnixNano() < expires
}

// File version record: 1 version, 2 time (unix nanoseconds), 3 size, 4 deleted, 5 note.
func encodeFileVersion(v FileVersion) []byte {
	var b []byte
	b = appendVarintField(b, 1, uint64(v.Version))
	b = appendVarintField(b, 2, uint64(v.Time.UnixNano()))
	b = appendVarintField(b, 3, uint64(v.Size))
	if v.Deleted {
		b = appendVarintField(b, 4, 1)
	}
	return appendStringField(b, 5, v.Note)
}

func decodeFileVersion(b []byte) (FileVersion, error) {
	var v FileVersion
	err := decodeFields(b, func(f field) error {
		switch f.num {
		case 1:
			v.Version = int64(f.x)
		case 2:
			v.Time = time.Unix(0, int64(f.x))
		case 3:
			v.Size = int64(f.x)
		case 4:
			v.Deleted = f.x != 0
		case 5:
			v.Note = string(f.v)
		}
		return nil
	})
	if err != nil {
		return FileVersion{}, fmt.Errorf("decoding file version: %w", err)
	}
	return v, nil
}
