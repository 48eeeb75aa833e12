package badger

import (
	"errors"
	"fmt"
	"strings"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/internal/wire"
)

// Values bigger than one Badger value.
//
// Badger refuses a value larger than its value-log file (16 MiB with the
// Small options): a turn of 20 calls with 900 KB of arguments each is more.
// A turn record or intent record above valuePartSize is therefore stored as
// parts: v1/p/{key}/{n} hold the bytes, and the record's own key holds a
// small header (user meta metaChunked; fields 1 parts, 2 length). Header and
// parts are written in the same transaction — parts go to the value log, so
// they cost the transaction only their keys — and a reader finds the parts
// only through the header, so a record is never seen half written.
// Overwriting or deleting a chunked record deletes the parts it no longer
// needs in the same transaction.

// prefixPart is the prefix of the parts of chunked values.
const prefixPart = keyVersion + "p/"

// valuePartSize is the largest value stored under its own key, and the size
// of each part of a larger one. Below the Small value-log file (16 MiB).
const valuePartSize = 4 << 20

// metaChunked is the Badger user meta of a header of a chunked value.
const metaChunked byte = 1

// partKey is v1/p/{key}/{n}.
func partKey(key []byte, n int) []byte {
	return appendNum(join([]byte(prefixPart), esc(string(key)), []byte("/")), int64(n))
}

// chunks splits v into parts of valuePartSize (the last one shorter).
func chunks(v []byte) [][]byte {
	var out [][]byte
	for len(v) > valuePartSize {
		out = append(out, v[:valuePartSize])
		v = v[valuePartSize:]
	}
	return append(out, v)
}

// Header of a chunked value: 1 parts, 2 length.
func encodeChunkHeader(parts, length int) []byte {
	b := wire.AppendVarint(nil, 1, uint64(parts))
	return wire.AppendVarint(b, 2, uint64(length))
}

func decodeChunkHeader(b []byte) (parts, length int, err error) {
	err = wire.Decode(b, func(f wire.Field) error {
		switch f.Num {
		case 1:
			parts = wire.Int(f.Varint)
		case 2:
			length = wire.Int(f.Varint)
		}
		return nil
	})
	if err == nil && (parts < 1 || length < 0) {
		err = fmt.Errorf("%w: chunk header: %d parts, %d bytes", cachestore.ErrCorrupt, parts, length)
	}
	return parts, length, err
}

// storedParts returns how many parts the value now under key has (0 when
// it is absent or stored whole), as txn sees it.
func storedParts(txn *badgerdb.Txn, key []byte) (int, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if item.UserMeta()&metaChunked == 0 {
		return 0, nil
	}
	var parts int
	err = item.Value(func(v []byte) error {
		var err error
		parts, _, err = decodeChunkHeader(v)
		return err
	})
	return parts, err
}

// setChunked writes value under key, in parts when it is larger than
// valuePartSize, and deletes the parts of the previous value that the new
// one does not overwrite.
func setChunked(txn *badgerdb.Txn, key, value []byte, expiresAt uint64) error {
	old, err := storedParts(txn, key)
	if err != nil {
		return err
	}
	parts := 0
	if len(value) <= valuePartSize {
		e := badgerdb.NewEntry(key, value)
		e.ExpiresAt = expiresAt
		if err := txn.SetEntry(e); err != nil {
			return err
		}
	} else {
		cs := chunks(value)
		parts = len(cs)
		for i, c := range cs {
			if err := txn.Set(partKey(key, i), c); err != nil {
				return err
			}
		}
		e := badgerdb.NewEntry(key, encodeChunkHeader(parts, len(value))).WithMeta(metaChunked)
		e.ExpiresAt = expiresAt
		if err := txn.SetEntry(e); err != nil {
			return err
		}
	}
	for i := parts; i < old; i++ {
		if err := txn.Delete(partKey(key, i)); err != nil {
			return err
		}
	}
	return nil
}

// deleteChunked deletes key and the parts of its value.
func deleteChunked(txn *badgerdb.Txn, key []byte) error {
	old, err := storedParts(txn, key)
	if err != nil {
		return err
	}
	for i := range old {
		if err := txn.Delete(partKey(key, i)); err != nil {
			return err
		}
	}
	return txn.Delete(key)
}

// readValue returns a copy of item's value, joining its parts when it is
// chunked.
func readValue(txn *badgerdb.Txn, item *badgerdb.Item) ([]byte, error) {
	if item.UserMeta()&metaChunked == 0 {
		return item.ValueCopy(nil)
	}
	var parts, length int
	err := item.Value(func(v []byte) error {
		var err error
		parts, length, err = decodeChunkHeader(v)
		return err
	})
	if err != nil {
		return nil, err
	}
	key := item.KeyCopy(nil)
	out := make([]byte, 0, length)
	for i := range parts {
		p, err := txn.Get(partKey(key, i))
		if errors.Is(err, badgerdb.ErrKeyNotFound) {
			return nil, fmt.Errorf("%w: part %d of %d missing", cachestore.ErrCorrupt, i, parts)
		}
		if err != nil {
			return nil, err
		}
		if err := p.Value(func(v []byte) error { out = append(out, v...); return nil }); err != nil {
			return nil, err
		}
	}
	if len(out) != length {
		return nil, fmt.Errorf("%w: %d bytes in parts, header says %d", cachestore.ErrCorrupt, len(out), length)
	}
	return out, nil
}

// tooLarge turns Badger's size errors into ErrTooLarge. Badger's own
// message for a value or key beyond its limit ends in a hex dump of the
// first KiB of it (argument bytes, for a turn): only the sizes are kept.
func tooLarge(err error) error {
	if err == nil || errors.Is(err, cachestore.ErrTooLarge) {
		return err
	}
	if errors.Is(err, badgerdb.ErrTxnTooBig) {
		return fmt.Errorf("%w: more writes than one transaction holds", cachestore.ErrTooLarge)
	}
	msg := err.Error()
	if i := strings.Index(msg, " exceeded "); i >= 0 && strings.Contains(msg, " with size ") {
		first, _, _ := strings.Cut(msg, "\n")
		first, _, _ = strings.Cut(first, ". ")
		if len(first) > 120 {
			first = first[:120]
		}
		return fmt.Errorf("%w: %s", cachestore.ErrTooLarge, first)
	}
	return err
}
