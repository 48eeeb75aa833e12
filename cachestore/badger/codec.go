package badger

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/internal/wire"
)

// Records only Badger writes, in the protobuf wire format like the
// intent and de-duplication records of package cachestore (see
// cachestore/internal/wire). Field numbers are listed by each encoder and
// in doc.go; never reuse one.

// Number record: meta (1 next_turn) and turn-id index (1 turn).

func encodeNumber(n int64) []byte {
	return wire.AppendVarint(nil, 1, uint64(n))
}

func decodeNumber(b []byte) (int64, error) {
	var n int64
	err := wire.Decode(b, func(f wire.Field) error {
		if f.Num == 1 && f.Type == protowire.VarintType {
			n = int64(f.Varint)
		}
		return nil
	})
	return n, err
}

// Cache record: 1 expires (unix nanoseconds; absent means no expiry), 2 value.
func encodeCache(e cachestore.CacheEntry) []byte {
	b := make([]byte, 0, len(e.Value)+24)
	if !e.Expires.IsZero() {
		b = wire.AppendVarint(b, 1, uint64(e.Expires.UnixNano()))
	}
	return wire.AppendBytes(b, 2, e.Value)
}

// decodeCache returns the value, its expiry in unix nanoseconds and whether
// it has one.
func decodeCache(b []byte) (value []byte, expires int64, hasExpiry bool, err error) {
	err = wire.Decode(b, func(f wire.Field) error {
		switch f.Num {
		case 1:
			expires, hasExpiry = int64(f.Varint), true
		case 2:
			value = f.Bytes
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
func encodeFileVersion(v cachestore.FileVersion) []byte {
	var b []byte
	b = wire.AppendVarint(b, 1, uint64(v.Version))
	b = wire.AppendVarint(b, 2, uint64(v.Time.UnixNano()))
	b = wire.AppendVarint(b, 3, uint64(v.Size))
	if v.Deleted {
		b = wire.AppendVarint(b, 4, 1)
	}
	return wire.AppendString(b, 5, v.Note)
}

func decodeFileVersion(b []byte) (cachestore.FileVersion, error) {
	var v cachestore.FileVersion
	err := wire.Decode(b, func(f wire.Field) error {
		switch f.Num {
		case 1:
			v.Version = int64(f.Varint)
		case 2:
			v.Time = time.Unix(0, int64(f.Varint))
		case 3:
			v.Size = int64(f.Varint)
		case 4:
			v.Deleted = f.Varint != 0
		case 5:
			v.Note = string(f.Bytes)
		}
		return nil
	})
	if err != nil {
		return cachestore.FileVersion{}, fmt.Errorf("decoding file version: %w", err)
	}
	return v, nil
}
