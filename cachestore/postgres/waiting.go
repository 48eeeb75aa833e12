package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// The index of what waits (cachestore.WaitingIndex): the table waiting,
// one row per approval, and waiting_count, its number of rows (migration
// 0004). Locks are taken in one order — a session's row, then
// waiting_count, then the approvals' rows — by commits, claims,
// settlements and the reconciliation at open alike.

// writeApprovals writes a commit's approvals and their index rows inside
// its transaction, and refuses them (a *cachestore.WaitingCapError, the
// transaction rolled back) when they would take the waiting approvals past
// c.MaxWaiting. An approval of a call that has one replaces it.
func writeApprovals(ctx context.Context, tx pgx.Tx, c *cachestore.TurnCommit) error {
	var have int64
	if err := tx.QueryRow(ctx, `SELECT n FROM waiting_count WHERE one FOR UPDATE`).Scan(&have); err != nil {
		return err
	}
	var adds int64
	for _, a := range c.Approvals {
		if _, err := tx.Exec(ctx, `INSERT INTO approvals (session, call_id, record) VALUES ($1, $2, $3)
			ON CONFLICT (session, call_id) DO UPDATE SET record = EXCLUDED.record`,
			b(a.Session), b(a.CallID), cachestore.EncodeApproval(a)); err != nil {
			return err
		}
		inserted, err := putWaiting(ctx, tx, cachestore.WaitingOf(a, c.Record.GetTurnId()), true)
		if err != nil {
			return err
		}
		if inserted {
			adds++
		}
	}
	if c.MaxWaiting > 0 && have+adds > c.MaxWaiting {
		return &cachestore.WaitingCapError{Cap: c.MaxWaiting, Waiting: have}
	}
	if adds > 0 {
		if _, err := tx.Exec(ctx, `UPDATE waiting_count SET n = n + $1 WHERE one`, adds); err != nil {
			return err
		}
	}
	return nil
}

// putWaiting writes an index row (replacing one of the same call when
// replace, leaving it otherwise) and reports whether the row is new.
func putWaiting(ctx context.Context, tx pgx.Tx, w *cachestore.Waiting, replace bool) (bool, error) {
	conflict := `DO NOTHING`
	if replace {
		conflict = `DO UPDATE SET asked = EXCLUDED.asked, run = EXCLUDED.run, tool = EXCLUDED.tool,
			claimed = EXCLUDED.claimed, entry = EXCLUDED.entry`
	}
	var inserted bool
	err := tx.QueryRow(ctx, `INSERT INTO waiting (session, call_id, asked, run, tool, claimed, entry)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (session, call_id) `+conflict+` RETURNING (xmax = 0)`,
		b(w.Session), b(w.CallID), cachestore.AskedNanos(w.Asked), b(w.Run), b(w.Tool), w.Claimed,
		cachestore.EncodeWaiting(w)).Scan(&inserted)
	if errors.Is(err, pgx.ErrNoRows) { // DO NOTHING on a conflict returns no row
		return false, nil
	}
	return inserted, err
}

// settleWaiting deletes the approval of a call and its index row, inside
// the settlement's transaction.
func settleWaiting(ctx context.Context, tx pgx.Tx, session, callID string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM approvals WHERE session = $1 AND call_id = $2`, b(session), b(callID)); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `DELETE FROM waiting WHERE session = $1 AND call_id = $2`, b(session), b(callID))
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE waiting_count SET n = n - $1 WHERE one`, tag.RowsAffected())
	return err
}

// ListWaiting implements cachestore.WaitingIndex. The database applies the
// filters; MaxScan bounds the rows that pass them.
func (p *Store) ListWaiting(ctx context.Context, q cachestore.WaitingQuery) (cachestore.WaitingPage, error) {
	if err := p.enter(ctx); err != nil {
		return cachestore.WaitingPage{}, fmt.Errorf("listing what waits: %w", unavailable(err))
	}
	defer p.leave()
	pager := cachestore.NewWaitingPager(q)
	bq := pager.Query()
	conds, args := []string{"NOT claimed"}, []any{}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if a := bq.After; a != nil {
		conds = append(conds, fmt.Sprintf("(asked, session, call_id) > (%s, %s, %s)", arg(a.Asked), arg(b(a.Session)), arg(b(a.CallID))))
	}
	for col, v := range map[string]string{"session": bq.Session, "run": bq.Run, "tool": bq.Tool, "call_id": bq.CallID} {
		if v != "" {
			conds = append(conds, col+" = "+arg(b(v)))
		}
	}
	if !bq.Before.IsZero() {
		conds = append(conds, "asked < "+arg(cachestore.AskedNanos(bq.Before)))
	}
	sql := `SELECT asked, session, call_id, entry FROM waiting WHERE ` + strings.Join(conds, " AND ") +
		` ORDER BY asked, session, call_id LIMIT ` + arg(int64(min(bq.Limit, bq.MaxScan))+1)
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return cachestore.WaitingPage{}, fmt.Errorf("listing what waits: %w", unavailable(err))
	}
	defer rows.Close()
	for rows.Next() {
		var pos cachestore.WaitingPos
		var session, callID, entry []byte
		if err := rows.Scan(&pos.Asked, &session, &callID, &entry); err != nil {
			return cachestore.WaitingPage{}, fmt.Errorf("listing what waits: %w", unavailable(err))
		}
		pos.Session, pos.CallID = string(session), string(callID)
		more, err := pager.Offer(pos, func() (*cachestore.Waiting, error) { return cachestore.DecodeWaiting(entry) })
		if err != nil {
			return cachestore.WaitingPage{}, fmt.Errorf("listing what waits: %w", err)
		}
		if !more {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return cachestore.WaitingPage{}, fmt.Errorf("listing what waits: %w", unavailable(err))
	}
	return pager.Page(), nil
}

