package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Options configures Open.
type Options struct {
	// URL is a libpq connection string or URL, e.g.
	// postgres://user@host:5432/db?sslmode=disable. Tables live in the
	// connection's current schema (search_path=NAME in the URL picks one).
	URL string
	// Logger receives the store's logs. The zero value discards them.
	Logger zerolog.Logger
	// MaxConns caps the pool's connections; zero keeps pgxpool's default
	// (the larger of 4 and the number of CPUs).
	MaxConns int32
}

// Store is a cachestore.Store in a PostgreSQL database shared by the members of a
// cluster (the session grains' state). Each method is one transaction; a
// turn's commit writes its record, the session's next turn, the run-state
// changes and the cache entries and deletes its intent atomically.
//
// Writers are fenced (see cachestore.ErrFenced): LoadSession takes the session over
// and the Postgres value remembers, per session, the epoch it got; its later
// WriteIntent, CommitTurn and AmendToolMessage of that session check the
// epoch under the session row's lock. A Postgres value that never loaded a
// session writes it only while nobody has (epoch 0). RecoverAll takes over
// every session it resolves an intent of; in a cluster members rely on
// LoadSession at grain activation and need not run it.
//
// Turn ids are idempotency keys: a commit whose turn id the session already
// holds fails with cachestore.ErrStaleTurn, so a retried commit never duplicates a turn.
// A commit whose result was lost (the connection dropped during COMMIT) may
// or may not have been applied: retrying it is safe and tells which.
//
// Errors from the database (connection refused, server restarted) are
// returned wrapped; nothing of a failed transaction is applied.
type Store struct {
	pool *pgxpool.Pool
	log  zerolog.Logger
	now  func() time.Time

	life   sync.RWMutex // held for reading by calls in flight, for writing by Close
	closed bool         // guarded by life

	mu     sync.Mutex
	epochs map[string]int64      // epoch held per session; guarded by mu
	tasks  cachestore.TaskLookup // guarded by mu; nil until SetTaskLookup
}

var (
	_ cachestore.Store        = (*Store)(nil)
	_ cachestore.KVCreator    = (*Store)(nil)
	_ cachestore.TaskResolver = (*Store)(nil)
)

// Open connects to the database and applies the schema migrations
// it has not applied yet (several members may open it at once).
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.URL == "" {
		return nil, errors.New("postgres: Options.URL is required")
	}
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: parsing the PostgreSQL URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connecting to PostgreSQL: %w", err)
	}
	p := &Store{
		pool:   pool,
		log:    opts.Logger.With().Str("component", "cachestore.postgres").Logger(),
		now:    time.Now,
		epochs: make(map[string]int64),
	}
	if err := migrate(ctx, pool, p.log, 0); err != nil {
		pool.Close()
		return nil, err
	}
	if err := p.reconcileWaiting(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return p, nil
}

// Close closes the pool once the calls in flight returned; it is idempotent
// and every other method returns cachestore.ErrClosed afterwards.
func (p *Store) Close() error {
	p.life.Lock()
	defer p.life.Unlock()
	if !p.closed {
		p.closed = true
		p.pool.Close()
	}
	return nil
}

// enter starts a call: it fails with cachestore.ErrClosed after Close and with the
// context's error when ctx is done; on success the caller must call leave.
func (p *Store) enter(ctx context.Context) error {
	p.life.RLock()
	if p.closed {
		p.life.RUnlock()
		return cachestore.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		p.life.RUnlock()
		return err
	}
	return nil
}

func (p *Store) leave() { p.life.RUnlock() }

// Epoch returns the fencing epoch this Postgres value holds for a session,
// and whether it holds one (it loaded the session).
func (p *Store) Epoch(session string) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.epochs[session]
	return e, ok
}

// ReleaseSession forgets the epoch held for a session (its grain was
// deactivated); a later write of the session without LoadSession is fenced
// unless the session was never loaded.
func (p *Store) ReleaseSession(session string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.epochs, session)
}

func (p *Store) hold(session string, epoch int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch > p.epochs[session] {
		p.epochs[session] = epoch
	}
}

// b returns s as a non-nil byte slice (pgx sends a nil slice as NULL).
func b(s string) []byte { return append([]byte{}, s...) }

