package cachestore

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore/internal/wire"
	"github.com/tooldispatch/tooldispatch/messages"
)

// The records every store of this module writes (Badger keys, PostgreSQL
// columns) without a protobuf message of their own, in the protobuf wire
// format written field by field (see cachestore/internal/wire): a reader
// skips fields it does not know and reads a missing one as its zero value.
// Field numbers are listed by each encoder; never reuse one.

// Intent record:
//
//	1 session, 2 turn, 3 run, 4 turn_id, 5 provider,
//	6 assistant (messages.AssistantMessage),
//	7 decided (repeated {1 index, 2 messages.ToolMessage}),
//	8 started (repeated index), 9 names (repeated), 10 ids (repeated),
//	11 calls_hash,
//	12 tasks (repeated {1 index, 2 task id, 3 learned at, Unix nanoseconds}).
//
// EncodeIntent and DecodeIntent, like EncodeDedup and DecodeDedup, are the
// record formats every store of this module writes (Badger keys, PostgreSQL
// columns); a Store implemented elsewhere may use them too.
func EncodeIntent(in *Intent) ([]byte, error) {
	var b []byte
	b = wire.AppendString(b, 1, in.Session)
	b = wire.AppendVarint(b, 2, uint64(in.Turn))
	b = wire.AppendString(b, 3, in.Run)
	b = wire.AppendString(b, 4, in.TurnID)
	b = wire.AppendString(b, 5, in.Provider)
	if in.Assistant != nil {
		ab, _, err := MarshalValid(in.Assistant)
		if err != nil {
			return nil, fmt.Errorf("encoding assistant message: %w", err)
		}
		b = wire.AppendBytes(b, 6, ab)
	}
	for _, i := range sortedIndexes(in.Decided) {
		m := in.Decided[i]
		mb, _, err := MarshalValid(m)
		if err != nil {
			return nil, fmt.Errorf("encoding decided message %d: %w", i, err)
		}
		var d []byte
		d = wire.AppendVarint(d, 1, uint64(i))
		d = wire.AppendBytes(d, 2, mb)
		b = wire.AppendBytes(b, 7, d)
	}
	for _, i := range in.Started {
		b = wire.AppendVarint(b, 8, uint64(i))
	}
	for _, s := range in.Names {
		b = wire.AppendString(b, 9, s)
	}
	for _, s := range in.IDs {
		b = wire.AppendString(b, 10, s)
	}
	if in.CallsHash != "" {
		b = wire.AppendString(b, 11, in.CallsHash)
	}
	for _, t := range in.Tasks {
		var d []byte
		d = wire.AppendVarint(d, 1, uint64(t.Index))
		d = wire.AppendString(d, 2, t.ID)
		if !t.At.IsZero() {
			d = wire.AppendVarint(d, 3, uint64(t.At.UnixNano()))
		}
		b = wire.AppendBytes(b, 12, d)
	}
	return b, nil
}

// DecodeIntent reads a record written by EncodeIntent; unknown fields are
// skipped.
func DecodeIntent(b []byte) (*Intent, error) {
	in := &Intent{}
	err := wire.Decode(b, func(f wire.Field) error {
		switch f.Num {
		case 1:
			in.Session = string(f.Bytes)
		case 2:
			in.Turn = int64(f.Varint)
		case 3:
			in.Run = string(f.Bytes)
		case 4:
			in.TurnID = string(f.Bytes)
		case 5:
			in.Provider = string(f.Bytes)
		case 6:
			in.Assistant = &messages.AssistantMessage{}
			if err := proto.Unmarshal(f.Bytes, in.Assistant); err != nil {
				return fmt.Errorf("%w: assistant message: %w", ErrCorrupt, err)
			}
		case 7:
			idx, m, err := decodeDecided(f.Bytes)
			if err != nil {
				return err
			}
			if in.Decided == nil {
				in.Decided = make(map[int]*messages.ToolMessage)
			}
			in.Decided[idx] = m
		case 8:
			in.Started = append(in.Started, wire.Int(f.Varint))
		case 9:
			in.Names = append(in.Names, string(f.Bytes))
		case 10:
			in.IDs = append(in.IDs, string(f.Bytes))
		case 11:
			in.CallsHash = string(f.Bytes)
		case 12:
			t, err := decodeTask(f.Bytes)
			if err != nil {
				return err
			}
			in.Tasks = append(in.Tasks, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding intent: %w", err)
	}
	return in, nil
}

func decodeTask(b []byte) (TaskRef, error) {
	var t TaskRef
	err := wire.Decode(b, func(f wire.Field) error {
		switch f.Num {
		case 1:
			t.Index = wire.Int(f.Varint)
		case 2:
			t.ID = string(f.Bytes)
		case 3:
			t.At = time.Unix(0, int64(f.Varint))
		}
		return nil
	})
	return t, err
}

func decodeDecided(b []byte) (int, *messages.ToolMessage, error) {
	var idx int
	m := &messages.ToolMessage{}
	err := wire.Decode(b, func(f wire.Field) error {
		switch f.Num {
		case 1:
			idx = wire.Int(f.Varint)
		case 2:
			if err := proto.Unmarshal(f.Bytes, m); err != nil {
				return fmt.Errorf("%w: decided message: %w", ErrCorrupt, err)
			}
		}
		return nil
	})
	return idx, m, err
}

// Dedup record: 1 key, 2 tool, 3 content, 4 paths (repeated), 5 stale_on_mutation,
// 6 stamp (absent in entries written before stamps: those match only a tool
// without a Stamp, so a stamped tool runs again once), 7 scope (absent:
// none). EncodeDedup writes it.
func EncodeDedup(e *DedupEntry) []byte {
	n := wire.SizeString(1, e.Key) + wire.SizeString(2, e.Tool) + wire.SizeString(3, e.Content)
	for _, p := range e.Paths {
		n += wire.SizeString(4, p)
	}
	if e.StaleOnMutation {
		n += wire.SizeVarint(5, 1)
	}
	if e.Stamp != "" {
		n += wire.SizeString(6, e.Stamp)
	}
	b := make([]byte, 0, n)
	b = wire.AppendString(b, 1, e.Key)
	b = wire.AppendString(b, 2, e.Tool)
	b = wire.AppendString(b, 3, e.Content)
	for _, p := range e.Paths {
		b = wire.AppendString(b, 4, p)
	}
	if e.StaleOnMutation {
		b = wire.AppendVarint(b, 5, 1)
	}
	if e.Stamp != "" {
		b = wire.AppendString(b, 6, e.Stamp)
	}
	if e.Scope != "" {
		b = wire.AppendString(b, 7, e.Scope)
	}
	return b
}

// DecodeDedup reads a record written by EncodeDedup.
func DecodeDedup(b []byte) (*DedupEntry, error) {
	e := &DedupEntry{}
	err := wire.Decode(b, func(f wire.Field) error {
		switch f.Num {
		case 1:
			e.Key = string(f.Bytes)
		case 2:
			e.Tool = string(f.Bytes)
		case 3:
			e.Content = string(f.Bytes)
		case 4:
			e.Paths = append(e.Paths, string(f.Bytes))
		case 5:
			e.StaleOnMutation = f.Varint != 0
		case 6:
			e.Stamp = string(f.Bytes)
		case 7:
			e.Scope = string(f.Bytes)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding dedup entry: %w", err)
	}
	return e, nil
}
