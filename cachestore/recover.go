package cachestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Statuses and texts of the tool messages a recovered turn gets for calls
// that pass 1 did not decide.
const (
	// StatusOutcomeUnknown is the status of a call that may have started
	// before the dispatcher stopped.
	StatusOutcomeUnknown = "outcome_unknown"
	// StatusCanceled is the status of a call that had not started when the
	// dispatcher stopped.
	StatusCanceled = "canceled"

	// ContentOutcomeUnknown is the content of an outcome_unknown message.
	ContentOutcomeUnknown = "outcome unknown: the dispatcher stopped while this call was running; " +
		"it may or may not have taken effect. Check its effect before calling it again."
	// ContentCanceled is the content of a canceled message of a recovered turn.
	ContentCanceled = "canceled: the dispatcher stopped before this call started; it did not run."
)

// ResolveIntent builds the turn record an intent left by a crash becomes:
// one tool message per call id, in call order; a call decided in pass 1 keeps
// its message, a call that may have started reads outcome_unknown, and every
// other call reads canceled. at is the record's time. The intent is not
// modified and the record shares no memory with it.
func ResolveIntent(in *Intent, at time.Time) *messages.TurnRecord {
	started := make(map[int]bool, len(in.Started))
	for _, i := range in.Started {
		started[i] = true
	}
	rec := &messages.TurnRecord{
		Turn:         in.Turn,
		Run:          in.Run,
		TurnId:       in.TurnID,
		Provider:     in.Provider,
		CallsHash:    in.CallsHash,
		TimeUnixNano: at.UnixNano(),
		ToolMessages: make([]*messages.ToolMessage, 0, len(in.IDs)),
	}
	if in.Assistant != nil {
		rec.Assistant = proto.Clone(in.Assistant).(*messages.AssistantMessage)
	}
	for i, id := range in.IDs {
		if m := in.Decided[i]; m != nil {
			rec.ToolMessages = append(rec.ToolMessages, proto.Clone(m).(*messages.ToolMessage))
			continue
		}
		var name string
		if i < len(in.Names) {
			name = in.Names[i]
		}
		m := &messages.ToolMessage{Role: "tool", ToolCallId: id, Name: name}
		if started[i] {
			m.Status, m.Content = StatusOutcomeUnknown, ContentOutcomeUnknown
		} else {
			m.Status, m.Content = StatusCanceled, ContentCanceled
		}
		rec.ToolMessages = append(rec.ToolMessages, m)
	}
	return rec
}

// sortedIndexes returns the keys of a decided map in ascending order.
func sortedIndexes(m map[int]*messages.ToolMessage) []int {
	out := make([]int, 0, len(m))
	for i, v := range m {
		if v != nil {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// resolveSession turns the session's pending intent, if any, into a
// committed turn and returns the session's next turn number afterwards and
// whether an intent was resolved. Intents for any other turn than the next
// one (left over from a turn that was committed after all) are deleted.
func (b *Badger) resolveSession(ctx context.Context, session string) (next int64, resolved bool, err error) {
	type stored struct {
		key []byte
		in  *Intent
	}
	var intents []stored
	err = b.db.View(func(txn *badger.Txn) error {
		var err error
		if next, err = readNextTurn(txn, session); err != nil {
			return err
		}
		prefix := intentPrefix(session)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 4})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			raw, err := readValue(txn, item)
			if err != nil {
				return fmt.Errorf("reading intent %q: %w", item.Key(), err)
			}
			in, err := DecodeIntent(raw)
			if err != nil {
				return fmt.Errorf("intent %q: %w", item.Key(), err)
			}
			intents = append(intents, stored{key: item.KeyCopy(nil), in: in})
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("loading session %q: %w", session, err)
	}
	if len(intents) == 0 {
		return next, false, nil
	}

	var current *Intent
	dels := make([]kv, 0, len(intents))
	for _, s := range intents {
		dels = append(dels, kv{key: s.key, del: true, chunked: true})
		if s.in.Turn == next && current == nil {
			current = s.in
		} else {
			b.log.Warn().Str("session", session).Int64("intent_turn", s.in.Turn).Int64("next_turn", next).
				Msg("dropping an intent record of a turn that is not the session's next")
		}
	}
	if current == nil {
		if err := b.submit(ctx, &writeOp{session: session, main: dels}); err != nil {
			return 0, false, fmt.Errorf("deleting stale intents of session %q: %w", session, err)
		}
		return next, false, nil
	}

	current.Session = session
	rec := ResolveIntent(current, b.now())
	op, err := b.turnOp(session, rec)
	if err != nil {
		return 0, false, fmt.Errorf("resolving intent of turn %d of session %q: %w", next, session, err)
	}
	op.main = append(op.main, dels...)
	if err := b.submit(ctx, op); err != nil {
		return 0, false, fmt.Errorf("resolving intent of turn %d of session %q: %w", next, session, err)
	}
	b.log.Info().Str("session", session).Int64("turn", next).Int("calls", len(rec.ToolMessages)).
		Msg("resolved the intent record of an interrupted turn")
	return next + 1, true, nil
}

// RecoverAll resolves every intent record in the store and returns how many
// turns it resolved. OpenBadger runs it before returning.
func (b *Badger) RecoverAll(ctx context.Context) (int, error) {
	if err := b.enter(); err != nil {
		return 0, fmt.Errorf("recovering intents: %w", err)
	}
	defer b.leave()
	return b.recoverAll(ctx)
}

func (b *Badger) recoverAll(ctx context.Context) (int, error) {
	var sessions []string
	err := b.db.View(func(txn *badger.Txn) error {
		prefix := []byte(prefixIntent)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			rest := it.Item().Key()[len(prefix):]
			i := slices.Index(rest, '/')
			if i < 0 {
				continue
			}
			s, err := unesc(rest[:i])
			if err != nil {
				return err
			}
			if len(sessions) == 0 || sessions[len(sessions)-1] != s {
				sessions = append(sessions, s)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("listing intents: %w", err)
	}
	n := 0
	var errs []error
	for _, s := range sessions {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("recovering intents: %w", err)
		}
		_, resolved, err := b.resolveSession(ctx, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resolved {
			n++
		}
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("recovering intents: %w", errors.Join(errs...))
	}
	return n, nil
}