// nb returns v, or an empty slice for nil.
func nb(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// lockSession locks the session's row for a write (creating it when
// missing) and checks the fence; it returns the session's next turn.
func (p *Store) lockSession(ctx context.Context, tx pgx.Tx, session string) (int64, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO sessions (session) VALUES ($1) ON CONFLICT DO NOTHING`, b(session)); err != nil {
		return 0, err
	}
	var next, epoch int64
	err := tx.QueryRow(ctx, `SELECT next_turn, epoch FROM sessions WHERE session = $1 FOR UPDATE`, b(session)).Scan(&next, &epoch)
	if err != nil {
		return 0, err
	}
	if err := p.checkFence(session, epoch); err != nil {
		return 0, err
	}
	return next, nil
}

// checkFence compares the stored epoch with the one this value holds (0
// when it never loaded the session).
func (p *Store) checkFence(session string, stored int64) error {
	held, _ := p.Epoch(session)
	if stored != held {
		p.log.Warn().Str("session", session).Int64("held_epoch", held).Int64("store_epoch", stored).
			Msg("write refused: the session was taken over by another writer")
		return fmt.Errorf("held epoch %d, session epoch %d: %w", held, stored, cachestore.ErrFenced)
	}
	return nil
}

// LoadSession takes the session over (its epoch is incremented and held by
// p, fencing any earlier writer) and resolves a leftover intent record into
// a committed turn, in one transaction.
func (p *Store) LoadSession(ctx context.Context, session string) (cachestore.SessionState, error) {
	if err := p.enter(ctx); err != nil {
		return cachestore.SessionState{}, fmt.Errorf("loading session %q: %w", session, unavailable(err))
	}
	defer p.leave()
	looked, _, err := p.lookUpTasks(ctx, session, true)
	if err != nil {
		return cachestore.SessionState{}, fmt.Errorf("loading session %q: %w", session, unavailable(err))
	}
	next, block, _, err := p.takeOver(ctx, session, looked)
	if err != nil {
		return cachestore.SessionState{}, fmt.Errorf("loading session %q: %w", session, unavailable(err))
	}
	// Settled under the epoch just taken: a claimed approval's runner is
	// gone or fenced.
	if _, err := cachestore.SettleClaimed(ctx, entered{p}, session); err != nil {
		return cachestore.SessionState{}, fmt.Errorf("loading session %q: %w", session, unavailable(err))
	}
	return cachestore.SessionState{NextTurn: next, EventBlock: block}, nil
}

// queueEventBlock queues the raising of a session's event counter, when
// block is set.
func queueEventBlock(batch *pgx.Batch, session string, block uint64) {
	if block != 0 {
		batch.Queue(`UPDATE sessions SET event_block = GREATEST(COALESCE(event_block, 0), $2) WHERE session = $1`,
			b(session), int64(block))
	}
}

// lookUpTasks asks the TaskLookup about the started tasks of the
// session's intent of its next turn, outside any transaction, and returns
// what it learned (nil when the intent names none). Without a lookup,
// leave reports that the intent is to be left in place (unless blind).
func (p *Store) lookUpTasks(ctx context.Context, session string, blind bool) (looked *cachestore.TaskOutcomes, leave bool, err error) {
	var raw []byte
	err = p.pool.QueryRow(ctx, `SELECT i.record FROM intents i LEFT JOIN sessions s ON s.session = i.session
		WHERE i.session = $1 AND i.turn = COALESCE(s.next_turn, 1)`, b(session)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, mapPgError(err)
	}
	in, err := cachestore.DecodeIntent(raw)
	if err != nil || len(cachestore.StartedTasks(in)) == 0 {
		return nil, false, nil // a corrupt intent fails in takeOver
	}
	p.mu.Lock()
	lookup := p.tasks
	p.mu.Unlock()
	if lookup == nil {
		return nil, !blind, nil
	}
	return cachestore.LookUpTasks(ctx, lookup, session, in), false, nil
}

// takeOver bumps the session's epoch, resolves its intent of the next turn
// (with what a lookup learned of its tasks) and drops any other, and takes
// the loader's blocks of event numbers (cachestore.EventBlocksPerLoad), in
// one transaction; it returns the next turn afterwards, the first block
// taken and whether it resolved a turn.
func (p *Store) takeOver(ctx context.Context, session string, looked *cachestore.TaskOutcomes) (next int64, block uint64, resolved bool, err error) {
	var epoch int64
	var calls int
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		resolved, calls = false, 0
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (session) VALUES ($1) ON CONFLICT DO NOTHING`, b(session)); err != nil {
			return err
		}
		var stored *int64
		err := tx.QueryRow(ctx, `UPDATE sessions SET epoch = epoch + 1 WHERE session = $1 RETURNING next_turn, epoch, event_block`,
			b(session)).Scan(&next, &epoch, &stored)
		if err != nil {
			return err
		}
		if calls, resolved, err = p.resolveIntent(ctx, tx, session, next, looked); err != nil {
			return err
		}
		if resolved {
			next++
		}
		var v uint64
		if stored != nil {
			v = uint64(*stored)
		}
		block = cachestore.LoadedEventBlock(v, stored != nil, next)
		_, err = tx.Exec(ctx, `UPDATE sessions SET event_block = $2 WHERE session = $1`, b(session),
			int64(block+cachestore.EventBlocksPerLoad))
		return err
	})
	if err != nil {
		return 0, 0, false, mapPgError(err)
	}
	p.hold(session, epoch)
	if resolved {
		p.log.Info().Str("session", session).Int64("turn", next-1).Int("calls", calls).
			Msg("resolved the intent record of an interrupted turn")
	}
	return next, block, resolved, nil
}

