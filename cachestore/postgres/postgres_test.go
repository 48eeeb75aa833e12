package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

// PostgreSQL tests run against the server in TOOLDISPATCH_PG_URL or, when
// it is unset, a throwaway one started through scripts/pg-test-server.sh
// (stopped by the script's watcher when the test binary exits). Without
// either (or with TOOLDISPATCH_PG_URL=skip) they skip. Each test gets its
// own schema.

const pgSkipMessage = "PostgreSQL not installed: .ci/run installs the postgresql package " +
	"(or set TOOLDISPATCH_PG_URL)"

// TestContract runs the cachestore.Store contract against PostgreSQL.
func TestContract(t *testing.T) { storetest.Run(t, openPostgresForTest) }

// TestBigTurnsCommit: PostgreSQL takes turns at the dispatcher's limits.
func TestBigTurnsCommit(t *testing.T) { storetest.RunBig(t, openPostgresForTest) }

var pgServer struct {
	once sync.Once
	url  string
	err  error
}

// pgScript is the path of scripts/pg-test-server.sh.
func pgScript() string {
	p, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "pg-test-server.sh"))
	return p
}

// pgInstalled reports whether the PostgreSQL server binaries are there
// (TOOLDISPATCH_PG_URL=skip says they are not).
func pgInstalled() bool {
	if os.Getenv("TOOLDISPATCH_PG_URL") == "skip" {
		return false
	}
	if os.Getenv("PG_BIN") != "" {
		return true
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) > 0 {
		return true
	}
	_, err := exec.LookPath("pg_ctl")
	return err == nil
}

// startPgServer starts a throwaway server and returns its URL and dir.
func startPgServer() (url, dir string, err error) {
	out, err := exec.Command(pgScript(), "start", "--watch", fmt.Sprint(os.Getpid())).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", "", fmt.Errorf("starting PostgreSQL with %s: %w", pgScript(), err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return "", "", fmt.Errorf("unexpected output of %s: %q", pgScript(), out)
	}
	return lines[0], lines[1], nil
}

// pgURL returns the URL of the shared test server, or skips the test.
func pgURL(t testing.TB) string {
	t.Helper()
	pgServer.once.Do(func() {
		if u := os.Getenv("TOOLDISPATCH_PG_URL"); u != "" && u != "skip" {
			pgServer.url = u
			return
		}
		if !pgInstalled() {
			return
		}
		pgServer.url, _, pgServer.err = startPgServer()
	})
	if pgServer.err != nil {
		t.Fatal(pgServer.err)
	}
	if pgServer.url == "" {
		t.Skip(pgSkipMessage)
	}
	return pgServer.url
}

var pgSchemaSeq atomic.Int64

// withSearchPath adds search_path=schema to a connection URL.
func withSearchPath(url, schema string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema
}

// pgSchema creates a fresh schema on the server at base, dropped when the
// test ends, and returns a URL that uses it.
func pgSchema(t testing.TB, base string) string {
	t.Helper()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), pgSchemaSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to %s: %v", base, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return // the server is gone (a test's own server)
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
	})
	return withSearchPath(base, name)
}

