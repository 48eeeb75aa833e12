package cachestore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Approvals implements ApprovalStore.
func (m *Memory) Approvals(ctx context.Context, session string) ([]*Approval, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	defer m.mu.Unlock()
	var out []*Approval
	for k, a := range m.approval {
		if session == "" || k.session == session {
			out = append(out, CloneApproval(a))
		}
	}
	SortApprovals(out)
	return out, nil
}

// ClaimApproval implements ApprovalStore.
func (m *Memory) ClaimApproval(ctx context.Context, session, callID, argsHash string) (*Approval, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("claiming the approval of call %q: %w", callID, err)
	}
	defer m.mu.Unlock()
	a := m.approval[memApprovalKey{session, callID}]
	if a == nil {
		return nil, ErrNotFound
	}
	if err := a.Claim(argsHash); err != nil {
		return nil, err
	}
	m.waiting.claim(session, callID)
	return CloneApproval(a), nil
}

// SettleApproval implements ApprovalStore.
func (m *Memory) SettleApproval(ctx context.Context, session, callID string, msg *messages.ToolMessage) (*messages.TurnRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("settling the approval of call %q: %w", callID, err)
	}
	defer m.mu.Unlock()
	rec, err := m.amendLocked(session, callID, []string{StatusAwaitingApproval}, msg)
	if err == nil {
		delete(m.approval, memApprovalKey{session, callID})
		m.waiting.remove(session, callID)
	}
	return rec, err
}

// SortApprovals orders approvals by session, then call id.
func SortApprovals(as []*Approval) {
	slices.SortFunc(as, func(a, b *Approval) int {
		if c := strings.Compare(a.Session, b.Session); c != 0 {
			return c
		}
		return strings.Compare(a.CallID, b.CallID)
	})
}
