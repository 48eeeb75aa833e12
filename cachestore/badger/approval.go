package badger

import (
	"context"
	"errors"
	"fmt"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Approvals implements cachestore.ApprovalStore.
func (b *Store) Approvals(ctx context.Context, session string) ([]*cachestore.Approval, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	defer b.leave()
	return entered{b}.Approvals(ctx, session)
}

// ClaimApproval implements cachestore.ApprovalStore.
func (b *Store) ClaimApproval(ctx context.Context, session, callID, argsHash string) (*cachestore.Approval, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("claiming the approval of call %q: %w", callID, err)
	}
	defer b.leave()
	return entered{b}.ClaimApproval(ctx, session, callID, argsHash)
}

// SettleApproval implements cachestore.ApprovalStore.
func (b *Store) SettleApproval(ctx context.Context, session, callID string, m *messages.ToolMessage) (*messages.TurnRecord, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("settling the approval of call %q: %w", callID, err)
	}
	defer b.leave()
	return entered{b}.SettleApproval(ctx, session, callID, m)
}

// entered is the store's approvals for a caller that already entered it
// (LoadSession, RecoverAll): entering twice could deadlock against Close.
type entered struct{ b *Store }

func (e entered) Approvals(ctx context.Context, session string) ([]*cachestore.Approval, error) {
	var out []*cachestore.Approval
	err := e.b.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: approvalPrefix(session), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			a, err := cachestore.DecodeApproval(v)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	cachestore.SortApprovals(out)
	return out, nil
}

func (e entered) ClaimApproval(ctx context.Context, session, callID, argsHash string) (*cachestore.Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *cachestore.Approval
	err := e.b.db.Update(func(txn *badgerdb.Txn) error {
		item, err := txn.Get(approvalKey(session, callID))
		if errors.Is(err, badgerdb.ErrKeyNotFound) {
			return cachestore.ErrNotFound
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		a, err := cachestore.DecodeApproval(v)
		if err != nil {
			return err
		}
		if err := a.Claim(argsHash); err != nil {
			return err
		}
		out = a
		if err := claimWaiting(txn, a); err != nil {
			return err
		}
		return txn.Set(approvalKey(session, callID), cachestore.EncodeApproval(a))
	})
	if err != nil {
		return nil, fmt.Errorf("claiming the approval of call %q of session %q: %w", callID, session, err)
	}
	return out, nil
}

func (e entered) SettleApproval(ctx context.Context, session, callID string, m *messages.ToolMessage) (*messages.TurnRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var had bool
	rec, err := e.b.amend(session, callID, []string{cachestore.StatusAwaitingApproval}, m, func(txn *badgerdb.Txn) error {
		var err error
		had, err = settleWaiting(txn, session, callID)
		return err
	})
	if err == nil && had {
		e.b.waiting.Add(-1)
	}
	return rec, err
}
