package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Approvals lists the waiting approvals of a session, or of every session
// when session is empty. Any member reads them; only the session's writer
// claims and settles them (fenced like CommitTurn).
func (p *Store) Approvals(ctx context.Context, session string) ([]*cachestore.Approval, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", unavailable(err))
	}
	defer p.leave()
	return entered{p}.Approvals(ctx, session)
}

// ClaimApproval implements cachestore.ApprovalStore; cachestore.ErrFenced
// when another writer took the session over.
func (p *Store) ClaimApproval(ctx context.Context, session, callID, argsHash string) (*cachestore.Approval, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("claiming the approval of call %q: %w", callID, unavailable(err))
	}
	defer p.leave()
	return entered{p}.ClaimApproval(ctx, session, callID, argsHash)
}

// SettleApproval implements cachestore.ApprovalStore; cachestore.ErrFenced
// when another writer took the session over.
func (p *Store) SettleApproval(ctx context.Context, session, callID string, m *messages.ToolMessage) (*messages.TurnRecord, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("settling the approval of call %q: %w", callID, unavailable(err))
	}
	defer p.leave()
	return entered{p}.SettleApproval(ctx, session, callID, m)
}

// entered is the store's approvals for a caller that already entered it
// (LoadSession): entering twice could deadlock against Close.
type entered struct{ p *Store }

func (e entered) Approvals(ctx context.Context, session string) ([]*cachestore.Approval, error) {
	var rows pgx.Rows
	var err error
	if session == "" {
		rows, err = e.p.pool.Query(ctx, `SELECT record FROM approvals ORDER BY session, call_id`)
	} else {
		rows, err = e.p.pool.Query(ctx, `SELECT record FROM approvals WHERE session = $1 ORDER BY call_id`, b(session))
	}
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", unavailable(err))
	}
	defer rows.Close()
	var out []*cachestore.Approval
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("listing approvals: %w", unavailable(err))
		}
		a, err := cachestore.DecodeApproval(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", unavailable(err))
	}
	cachestore.SortApprovals(out)
	return out, nil
}

func (e entered) ClaimApproval(ctx context.Context, session, callID, argsHash string) (*cachestore.Approval, error) {
	var out *cachestore.Approval
	err := pgx.BeginFunc(ctx, e.p.pool, func(tx pgx.Tx) error {
		if err := e.p.lockWriter(ctx, tx, session); err != nil {
			return err
		}
		var raw []byte
		err := tx.QueryRow(ctx, `SELECT record FROM approvals WHERE session = $1 AND call_id = $2`, b(session), b(callID)).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return cachestore.ErrNotFound
		}
		if err != nil {
			return err
		}
		a, err := cachestore.DecodeApproval(raw)
		if err != nil {
			return err
		}
		if err := a.Claim(argsHash); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE approvals SET record = $3 WHERE session = $1 AND call_id = $2`,
			b(session), b(callID), cachestore.EncodeApproval(a)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE waiting SET claimed = true WHERE session = $1 AND call_id = $2`,
			b(session), b(callID)); err != nil {
			return err
		}
		out = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claiming the approval of call %q of session %q: %w", callID, session, unavailable(mapPgError(err)))
	}
	return out, nil
}

func (e entered) SettleApproval(ctx context.Context, session, callID string, m *messages.ToolMessage) (*messages.TurnRecord, error) {
	return e.p.amend(ctx, session, callID, []string{cachestore.StatusAwaitingApproval}, m, func(tx pgx.Tx) error {
		return settleWaiting(ctx, tx, session, callID)
	})
}
