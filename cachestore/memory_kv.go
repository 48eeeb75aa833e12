package cachestore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

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
	return m.amendLocked(session, callID, pending, msg)
}

// amendLocked amends the call's message when its status is one of pending.
func (m *Memory) amendLocked(session, callID string, pending []string, msg *messages.ToolMessage) (*messages.TurnRecord, error) {
	s := m.sessions[session]
	if s == nil {
		return nil, ErrNotFound
	}
	settled := false
	for i := len(s.turns) - 1; i >= 0; i-- {
		rec := s.turns[i]
		for j, tm := range rec.ToolMessages {
			if tm.ToolCallId != callID {
				continue
			}
			if !slices.Contains(pending, tm.Status) {
				settled = true
				continue
			}
			rec.ToolMessages[j] = AmendedMessage(tm, msg)
			return proto.Clone(rec).(*messages.TurnRecord), nil
		}
	}
	if settled {
		return nil, ErrAlreadySettled
	}
	return nil, ErrNotFound
}

// KVCreate implements KVCreator.
func (m *Memory) KVCreate(ctx context.Context, ns, key string, value []byte) ([]byte, bool, error) {
	if err := m.lock(ctx); err != nil {
		return nil, false, err
	}
	defer m.mu.Unlock()
	if v, ok := m.kv[ns+"\x00"+key]; ok {
		return bytes.Clone(v), false, nil
	}
	if m.kv == nil {
		m.kv = map[string][]byte{}
	}
	m.kv[ns+"\x00"+key] = bytes.Clone(value)
	return bytes.Clone(value), true, nil
}