func mustOpenPostgres(t testing.TB, url string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Open(ctx, Options{URL: url, Logger: zerolog.Nop(), MaxConns: 8})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// openPostgresForTest opens a store in a fresh schema; its restart closes
// it and opens another Postgres value on the same schema (a new process)
// which runs RecoverAll, as the other stores' restarts recover.
func openPostgresForTest(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	url := pgSchema(t, pgURL(t))
	p := mustOpenPostgres(t, url)
	return p, func() cachestore.Store {
		t.Helper()
		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		p = mustOpenPostgres(t, url)
		if _, err := p.RecoverAll(context.Background()); err != nil {
			t.Fatalf("RecoverAll: %v", err)
		}
		return p
	}
}

// countRows returns the number of rows of a table for a session.
func countRows(t *testing.T, url, table, session string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE session = $1", []byte(session)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPostgresFencing: two members load the same session; the one that
// loaded first is fenced on every write and writes nothing.
func TestPostgresFencing(t *testing.T) {
	url := pgSchema(t, pgURL(t))
	a, b := mustOpenPostgres(t, url), mustOpenPostgres(t, url)
	ctx := context.Background()

	if st := storetest.LoadSession(t, a, "s"); st.NextTurn != 1 {
		t.Fatalf("A: NextTurn = %d, want 1", st.NextTurn)
	}
	pending := storetest.Record(1, "r", "tid-1", 1)
	pending.ToolMessages[0].Status = "client_pending"
	storetest.Commit(t, a, "s", pending)

	// B takes the session over (A was partitioned away, say).
	if st := storetest.LoadSession(t, b, "s"); st.NextTurn != 2 {
		t.Fatalf("B: NextTurn = %d, want 2", st.NextTurn)
	}
	ea, _ := a.Epoch("s")
	eb, _ := b.Epoch("s")
	if eb <= ea {
		t.Fatalf("B's epoch %d is not newer than A's %d", eb, ea)
	}

	err := a.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(2, "r", "tid-a", 1),
		FetchedAdd: []string{"t"}, CachePut: []cachestore.CacheEntry{{Key: "from-a", Value: []byte("x")}}})
	if !errors.Is(err, cachestore.ErrFenced) {
		t.Fatalf("A's CommitTurn after B's LoadSession = %v, want cachestore.ErrFenced", err)
	}
	if err := a.WriteIntent(ctx, storetest.CrashIntent("s", 2)); !errors.Is(err, cachestore.ErrFenced) {
		t.Errorf("A's WriteIntent = %v, want cachestore.ErrFenced", err)
	}
	_, err = a.AmendToolMessage(ctx, "s", "call_1_0", []string{"client_pending"}, &messages.ToolMessage{ToolCallId: "call_1_0", Status: "ok"})
	if !errors.Is(err, cachestore.ErrFenced) {
		t.Errorf("A's AmendToolMessage = %v, want cachestore.ErrFenced", err)
	}
	// Nothing of A's refused writes is there.
	if n := countRows(t, url, "turns", "s"); n != 1 {
		t.Errorf("%d turn rows after A's fenced commit, want 1", n)
	}
	if n := countRows(t, url, "intents", "s"); n != 0 {
		t.Errorf("%d intent rows after A's fenced WriteIntent, want 0", n)
	}
	if _, ok := storetest.CacheGet(t, b, "from-a", time.Now()); ok {
		t.Errorf("A's fenced commit wrote its cache entry")
	}
	if rs := storetest.LoadRun(t, b, "s", "r"); len(rs.Fetched) != 0 {
		t.Errorf("A's fenced commit wrote run state: %+v", rs)
	}
	if got := storetest.Turns(t, b, "s"); got[0].ToolMessages[0].Status != "client_pending" {
		t.Errorf("A's fenced amend changed the turn: %v", got[0].ToolMessages[0])
	}

	// B writes.
	storetest.Commit(t, b, "s", storetest.Record(2, "r", "tid-b", 1))
	if _, err := b.AmendToolMessage(ctx, "s", "call_1_0", []string{"client_pending"},
		&messages.ToolMessage{Role: "tool", ToolCallId: "call_1_0", Status: "ok", Content: "done"}); err != nil {
		t.Fatalf("B's AmendToolMessage: %v", err)
	}

	// A loading again takes the session back and fences B in turn.
	if st := storetest.LoadSession(t, a, "s"); st.NextTurn != 3 {
		t.Fatalf("A reloaded: NextTurn = %d, want 3", st.NextTurn)
	}
	if err := b.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(3, "r", "", 1)}); !errors.Is(err, cachestore.ErrFenced) {
		t.Errorf("B's CommitTurn after A took over again = %v, want cachestore.ErrFenced", err)
	}
	storetest.Commit(t, a, "s", storetest.Record(3, "r", "", 1))

	// A process that never loaded the session cannot write it once loaded.
	c := mustOpenPostgres(t, url)
	if err := c.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(4, "r", "", 1)}); !errors.Is(err, cachestore.ErrFenced) {
		t.Errorf("CommitTurn of a member that never loaded the session = %v, want cachestore.ErrFenced", err)
	}
	if n := countRows(t, url, "turns", "s"); n != 3 {
		t.Errorf("%d turn rows, want 3", n)
	}
}

