package cachestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

// ErrAlreadySettled: AmendToolMessage found the call no longer pending.
var ErrAlreadySettled = errors.New("cachestore: call already settled")

// KV is one record of a namespace (an alias, see CacheEntry).
type KV = struct {
	Key   string
	Value []byte
}

const prefixKV = keyVersion + "kv/"

func kvKey(ns, key string) []byte {
	return join([]byte(prefixKV), esc(ns), []byte("/"), esc(key))
}

func kvPrefix(ns, keyPrefix string) []byte {
	return join([]byte(prefixKV), esc(ns), []byte("/"), esc(keyPrefix))
}

// KVGet returns one record of a namespace (secrets, error memory…), or ErrNotFound.
func (b *Badger) KVGet(ctx context.Context, ns, key string) ([]byte, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	var out []byte
	err := b.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(kvKey(ns, key))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", ns, key, err)
	}
	return out, nil
}

// KVPut stores one record of a namespace.
func (b *Badger) KVPut(ctx context.Context, ns, key string, value []byte) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Set(kvKey(ns, key), value) }); err != nil {
		return fmt.Errorf("writing %s/%s: %w", ns, key, tooLarge(err))
	}
	return nil
}

// KVDelete deletes one record of a namespace; deleting a missing key is not an error.
func (b *Badger) KVDelete(ctx context.Context, ns, key string) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Delete(kvKey(ns, key)) }); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", ns, key, err)
	}
	return nil
}

// KVList returns the records of a namespace whose keys start with keyPrefix, in key order.
func (b *Badger) KVList(ctx context.Context, ns, keyPrefix string) ([]KV, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	base := kvPrefix(ns, "")
	var out []KV
	err := b.db.View(func(txn *badger.Txn) error {
		// Hex encoding of a key prefix is a prefix of the key's encoding
		// only for whole bytes, which it always is.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: kvPrefix(ns, keyPrefix), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k, err := unesc(bytes.TrimPrefix(it.Item().Key(), base))
			if err != nil {
				return err
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, KV{Key: k, Value: v})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", ns, err)
	}
	return out, nil
}

// AmendToolMessage replaces the tool message of a committed call that is
// still pending (status client_pending, or any status in pending) with m,
// and returns the amended turn record.
func (b *Badger) AmendToolMessage(ctx context.Context, session, callID string, pending []string, m *messages.ToolMessage) (*messages.TurnRecord, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	var out *messages.TurnRecord
	err := b.db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: turnPrefix(session), Reverse: false})
		defer it.Close()
		var found *messages.TurnRecord
		var key []byte
		for it.Rewind(); it.Valid(); it.Next() {
			rec, err := readTurn(txn, it.Item())
			if err != nil {
				return err
			}
			for _, tm := range rec.ToolMessages {
				if tm.ToolCallId == callID {
					found, key = rec, it.Item().KeyCopy(nil)
				}
			}
		}
		if found == nil {
			return ErrNotFound
		}
		idx := -1
		for i, tm := range found.ToolMessages {
			if tm.ToolCallId == callID && containsString(pending, tm.Status) {
				idx = i
				break
			}
		}
		if idx < 0 {
			return ErrAlreadySettled
		}
		found.ToolMessages[idx] = AmendedMessage(found.ToolMessages[idx], m)
		v, err := proto.Marshal(found)
		if err != nil {
			return err
		}
		out = found
		return setChunked(txn, key, v, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("amending call %q of session %q: %w", callID, session, tooLarge(err))
	}
	return out, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// KVGet implements Store.
func (m *Memory) KVGet(ctx context.Context, ns, key string) ([]byte, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	v, ok := m.kv[ns+"\x00"+key]
	if !ok {
		return nil, fmt.Errorf("reading %s/%s: %w", ns, key, ErrNotFound)
	}
	return bytes.Clone(v), nil
}

// KVPut implements Store.
func (m *Memory) KVPut(ctx context.Context, ns, key string, value []byte) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.kv == nil {
		m.kv = map[string][]byte{}
	}
	m.kv[ns+"\x00"+key] = bytes.Clone(value)
	return nil
}

// KVDelete implements Store.
func (m *Memory) KVDelete(ctx context.Context, ns, key string) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.kv, ns+"\x00"+key)
	return nil
}

// KVList implements Store.
func (m *Memory) KVList(ctx context.Context, ns, keyPrefix string) ([]KV, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []KV
	for k, v := range m.kv {
		n, key, _ := strings.Cut(k, "\x00")
		if n == ns && strings.HasPrefix(key, keyPrefix) {
			out = append(out, KV{Key: key, Value: bytes.Clone(v)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// AmendToolMessage implements Store.
func (m *Memory) AmendToolMessage(ctx context.Context, session, callID string, pending []string, msg *messages.ToolMessage) (*messages.TurnRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	s := m.sessions[session]
	if s == nil {
		return nil, ErrNotFound
	}
	for i := len(s.turns) - 1; i >= 0; i-- {
		rec := s.turns[i]
		for j, tm := range rec.ToolMessages {
			if tm.ToolCallId != callID {
				continue
			}
			if !containsString(pending, tm.Status) {
				return nil, ErrAlreadySettled
			}
			rec.ToolMessages[j] = AmendedMessage(tm, msg)
			return proto.Clone(rec).(*messages.TurnRecord), nil
		}
	}
	return nil, ErrNotFound
}