// resolveIntent resolves the session's intent of its next turn, inside
// takeOver's transaction, and drops any other.
func (p *Store) resolveIntent(ctx context.Context, tx pgx.Tx, session string, next int64, looked *cachestore.TaskOutcomes) (calls int, resolved bool, err error) {
	rows, err := tx.Query(ctx, `SELECT turn, record FROM intents WHERE session = $1 ORDER BY turn`, b(session))
	if err != nil {
		return 0, false, err
	}
	var current *cachestore.Intent
	var stale []int64
	for rows.Next() {
		var turn int64
		var raw []byte
		if err := rows.Scan(&turn, &raw); err != nil {
			rows.Close()
			return 0, false, err
		}
		in, err := cachestore.DecodeIntent(raw)
		if err != nil {
			rows.Close()
			return 0, false, fmt.Errorf("intent of turn %d: %w", turn, unavailable(err))
		}
		if turn == next && current == nil {
			current = in
		} else {
			stale = append(stale, turn)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, err
	}
	for _, turn := range stale {
		p.log.Warn().Str("session", session).Int64("intent_turn", turn).Int64("next_turn", next).
			Msg("dropping an intent record of a turn that is not the session's next")
	}
	if current == nil && len(stale) == 0 {
		return 0, false, nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM intents WHERE session = $1`, b(session)); err != nil {
		return 0, false, err
	}
	if current == nil {
		return 0, false, nil
	}
	current.Session, current.Turn = session, next
	rec := cachestore.ResolveIntentWith(current, p.now(), looked)
	turnID := current.TurnID
	if turnID != "" {
		var taken bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE session = $1 AND turn_id = $2)`,
			b(session), b(turnID)).Scan(&taken)
		if err != nil {
			return 0, false, err
		}
		if taken {
			turnID = "" // the record keeps it; the index already points at the earlier turn
		}
	}
	if err := insertTurn(ctx, tx, session, rec, turnID); err != nil {
		return 0, false, err
	}
	return len(rec.ToolMessages), true, nil
}

// insertTurn writes a committed turn and advances the session's next turn.
func insertTurn(ctx context.Context, tx pgx.Tx, session string, rec *messages.TurnRecord, turnID string) error {
	raw, _, err := cachestore.MarshalValid(rec)
	if err != nil {
		return fmt.Errorf("encoding turn record: %w", err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO turns (session, turn, run, turn_id, record) VALUES ($1, $2, $3, $4, $5)`,
		b(session), rec.Turn, b(rec.Run), b(turnID), raw)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE sessions SET next_turn = $2 WHERE session = $1`, b(session), rec.Turn+1)
	return err
}

// ErrUnavailable: the database could not be reached or dropped the
// connection (refused, reset, restarted, shutting down). The call's
// transaction was not applied — except that a CommitTurn whose COMMIT was
// sent but not answered may have been: retrying it returns cachestore.ErrStaleTurn if
// so. The error also wraps the driver's.
var ErrUnavailable = errors.New("postgres: database unavailable")

// unavailable wraps an infrastructure error in ErrUnavailable; other errors
// (the store's sentinels, the caller's context, SQL errors) pass unchanged.
func unavailable(err error) error {
	switch {
	case err == nil, errors.Is(err, ErrUnavailable), errors.Is(err, cachestore.ErrStaleTurn), errors.Is(err, cachestore.ErrFenced),
		errors.Is(err, cachestore.ErrNotFound), errors.Is(err, cachestore.ErrAlreadySettled), errors.Is(err, cachestore.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 08: connection exception; 57P: shutdown, crash, cannot connect
		// now; 53: insufficient resources (too many connections).
		if strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "53") {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// mapPgError turns the violation of the turn-id index into cachestore.ErrStaleTurn.
func mapPgError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "turns_session_turn_id" {
		return fmt.Errorf("turn id already committed: %w", cachestore.ErrStaleTurn)
	}
	return err
}

// Turns returns the committed turns of a session in order.
func (p *Store) Turns(ctx context.Context, session string) ([]*messages.TurnRecord, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("reading turns of session %q: %w", session, unavailable(err))
	}
	defer p.leave()
	rows, err := p.pool.Query(ctx, `SELECT record FROM turns WHERE session = $1 ORDER BY turn`, b(session))
	if err != nil {
		return nil, fmt.Errorf("reading turns of session %q: %w", session, unavailable(err))
	}
	out := []*messages.TurnRecord{}
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading turns of session %q: %w", session, unavailable(err))
		}
		rec := &messages.TurnRecord{}
		if err := proto.Unmarshal(raw, rec); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading turns of session %q: decoding: %w", session, unavailable(err))
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading turns of session %q: %w", session, unavailable(err))
	}
	return out, nil
}