// TestPostgresFencingRace: two members load and commit the same session
// concurrently; every turn number is committed once, by one of them, and
// each refused write is cachestore.ErrFenced or cachestore.ErrStaleTurn.
func TestPostgresFencingRace(t *testing.T) {
	url := pgSchema(t, pgURL(t))
	members := []*Store{mustOpenPostgres(t, url), mustOpenPostgres(t, url)}
	ctx := context.Background()
	var wg sync.WaitGroup
	var committed atomic.Int64
	for i, m := range members {
		wg.Go(func() {
			for range 20 {
				st, err := m.LoadSession(ctx, "s")
				if err != nil {
					t.Error(err)
					return
				}
				err = m.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(st.NextTurn, "r", fmt.Sprintf("m%d-%d", i, st.NextTurn), 1)})
				switch {
				case err == nil:
					committed.Add(1)
				case errors.Is(err, cachestore.ErrFenced), errors.Is(err, cachestore.ErrStaleTurn):
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	got := storetest.Turns(t, members[0], "s")
	if int64(len(got)) != committed.Load() {
		t.Errorf("%d turns stored, %d commits succeeded", len(got), committed.Load())
	}
	for i, rec := range got {
		if rec.Turn != int64(i+1) {
			t.Errorf("turn %d stored as %d", i+1, rec.Turn)
		}
	}
}

// TestPostgresTurnIDIdempotent: a retried commit never duplicates a turn.
func TestPostgresTurnIDIdempotent(t *testing.T) {
	url := pgSchema(t, pgURL(t))
	p := mustOpenPostgres(t, url)
	ctx := context.Background()
	storetest.LoadSession(t, p, "s")
	c := &cachestore.TurnCommit{Session: "s", Record: storetest.Record(1, "r", "tid", 2)}
	if err := p.CommitTurn(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTurn(ctx, c); !errors.Is(err, cachestore.ErrStaleTurn) {
		t.Errorf("retried commit = %v, want cachestore.ErrStaleTurn", err)
	}
	// The same turn id under the next turn number is refused as well.
	if err := p.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(2, "r", "tid", 2)}); !errors.Is(err, cachestore.ErrStaleTurn) {
		t.Errorf("commit reusing a turn id = %v, want cachestore.ErrStaleTurn", err)
	}
	if n := countRows(t, url, "turns", "s"); n != 1 {
		t.Errorf("%d turn rows, want 1", n)
	}
	if st := storetest.LoadSession(t, p, "s"); st.NextTurn != 2 {
		t.Errorf("NextTurn = %d, want 2", st.NextTurn)
	}
	// Another session may use the same turn id.
	storetest.Commit(t, p, "other", storetest.Record(1, "r", "tid", 1))
}

// TestPostgresMigrationsConcurrent: members opening a new database together
// apply each migration once; opening again applies nothing.
func TestPostgresMigrationsConcurrent(t *testing.T) {
	url := pgSchema(t, pgURL(t))
	ms, err := pgMigrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("pgMigrations = %v, %v", ms, err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			p, err := Open(context.Background(), Options{URL: url, MaxConns: 2})
			if err != nil {
				t.Error(err)
				return
			}
			_ = p.Close()
		})
	}
	wg.Wait()
	p := mustOpenPostgres(t, url)
	ctx := context.Background()
	var n, maxVersion int64
	if err := p.pool.QueryRow(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &maxVersion); err != nil {
		t.Fatal(err)
	}
	if n != int64(len(ms)) || maxVersion != ms[len(ms)-1].version {
		t.Errorf("schema_migrations has %d rows up to %d, want %d up to %d", n, maxVersion, len(ms), ms[len(ms)-1].version)
	}
	storetest.Commit(t, p, "s", storetest.Record(1, "r", "", 1))
}