// TurnByNumber returns one committed turn, or cachestore.ErrNotFound.
func (p *Store) TurnByNumber(ctx context.Context, session string, turn int64) (*messages.TurnRecord, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("reading turn %d of session %q: %w", turn, session, unavailable(err))
	}
	defer p.leave()
	var raw []byte
	err := p.pool.QueryRow(ctx, `SELECT record FROM turns WHERE session = $1 AND turn = $2`, b(session), turn).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		err = cachestore.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading turn %d of session %q: %w", turn, session, unavailable(err))
	}
	rec := &messages.TurnRecord{}
	if err := proto.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("reading turn %d of session %q: decoding: %w", turn, session, unavailable(err))
	}
	return rec, nil
}

// reconcileBatch is how many approvals without an index row one step of
// the reconciliation reads.
const reconcileBatch = 500

// reconcileWaiting gives every approval its index row and deletes the rows
// of approvals that are gone, then counts the rows: at open, for the
// approvals kept before the index existed, or written or settled by a
// member that does not keep it (members of mixed versions during an
// upgrade). It holds waiting_count's lock throughout, so commits and
// settlements of other members wait for it.
func (p *Store) reconcileWaiting(ctx context.Context) error {
	var added, removed int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		added, removed = 0, 0
		if _, err := tx.Exec(ctx, `SELECT n FROM waiting_count WHERE one FOR UPDATE`); err != nil {
			return err
		}
		var after [2][]byte // the last approval read, by (session, call_id)
		for {
			n, err := indexMissing(ctx, tx, p, &after)
			if err != nil {
				return err
			}
			added += n
			if n < reconcileBatch {
				break
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM waiting w WHERE NOT EXISTS
			(SELECT 1 FROM approvals a WHERE a.session = w.session AND a.call_id = w.call_id)`)
		if err != nil {
			return err
		}
		removed = tag.RowsAffected()
		_, err = tx.Exec(ctx, `UPDATE waiting_count SET n = (SELECT count(*) FROM waiting) WHERE one`)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: reconciling the index of what waits: %w", unavailable(err))
	}
	if added > 0 || removed > 0 {
		p.log.Info().Int64("added", added).Int64("removed", removed).Msg("reconciled the index of what waits with the approvals")
	}
	return nil
}

// indexMissing writes the index rows of up to reconcileBatch approvals
// after *after that have none (their turns' ids read from the turns),
// moves *after past them and returns how many it read. An approval that
// does not decode is logged and given no row.
func indexMissing(ctx context.Context, tx pgx.Tx, p *Store, after *[2][]byte) (int64, error) {
	rows, err := tx.Query(ctx, `SELECT a.session, a.call_id, a.record FROM approvals a
		WHERE (a.session, a.call_id) > ($1, $2)
		AND NOT EXISTS (SELECT 1 FROM waiting w WHERE w.session = a.session AND w.call_id = a.call_id)
		ORDER BY a.session, a.call_id LIMIT $3 FOR UPDATE OF a`, nb(after[0]), nb(after[1]), reconcileBatch)
	if err != nil {
		return 0, err
	}
	var raws [][]byte
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&after[0], &after[1], &raw); err != nil {
			rows.Close()
			return 0, err
		}
		raws = append(raws, raw)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, raw := range raws {
		a, err := cachestore.DecodeApproval(raw)
		if err != nil {
			p.log.Error().Err(err).Msg("an approval that does not decode is left out of the index")
			continue
		}
		var turnID []byte
		err = tx.QueryRow(ctx, `SELECT turn_id FROM turns WHERE session = $1 AND turn = $2`, b(a.Session), a.Turn).Scan(&turnID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, err
		}
		if _, err := putWaiting(ctx, tx, cachestore.WaitingOf(a, string(turnID)), false); err != nil {
			return 0, err
		}
	}
	return int64(len(raws)), nil
}