// TurnByID returns the committed turn with this turn id, or cachestore.ErrNotFound.
func (p *Store) TurnByID(ctx context.Context, session, turnID string) (*messages.TurnRecord, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, unavailable(err))
	}
	defer p.leave()
	if turnID == "" {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, cachestore.ErrNotFound)
	}
	var raw []byte
	err := p.pool.QueryRow(ctx, `SELECT record FROM turns WHERE session = $1 AND turn_id = $2`, b(session), b(turnID)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		err = cachestore.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, unavailable(err))
	}
	rec := &messages.TurnRecord{}
	if err := proto.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("reading turn %q of session %q: decoding: %w", turnID, session, unavailable(err))
	}
	return rec, nil
}

// Sessions lists the ids of sessions that have committed turns, sorted.
func (p *Store) Sessions(ctx context.Context) ([]string, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", unavailable(err))
	}
	defer p.leave()
	rows, err := p.pool.Query(ctx, `SELECT session FROM sessions WHERE next_turn > 1 ORDER BY session`)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", unavailable(err))
	}
	out, err := collectStrings(rows)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", unavailable(err))
	}
	return out, nil
}

func collectStrings(rows pgx.Rows) ([]string, error) {
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var v []byte
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, string(v))
	}
	return out, rows.Err()
}

// LoadRun returns a run's state (empty, never nil, maps for a new run).
func (p *Store) LoadRun(ctx context.Context, session, run string) (*cachestore.RunState, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("loading run %q of session %q: %w", run, session, unavailable(err))
	}
	defer p.leave()
	out := &cachestore.RunState{Dedup: map[string]*cachestore.DedupEntry{}, Fetched: map[string]bool{}}
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT entry FROM run_dedup WHERE session = $1 AND run = $2`, b(session), b(run))
		if err != nil {
			return err
		}
		for rows.Next() {
			var raw []byte
			if err := rows.Scan(&raw); err != nil {
				rows.Close()
				return err
			}
			e, err := cachestore.DecodeDedup(raw)
			if err != nil {
				rows.Close()
				return err
			}
			out.Dedup[e.Key] = e
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT tool FROM run_fetched WHERE session = $1 AND run = $2`, b(session), b(run))
		if err != nil {
			return err
		}
		tools, err := collectStrings(rows)
		for _, tool := range tools {
			out.Fetched[tool] = true
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("loading run %q of session %q: %w", run, session, unavailable(err))
	}
	return out, nil
}

// EndRun deletes a run's state.
func (p *Store) EndRun(ctx context.Context, session, run string) error {
	if err := p.enter(ctx); err != nil {
		return fmt.Errorf("ending run %q of session %q: %w", run, session, unavailable(err))
	}
	defer p.leave()
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue(`DELETE FROM run_dedup WHERE session = $1 AND run = $2`, b(session), b(run))
		batch.Queue(`DELETE FROM run_fetched WHERE session = $1 AND run = $2`, b(session), b(run))
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return fmt.Errorf("ending run %q of session %q: %w", run, session, unavailable(err))
	}
	return nil
}