// isConnectionError reports whether err comes from a lost or refused
// connection to the server.
func isConnectionError(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		pgconn.SafeToRetry(err) || // pgconn's "conn closed" after the connection broke
		(errors.As(err, &pe) && strings.HasPrefix(pe.Code, "57P")) // admin shutdown, crash shutdown, cannot connect now
}

// TestPostgresServerRestart: the server stops between two commits; the
// commit during the outage fails with the connection error and writes
// nothing, the next one after the server is back succeeds.
func TestPostgresServerRestart(t *testing.T) {
	if !pgInstalled() {
		t.Skip(pgSkipMessage)
	}
	base, dir, err := startPgServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command(pgScript(), "stop", dir).Run() })
	url := pgSchema(t, base)
	p := mustOpenPostgres(t, url)
	ctx := context.Background()
	storetest.LoadSession(t, p, "s")
	storetest.Commit(t, p, "s", storetest.Record(1, "r", "tid-1", 1))

	if out, err := exec.Command(pgScript(), "down", dir).CombinedOutput(); err != nil {
		t.Fatalf("stopping the server: %v: %s", err, out)
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c := &cachestore.TurnCommit{Session: "s", Record: storetest.Record(2, "r", "tid-2", 1), FetchedAdd: []string{"t"},
		DedupPut: []*cachestore.DedupEntry{{Key: "k", Tool: "t"}}, CachePut: []cachestore.CacheEntry{{Key: "c", Value: []byte("v")}}}
	t0 := time.Now()
	err = p.CommitTurn(tctx, c)
	cancel()
	t.Logf("outage commit took %v", time.Since(t0))
	for e := err; e != nil; e = errors.Unwrap(e) {
		t.Logf("  %T: %v", e, e)
	}
	if err == nil || errors.Is(err, cachestore.ErrStaleTurn) || errors.Is(err, cachestore.ErrFenced) {
		t.Fatalf("CommitTurn during the outage = %v, want a connection error", err)
	}
	if !errors.Is(err, ErrUnavailable) || !isConnectionError(err) {
		t.Errorf("CommitTurn during the outage = %v (%T), want ErrUnavailable wrapping the connection failure", err, errors.Unwrap(err))
	}
	t.Logf("commit during the outage: %v", err)

	if out, err := exec.Command(pgScript(), "up", dir).CombinedOutput(); err != nil {
		t.Fatalf("starting the server again: %v: %s", err, out)
	}
	if n := countRows(t, url, "turns", "s"); n != 1 {
		t.Fatalf("%d turn rows after the failed commit, want 1", n)
	}
	if rs := storetest.LoadRun(t, p, "s", "r"); len(rs.Fetched)+len(rs.Dedup) != 0 {
		t.Errorf("the failed commit left run state: %+v", rs)
	}
	if _, ok := storetest.CacheGet(t, p, "c", time.Now()); ok {
		t.Errorf("the failed commit left its cache entry")
	}
	if err := p.CommitTurn(ctx, c); err != nil {
		t.Fatalf("CommitTurn after the server is back: %v", err)
	}
	if got := storetest.Turns(t, p, "s"); len(got) != 2 || got[1].TurnId != "tid-2" {
		t.Errorf("turns after restart = %v, want 2", got)
	}
	if st := storetest.LoadSession(t, p, "s"); st.NextTurn != 3 {
		t.Errorf("NextTurn = %d, want 3", st.NextTurn)
	}
}

