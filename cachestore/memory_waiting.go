package cachestore

import (
	"context"
	"fmt"
	"slices"

	"github.com/tooldispatch/tooldispatch/messages"
)

// memWaiting is Memory's index of what waits: the entries in index order,
// and each session's in the same order. Guarded by Memory.mu.
type memWaiting struct {
	order     []*Waiting
	bySession map[string][]*Waiting
	byKey     map[memApprovalKey]*Waiting
}

func newMemWaiting() memWaiting {
	return memWaiting{bySession: map[string][]*Waiting{}, byKey: map[memApprovalKey]*Waiting{}}
}

func comparePos(a, b *Waiting) int { return a.Pos().Compare(b.Pos()) }

// add puts w in the index (the caller removed any entry of its call).
func (x *memWaiting) add(w *Waiting) {
	x.byKey[memApprovalKey{w.Session, w.CallID}] = w
	x.order = insertSorted(x.order, w)
	x.bySession[w.Session] = insertSorted(x.bySession[w.Session], w)
}

func insertSorted(ws []*Waiting, w *Waiting) []*Waiting {
	i, _ := slices.BinarySearchFunc(ws, w, comparePos)
	return slices.Insert(ws, i, w)
}

func deleteSorted(ws []*Waiting, w *Waiting) []*Waiting {
	if i, ok := slices.BinarySearchFunc(ws, w, comparePos); ok {
		return slices.Delete(ws, i, i+1)
	}
	return ws
}

// remove takes the entry of a call out of the index, if it is there.
func (x *memWaiting) remove(session, callID string) {
	k := memApprovalKey{session, callID}
	w := x.byKey[k]
	if w == nil {
		return
	}
	delete(x.byKey, k)
	x.order = deleteSorted(x.order, w)
	if rest := deleteSorted(x.bySession[session], w); len(rest) > 0 {
		x.bySession[session] = rest
	} else {
		delete(x.bySession, session)
	}
}

// claim marks the entry of a call claimed.
func (x *memWaiting) claim(session, callID string) {
	if w := x.byKey[memApprovalKey{session, callID}]; w != nil {
		w.Claimed = true
	}
}

// checkWaitingCapLocked refuses a commit whose new approvals would take
// the store past c.MaxWaiting.
func (m *Memory) checkWaitingCapLocked(c *TurnCommit) error {
	if c.MaxWaiting <= 0 || len(c.Approvals) == 0 {
		return nil
	}
	adds := map[memApprovalKey]bool{}
	for _, a := range c.Approvals {
		if k := (memApprovalKey{a.Session, a.CallID}); m.approval[k] == nil {
			adds[k] = true
		}
	}
	if have := int64(len(m.approval)); have+int64(len(adds)) > c.MaxWaiting {
		return &WaitingCapError{Cap: c.MaxWaiting, Waiting: have}
	}
	return nil
}

// ListWaiting implements WaitingIndex.
func (m *Memory) ListWaiting(ctx context.Context, q WaitingQuery) (WaitingPage, error) {
	if err := m.lock(ctx); err != nil {
		return WaitingPage{}, fmt.Errorf("listing what waits: %w", err)
	}
	defer m.mu.Unlock()
	p := NewWaitingPager(q)
	entries := m.waiting.order
	if q.Session != "" {
		entries = m.waiting.bySession[q.Session]
	}
	i := 0
	if q.After != nil {
		i, _ = slices.BinarySearchFunc(entries, *q.After, func(w *Waiting, at WaitingPos) int {
			if w.Pos().Compare(at) <= 0 {
				return -1
			}
			return 1
		})
	}
	for _, w := range entries[i:] {
		if !q.InTime(AskedNanos(w.Asked)) {
			break
		}
		more, _ := p.Offer(w.Pos(), func() (*Waiting, error) { c := *w; return &c, nil })
		if !more {
			break
		}
	}
	return p.Page(), nil
}

// TurnByNumber returns a copy of one committed turn, or ErrNotFound.
func (m *Memory) TurnByNumber(ctx context.Context, session string, turn int64) (*messages.TurnRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("reading turn %d of session %q: %w", turn, session, err)
	}
	defer m.mu.Unlock()
	s := m.sessions[session]
	if s == nil || turn < 1 || turn > int64(len(s.turns)) {
		return nil, fmt.Errorf("reading turn %d of session %q: %w", turn, session, ErrNotFound)
	}
	return cloneTurn(s.turns[turn-1]), nil
}