// WriteIntent stores (or replaces) the intent record of the session's next
// turn: cachestore.ErrStaleTurn if in.Turn is not that turn, cachestore.ErrFenced if another
// writer took the session over.
func (p *Store) WriteIntent(ctx context.Context, in *cachestore.Intent) error {
	if in == nil {
		return errors.New("writing intent: no intent")
	}
	raw, err := cachestore.EncodeIntent(in)
	if err != nil {
		return fmt.Errorf("writing intent of turn %d of session %q: %w", in.Turn, in.Session, unavailable(err))
	}
	if err := p.enter(ctx); err != nil {
		return fmt.Errorf("writing intent of turn %d of session %q: %w", in.Turn, in.Session, unavailable(err))
	}
	defer p.leave()
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		next, err := p.lockSession(ctx, tx, in.Session)
		if err != nil {
			return err
		}
		if in.Turn != next {
			return fmt.Errorf("next turn is %d: %w", next, cachestore.ErrStaleTurn)
		}
		batch := &pgx.Batch{}
		batch.Queue(`INSERT INTO intents (session, turn, record) VALUES ($1, $2, $3)
			ON CONFLICT (session, turn) DO UPDATE SET record = EXCLUDED.record`, b(in.Session), in.Turn, raw)
		queueEventBlock(batch, in.Session, in.EventBlock)
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return fmt.Errorf("writing intent of turn %d of session %q: %w", in.Turn, in.Session, unavailable(err))
	}
	return nil
}