// TestPostgresDeadMemberIntent: a member dies (or is cut off) with an
// intent written; the member that activates the session next resolves it
// (started calls read outcome_unknown) and the old one is fenced.
func TestPostgresDeadMemberIntent(t *testing.T) {
	url := pgSchema(t, pgURL(t))
	dead, survivor := mustOpenPostgres(t, url), mustOpenPostgres(t, url)
	ctx := context.Background()
	storetest.LoadSession(t, dead, "s")
	storetest.Commit(t, dead, "s", storetest.Record(1, "r1", "", 1))
	if err := dead.WriteIntent(ctx, storetest.CrashIntent("s", 2)); err != nil {
		t.Fatal(err)
	}
	if st := storetest.LoadSession(t, survivor, "s"); st.NextTurn != 3 {
		t.Fatalf("NextTurn on the survivor = %d, want 3", st.NextTurn)
	}
	got := storetest.Turns(t, survivor, "s")
	if diff := storetest.DiffTurns([]*messages.TurnRecord{storetest.ResolvedCrashIntent(2)}, got[1:], storetest.IgnoreTime); diff != "" {
		t.Errorf("resolved turn (-want +got):\n%s", diff)
	}
	if n := countRows(t, url, "intents", "s"); n != 0 {
		t.Errorf("%d intents left, want 0", n)
	}
	// The "dead" member comes back and tries to commit the turn it was running.
	err := dead.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(2, "r1", "tid-crash", 4)})
	if !errors.Is(err, cachestore.ErrFenced) {
		t.Errorf("commit of the returning member = %v, want cachestore.ErrFenced", err)
	}
	storetest.Commit(t, survivor, "s", storetest.Record(3, "r1", "", 1))
}