// CommitTurn applies a turn's writes in one transaction: the record, the
// session's next turn, the run-state changes (a key in both DedupPut and
// DedupDel ends deleted), the cache entries, and the deletion of the turn's
// intent. cachestore.ErrStaleTurn when Record.Turn is not the session's next turn or
// its turn id is already committed; cachestore.ErrFenced when another writer took the
// session over.
func (p *Store) CommitTurn(ctx context.Context, c *cachestore.TurnCommit) error {
	if c == nil || c.Record == nil {
		return errors.New("committing turn: no turn record")
	}
	rec := c.Record
	if err := cachestore.CheckApprovals(c); err != nil {
		return fmt.Errorf("committing turn %d of session %q: %w", rec.Turn, c.Session, err)
	}
	if err := p.enter(ctx); err != nil {
		return fmt.Errorf("committing turn %d of session %q: %w", rec.Turn, c.Session, unavailable(err))
	}
	defer p.leave()
	// Last write of a key wins, and keys are written in order so that
	// concurrent commits sharing cache keys lock them in the same order.
	cache := make(map[string]cachestore.CacheEntry, len(c.CachePut))
	for _, e := range c.CachePut {
		cache[e.Key] = e
	}
	cacheKeys := make([]string, 0, len(cache))
	for k := range cache {
		cacheKeys = append(cacheKeys, k)
	}
	slices.Sort(cacheKeys)
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		next, err := p.lockSession(ctx, tx, c.Session)
		if err != nil {
			return err
		}
		if rec.Turn != next {
			return fmt.Errorf("next turn is %d: %w", next, cachestore.ErrStaleTurn)
		}
		if err := insertTurn(ctx, tx, c.Session, rec, rec.TurnId); err != nil {
			return err
		}
		if len(c.Approvals) > 0 {
			if err := writeApprovals(ctx, tx, c); err != nil {
				return err
			}
		}
		batch := &pgx.Batch{}
		batch.Queue(`DELETE FROM intents WHERE session = $1 AND turn = $2`, b(c.Session), rec.Turn)
		queueEventBlock(batch, c.Session, c.EventBlock)
		for _, tool := range c.FetchedAdd {
			batch.Queue(`INSERT INTO run_fetched (session, run, tool) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				b(c.Session), b(rec.Run), b(tool))
		}
		for _, e := range c.DedupPut {
			if e == nil {
				continue
			}
			batch.Queue(`INSERT INTO run_dedup (session, run, key, entry) VALUES ($1, $2, $3, $4)
				ON CONFLICT (session, run, key) DO UPDATE SET entry = EXCLUDED.entry`,
				b(c.Session), b(rec.Run), b(e.Key), cachestore.EncodeDedup(e))
		}
		for _, k := range c.DedupDel {
			batch.Queue(`DELETE FROM run_dedup WHERE session = $1 AND run = $2 AND key = $3`, b(c.Session), b(rec.Run), b(k))
		}
		for _, k := range cacheKeys {
			queueCachePut(batch, cache[k])
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return fmt.Errorf("committing turn %d of session %q: %w", rec.Turn, c.Session, unavailable(mapPgError(err)))
	}
	return nil
}

func queueCachePut(batch *pgx.Batch, e cachestore.CacheEntry) {
	var expires *int64
	if !e.Expires.IsZero() {
		ns := e.Expires.UnixNano()
		expires = &ns
	}
	batch.Queue(`INSERT INTO cache (key, value, expires) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires = EXCLUDED.expires`,
		b(e.Key), nb(e.Value), expires)
}

// RecoverAll resolves every intent record in the store and returns how many
// turns it resolved. It takes over (fences) every session with an intent, so
// a cluster member should not run it while others write: members resolve
// intents through LoadSession when a grain activates.
func (p *Store) RecoverAll(ctx context.Context) (int, error) {
	if err := p.enter(ctx); err != nil {
		return 0, fmt.Errorf("recovering intents: %w", unavailable(err))
	}
	defer p.leave()
	rows, err := p.pool.Query(ctx, `SELECT DISTINCT session FROM intents ORDER BY session`)
	if err != nil {
		return 0, fmt.Errorf("recovering intents: %w", unavailable(err))
	}
	sessions, err := collectStrings(rows)
	if err != nil {
		return 0, fmt.Errorf("recovering intents: %w", unavailable(err))
	}
	return cachestore.RecoverSessions(ctx, sessions, func(ctx context.Context, session string) (bool, error) {
		looked, leave, err := p.lookUpTasks(ctx, session, false)
		if err != nil {
			return false, fmt.Errorf("session %q: %w", session, unavailable(err))
		}
		if leave {
			return false, nil // left for the lookup
		}
		_, _, resolved, err := p.takeOver(ctx, session, looked)
		if err != nil {
			return false, fmt.Errorf("session %q: %w", session, err)
		}
		return resolved, nil
	})
}

// CacheGet returns the cached value if it exists and now is before its
// absolute expiry. A hit does not extend the expiry.
func (p *Store) CacheGet(ctx context.Context, key string, now time.Time) ([]byte, bool, error) {
	if err := p.enter(ctx); err != nil {
		return nil, false, fmt.Errorf("reading cache entry %q: %w", key, unavailable(err))
	}
	defer p.leave()
	var value []byte
	var expires *int64
	err := p.pool.QueryRow(ctx, `SELECT value, expires FROM cache WHERE key = $1`, b(key)).Scan(&value, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading cache entry %q: %w", key, unavailable(err))
	}
	if expires != nil && now.UnixNano() >= *expires {
		return nil, false, nil
	}
	return nb(value), true, nil
}

// CachePut stores (or replaces) a value with an absolute expiry; a zero
// Expires never expires.
func (p *Store) CachePut(ctx context.Context, e cachestore.CacheEntry) error {
	if err := p.enter(ctx); err != nil {
		return fmt.Errorf("writing cache entry %q: %w", e.Key, unavailable(err))
	}
	defer p.leave()
	batch := &pgx.Batch{}
	queueCachePut(batch, e)
	if err := p.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("writing cache entry %q: %w", e.Key, unavailable(err))
	}
	return nil
}

// PurgeCache deletes the cache entries that expired before t and returns
// how many; reads already ignore them, this only frees space.
func (p *Store) PurgeCache(ctx context.Context, t time.Time) (int64, error) {
	if err := p.enter(ctx); err != nil {
		return 0, fmt.Errorf("purging the cache: %w", unavailable(err))
	}
	defer p.leave()
	tag, err := p.pool.Exec(ctx, `DELETE FROM cache WHERE expires IS NOT NULL AND expires <= $1`, t.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("purging the cache: %w", unavailable(err))
	}
	return tag.RowsAffected(), nil
}

// SaveFileVersion keeps a version of a workspace file and returns its
// number (1, 2, 3… per file).
func (p *Store) SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error) {
	if err := p.enter(ctx); err != nil {
		return 0, fmt.Errorf("saving a version of %q: %w", path, unavailable(err))
	}
	defer p.leave()
	ws := cachestore.NormalizeWorkspace(workspace)
	at := p.now().UnixNano()
	var version int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO file_heads (workspace, path, last) VALUES ($1, $2, 1)
			ON CONFLICT (workspace, path) DO UPDATE SET last = file_heads.last + 1 RETURNING last`,
			b(ws), b(path)).Scan(&version)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO file_versions (workspace, path, version, time_unix_nano, size, deleted, note, content)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			b(ws), b(path), version, at, int64(len(content)), deleted, b(note), nb(content))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("saving a version of %q: %w", path, unavailable(err))
	}
	return version, nil
}