// TestPostgresKVAndAmend covers the methods the contract suite does not.
func TestPostgresKVAndAmend(t *testing.T) {
	url := pgSchema(t, pgURL(t))
	p := mustOpenPostgres(t, url)
	ctx := context.Background()
	for _, k := range []string{"b", "a/1", "a/2", "a\x00x", "c"} {
		if err := p.KVPut(ctx, "ns", k, []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.KVPut(ctx, "other", "a/3", nil); err != nil {
		t.Fatal(err)
	}
	list, err := p.KVList(ctx, "ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range list {
		keys = append(keys, kv.Key)
	}
	if strings.Join(keys, ",") != "a\x00x,a/1,a/2" { // byte order
		t.Errorf("KVList(a) = %q", keys)
	}
	if v, err := p.KVGet(ctx, "other", "a/3"); err != nil || v == nil || len(v) != 0 {
		t.Errorf("KVGet of an empty value = %q, %v", v, err)
	}
	if err := p.KVDelete(ctx, "ns", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.KVGet(ctx, "ns", "b"); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("KVGet of a deleted key = %v, want cachestore.ErrNotFound", err)
	}

	storetest.LoadSession(t, p, "s")
	rec := storetest.Record(1, "r", "", 2)
	rec.ToolMessages[1].Status = "client_pending"
	storetest.Commit(t, p, "s", rec)
	m := &messages.ToolMessage{Role: "tool", ToolCallId: "call_1_1", Status: "ok", Content: "client result"}
	got, err := p.AmendToolMessage(ctx, "s", "call_1_1", []string{"client_pending"}, m)
	if err != nil || got.ToolMessages[1].Content != "client result" {
		t.Fatalf("AmendToolMessage = %v, %v", got, err)
	}
	if ts := storetest.Turns(t, p, "s"); ts[0].ToolMessages[1].Content != "client result" {
		t.Errorf("amended message not stored: %v", ts[0].ToolMessages[1])
	}
	if _, err := p.AmendToolMessage(ctx, "s", "call_1_1", []string{"client_pending"}, m); !errors.Is(err, cachestore.ErrAlreadySettled) {
		t.Errorf("second amend = %v, want cachestore.ErrAlreadySettled", err)
	}
	if _, err := p.AmendToolMessage(ctx, "s", "nope", []string{"client_pending"}, m); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("amend of an unknown call = %v, want cachestore.ErrNotFound", err)
	}
	if _, err := p.AmendToolMessage(ctx, "unknown", "x", nil, m); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("amend in an unknown session = %v, want cachestore.ErrNotFound", err)
	}
	if err := p.CachePut(ctx, cachestore.CacheEntry{Key: "old", Value: []byte("x"), Expires: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := p.PurgeCache(ctx, time.Now()); err != nil || n != 1 {
		t.Errorf("PurgeCache = %d, %v; want 1", n, err)
	}
}

// writeOldApprovals writes c's turn and approvals as a store did before
// the index of what waits existed (migrations up to 0003): the turn, the
// session's next turn and the approvals' rows, and nothing else.
func writeOldApprovals(t *testing.T, url string, c *cachestore.TurnCommit) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (session) VALUES ($1) ON CONFLICT DO NOTHING`, b(c.Session)); err != nil {
			return err
		}
		if err := insertTurn(ctx, tx, c.Session, c.Record, c.Record.TurnId); err != nil {
			return err
		}
		for _, a := range c.Approvals {
			if _, err := tx.Exec(ctx, `INSERT INTO approvals (session, call_id, record) VALUES ($1, $2, $3)`,
				b(a.Session), b(a.CallID), cachestore.EncodeApproval(a)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWaitingIndexOfAnOldStore: approvals a database kept before the
// index of what waits existed (schema 0003) are listed once a store opens
// it (migration 0004, then the reconciliation), with their turns' ids,
// count toward the cap and are settled as the others; an approval written
// or settled by a member that does not keep the index is reconciled at
// the next open.
func TestWaitingIndexOfAnOldStore(t *testing.T) {
	url := pgSchema(t, pgURL(t))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	err = migrate(ctx, pool, zerolog.Nop(), 3)
	pool.Close()
	if err != nil {
		t.Fatal(err)
	}
	asked := time.Unix(1_700_000_000, 0).UTC()
	writeOldApprovals(t, url, storetest.DeferredTurn("s1", "r", 1, 3, asked, 20))
	writeOldApprovals(t, url, storetest.DeferredTurn("s2", "r", 1, 2, asked.Add(time.Second), 20))

	p := mustOpenPostgres(t, url)
	got, _ := storetest.ListAll(t, p, cachestore.WaitingQuery{Limit: 2})
	if len(got) != 5 || got[0].Session != "s1" || got[0].TurnID != "tid-s1-1" || got[4].Session != "s2" || got[4].Diff == "" {
		t.Fatalf("an old store's approvals listed as %d entries (first %+v), want the 5 with their turn ids", len(got), got)
	}
	over := storetest.DeferredTurn("s3", "r", 1, 1, asked, 0)
	over.MaxWaiting = 5
	if err := p.CommitTurn(ctx, over); !errors.Is(err, cachestore.ErrWaitingCap) {
		t.Errorf("a commit past a cap of 5 with the old store's 5 waiting = %v, want ErrWaitingCap", err)
	}
	storetest.LoadSession(t, p, "s1")
	m := &messages.ToolMessage{Role: "tool", ToolCallId: "call_1_1", Status: "skipped", Content: "denied"}
	if _, err := p.SettleApproval(ctx, "s1", "call_1_1", m); err != nil {
		t.Fatalf("SettleApproval of an old approval: %v", err)
	}
	if err := p.CommitTurn(ctx, over); err != nil {
		t.Errorf("a commit into the room its settlement made: %v", err)
	}

	// A member that does not keep the index writes one approval and
	// settles another.
	writeOldApprovals(t, url, storetest.DeferredTurn("s4", "r", 1, 1, asked.Add(time.Hour), 0))
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `DELETE FROM approvals WHERE session = $1 AND call_id = $2`, b("s2"), b("call_1_0"))
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p2 := mustOpenPostgres(t, url)
	got, _ = storetest.ListAll(t, p2, cachestore.WaitingQuery{})
	var ids []string
	for _, w := range got {
		ids = append(ids, w.Session+"/"+w.CallID)
	}
	if want := "[s1/call_1_0 s3/call_1_0 s1/call_1_2 s2/call_1_1 s4/call_1_0]"; fmt.Sprint(ids) != want {
		t.Errorf("after a member that does not keep the index wrote, the index lists %v, want %s", ids, want)
	}
	over = storetest.DeferredTurn("s5", "r", 1, 1, asked, 0)
	over.MaxWaiting = 5
	if err := p2.CommitTurn(ctx, over); !errors.Is(err, cachestore.ErrWaitingCap) {
		t.Errorf("a commit past a cap of 5 with 5 waiting after the reconciliation = %v, want ErrWaitingCap", err)
	}
}