// FileVersions lists a file's versions, oldest first (empty when it has none).
func (p *Store) FileVersions(ctx context.Context, workspace, path string) ([]cachestore.FileVersion, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("listing versions of %q: %w", path, unavailable(err))
	}
	defer p.leave()
	rows, err := p.pool.Query(ctx, `SELECT version, time_unix_nano, size, deleted, note FROM file_versions
		WHERE workspace = $1 AND path = $2 ORDER BY version`, b(cachestore.NormalizeWorkspace(workspace)), b(path))
	if err != nil {
		return nil, fmt.Errorf("listing versions of %q: %w", path, unavailable(err))
	}
	defer rows.Close()
	out := []cachestore.FileVersion{}
	for rows.Next() {
		v, err := scanFileVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("listing versions of %q: %w", path, unavailable(err))
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing versions of %q: %w", path, unavailable(err))
	}
	return out, nil
}

func scanFileVersion(row pgx.Row, extra ...any) (cachestore.FileVersion, error) {
	var v cachestore.FileVersion
	var at int64
	var note []byte
	if err := row.Scan(append([]any{&v.Version, &at, &v.Size, &v.Deleted, &note}, extra...)...); err != nil {
		return cachestore.FileVersion{}, err
	}
	v.Time, v.Note = time.Unix(0, at), string(note)
	return v, nil
}

// FileVersionContent returns one version's bytes and its description, or
// cachestore.ErrNotFound.
func (p *Store) FileVersionContent(ctx context.Context, workspace, path string, version int64) ([]byte, cachestore.FileVersion, error) {
	if err := p.enter(ctx); err != nil {
		return nil, cachestore.FileVersion{}, fmt.Errorf("reading version %d of %q: %w", version, path, unavailable(err))
	}
	defer p.leave()
	var content []byte
	row := p.pool.QueryRow(ctx, `SELECT version, time_unix_nano, size, deleted, note, content FROM file_versions
		WHERE workspace = $1 AND path = $2 AND version = $3`, b(cachestore.NormalizeWorkspace(workspace)), b(path), version)
	v, err := scanFileVersion(row, &content)
	if errors.Is(err, pgx.ErrNoRows) {
		err = cachestore.ErrNotFound
	}
	if err != nil {
		return nil, cachestore.FileVersion{}, fmt.Errorf("reading version %d of %q: %w", version, path, unavailable(err))
	}
	return nb(content), v, nil
}

// KVGet returns one record of a namespace, or cachestore.ErrNotFound.
func (p *Store) KVGet(ctx context.Context, ns, key string) ([]byte, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", ns, key, unavailable(err))
	}
	defer p.leave()
	var v []byte
	err := p.pool.QueryRow(ctx, `SELECT value FROM kv WHERE ns = $1 AND key = $2`, b(ns), b(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		err = cachestore.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", ns, key, unavailable(err))
	}
	return nb(v), nil
}

// KVPut stores one record of a namespace.
func (p *Store) KVPut(ctx context.Context, ns, key string, value []byte) error {
	if err := p.enter(ctx); err != nil {
		return fmt.Errorf("writing %s/%s: %w", ns, key, unavailable(err))
	}
	defer p.leave()
	_, err := p.pool.Exec(ctx, `INSERT INTO kv (ns, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value`, b(ns), b(key), nb(value))
	if err != nil {
		return fmt.Errorf("writing %s/%s: %w", ns, key, unavailable(err))
	}
	return nil
}

// KVCreate stores one record of a namespace when its key is free and
// returns the record the key holds afterwards (cachestore.KVCreator).
func (p *Store) KVCreate(ctx context.Context, ns, key string, value []byte) ([]byte, bool, error) {
	if err := p.enter(ctx); err != nil {
		return nil, false, fmt.Errorf("creating %s/%s: %w", ns, key, unavailable(err))
	}
	defer p.leave()
	tag, err := p.pool.Exec(ctx, `INSERT INTO kv (ns, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (ns, key) DO NOTHING`, b(ns), b(key), nb(value))
	if err != nil {
		return nil, false, fmt.Errorf("creating %s/%s: %w", ns, key, unavailable(err))
	}
	if tag.RowsAffected() == 1 {
		return bytes.Clone(value), true, nil
	}
	// The key was taken: read what holds it (a statement of its own, so it
	// sees the row the insert conflicted with).
	var v []byte
	err = p.pool.QueryRow(ctx, `SELECT value FROM kv WHERE ns = $1 AND key = $2`, b(ns), b(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("deleted while being created: %w", cachestore.ErrNotFound)
	}
	if err != nil {
		return nil, false, fmt.Errorf("creating %s/%s: %w", ns, key, unavailable(err))
	}
	return nb(v), false, nil
}

// KVDelete deletes one record of a namespace; deleting a missing key is not an error.
func (p *Store) KVDelete(ctx context.Context, ns, key string) error {
	if err := p.enter(ctx); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", ns, key, unavailable(err))
	}
	defer p.leave()
	if _, err := p.pool.Exec(ctx, `DELETE FROM kv WHERE ns = $1 AND key = $2`, b(ns), b(key)); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", ns, key, unavailable(err))
	}
	return nil
}

// KVList returns the records of a namespace whose keys start with keyPrefix, in key order.
func (p *Store) KVList(ctx context.Context, ns, keyPrefix string) ([]cachestore.KV, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("listing %s: %w", ns, unavailable(err))
	}
	defer p.leave()
	rows, err := p.pool.Query(ctx, `SELECT key, value FROM kv
		WHERE ns = $1 AND substring(key FROM 1 FOR octet_length($2::bytea)) = $2::bytea ORDER BY key`, b(ns), b(keyPrefix))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", ns, unavailable(err))
	}
	defer rows.Close()
	var out []cachestore.KV
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("listing %s: %w", ns, unavailable(err))
		}
		out = append(out, cachestore.KV{Key: string(k), Value: nb(v)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing %s: %w", ns, unavailable(err))
	}
	return out, nil
}

// AmendToolMessage replaces the committed tool message of callID (in the
// latest turn that has it) when its status is one of pending, and returns
// the amended turn; cachestore.ErrAlreadySettled when the call is no longer pending,
// cachestore.ErrNotFound when there is no such call, cachestore.ErrFenced when another writer took
// the session over.
func (p *Store) AmendToolMessage(ctx context.Context, session, callID string, pending []string, m *messages.ToolMessage) (*messages.TurnRecord, error) {
	if err := p.enter(ctx); err != nil {
		return nil, fmt.Errorf("amending call %q of session %q: %w", callID, session, unavailable(err))
	}
	defer p.leave()
	return p.amend(ctx, session, callID, pending, m, nil)
}

// lockWriter locks the row of a session that exists and checks the fence
// (cachestore.ErrNotFound for a session never written).
func (p *Store) lockWriter(ctx context.Context, tx pgx.Tx, session string) error {
	var epoch int64
	err := tx.QueryRow(ctx, `SELECT epoch FROM sessions WHERE session = $1 FOR UPDATE`, b(session)).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return cachestore.ErrNotFound
	}
	if err != nil {
		return err
	}
	return p.checkFence(session, epoch)
}

// amend amends the call's message when its status is one of pending, and
// runs also (when set) in the same transaction, fenced.
func (p *Store) amend(ctx context.Context, session, callID string, pending []string, m *messages.ToolMessage, also func(pgx.Tx) error) (*messages.TurnRecord, error) {
	var out *messages.TurnRecord
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := p.lockWriter(ctx, tx, session); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT turn, record FROM turns WHERE session = $1 ORDER BY turn DESC`, b(session))
		if err != nil {
			return err
		}
		var found *messages.TurnRecord
		idx, settled := -1, false
		for rows.Next() && found == nil {
			var turn int64
			var raw []byte
			if err := rows.Scan(&turn, &raw); err != nil {
				rows.Close()
				return err
			}
			rec := &messages.TurnRecord{}
			if err := proto.Unmarshal(raw, rec); err != nil {
				rows.Close()
				return fmt.Errorf("decoding turn %d: %w", turn, unavailable(err))
			}
			for i, tm := range rec.ToolMessages {
				switch {
				case tm.ToolCallId != callID:
				case slices.Contains(pending, tm.Status):
					found, idx = rec, i
				default:
					settled = true
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		switch {
		case found == nil && settled:
			return cachestore.ErrAlreadySettled
		case found == nil:
			return cachestore.ErrNotFound
		}
		found.ToolMessages[idx] = cachestore.AmendedMessage(found.ToolMessages[idx], m)
		raw, _, err := cachestore.MarshalValid(found)
		if err != nil {
			return fmt.Errorf("encoding turn record: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE turns SET record = $3 WHERE session = $1 AND turn = $2`, b(session), found.Turn, raw); err != nil {
			return err
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		out = found
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("amending call %q of session %q: %w", callID, session, unavailable(err))
	}
	return out, nil
}

// SetTaskLookup implements cachestore.TaskResolver.
func (p *Store) SetTaskLookup(l cachestore.TaskLookup) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tasks = l
}
