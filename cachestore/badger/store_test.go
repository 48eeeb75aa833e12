package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"google.golang.org/protobuf/testing/protocmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

func TestBadgerOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string // a substring naming the bad field; empty for valid
	}{
		{"dir", Options{Dir: "/tmp/x"}, ""},
		{"in_memory", Options{InMemory: true}, ""},
		{"test_options_dir", TestOptions("/tmp/x"), ""},
		{"test_options_in_memory", TestOptions(""), ""},
		{"zero", Options{}, "Options.Dir"},
		{"both", Options{Dir: "/tmp/x", InMemory: true}, "Options.Dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.wantErr)
			}
			if tt.wantErr != "" {
				if _, err := Open(tt.opts); err == nil {
					t.Fatalf("Open accepted invalid options")
				}
			}
		})
	}
}

func TestBadgerOptionsDefaults(t *testing.T) {
	if got := (Options{Dir: "d"}).gcInterval(); got != DefaultGCInterval {
		t.Errorf("default GC interval = %v, want %v", got, DefaultGCInterval)
	}
	if got := (Options{Dir: "d", GCInterval: -1}).gcInterval(); got != 0 {
		t.Errorf("negative GC interval = %v, want off", got)
	}
	if got := (Options{InMemory: true}).gcInterval(); got != 0 {
		t.Errorf("in-memory GC interval = %v, want off", got)
	}
	small := TestOptions("d").badgerOptions()
	if small.MemTableSize != smallMemTableSize || small.ValueThreshold != valueThreshold || small.BlockCacheSize != 0 {
		t.Errorf("small options = memtable %d, threshold %d, block cache %d", small.MemTableSize, small.ValueThreshold, small.BlockCacheSize)
	}
}

// syncBuffer is a bytes.Buffer safe for Badger's goroutines to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBadgerLogsThroughZerolog(t *testing.T) {
	buf := &syncBuffer{}
	opts := TestOptions(t.TempDir())
	opts.Logger = zerolog.New(buf).Level(zerolog.DebugLevel)
	b := mustOpen(t, opts)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `"component":"badger"`) {
		t.Fatalf("no Badger log line reached the zerolog logger:\n%s", out)
	}
	if strings.Contains(out, `\n"`) {
		t.Errorf("log messages keep Badger's trailing newline:\n%s", out)
	}

	// Above Info, Badger's start-up chatter is filtered by zerolog.
	buf = &syncBuffer{}
	opts = TestOptions(t.TempDir())
	opts.Logger = zerolog.New(buf).Level(zerolog.WarnLevel)
	b = mustOpen(t, opts)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); out != "" {
		t.Errorf("warn-level logger got:\n%s", out)
	}
}

func TestBadgerSecondOpenFails(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, TestOptions(dir))
	if b, err := Open(TestOptions(dir)); err == nil {
		_ = b.Close()
		t.Fatal("a second Open of an open directory succeeded")
	}
}

// queuedOp prepares a commit op as submit would, without queueing it.
func queuedOp(t *testing.T, b *Store, ctx context.Context, session string, rec *messages.TurnRecord) *writeOp {
	t.Helper()
	op, err := b.turnOp(session, rec)
	if err != nil {
		t.Fatal(err)
	}
	op.ctx = ctx
	op.done = make(chan error, 1)
	return op
}

// answer returns an op's answer, or fails if it got none.
func answer(t *testing.T, op *writeOp) error {
	t.Helper()
	select {
	case err := <-op.done:
		return err
	default:
		t.Fatalf("op of session %q turn %d got no answer", op.session, op.turn)
		return nil
	}
}

func nextTurn(t *testing.T, s cachestore.Store, session string) int64 {
	t.Helper()
	return storetest.LoadSession(t, s, session).NextTurn
}

func TestBadgerBatchChecksEachCommit(t *testing.T) {
	b := mustOpen(t, TestOptions(t.TempDir()))
	ctx := context.Background()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	abandoned := queuedOp(t, b, ctx, "e", storetest.Record(1, "r", "", 1))
	abandoned.state.Store(opAbandoned)
	ops := []*writeOp{
		queuedOp(t, b, ctx, "a", storetest.Record(1, "r", "", 1)),
		queuedOp(t, b, ctx, "b", storetest.Record(5, "r", "", 1)), // stale
		queuedOp(t, b, ctx, "a", storetest.Record(2, "r", "", 1)), // follows a's turn 1 in the same batch
		queuedOp(t, b, ctx, "a", storetest.Record(2, "r", "", 1)), // replay of a's turn 2
		queuedOp(t, b, canceled, "c", storetest.Record(1, "r", "", 1)),
		abandoned,
		queuedOp(t, b, ctx, "d", storetest.Record(1, "r", "", 1)),
	}
	b.processBatch(ops)
	want := []error{nil, cachestore.ErrStaleTurn, nil, cachestore.ErrStaleTurn, context.Canceled}
	for i, w := range want {
		if err := answer(t, ops[i]); !errors.Is(err, w) || (w == nil) != (err == nil) {
			t.Errorf("op %d (session %s turn %d) = %v, want %v", i, ops[i].session, ops[i].turn, err, w)
		}
	}
	select {
	case err := <-abandoned.done:
		t.Errorf("abandoned op was answered: %v", err)
	default:
	}
	if err := answer(t, ops[6]); err != nil {
		t.Errorf("op of session d = %v", err)
	}
	if got := b.stats.txns.Load(); got != 1 {
		t.Errorf("the batch took %d transactions, want 1", got)
	}
	for session, want := range map[string]int64{"a": 3, "b": 1, "c": 1, "d": 2, "e": 1} {
		if got := nextTurn(t, b, session); got != want {
			t.Errorf("session %s next turn = %d, want %d", session, got, want)
		}
	}
}

func TestBadgerBatchFailureStaysWithItsSession(t *testing.T) {
	b := mustOpen(t, TestOptions(t.TempDir()))
	ctx := context.Background()
	huge := strings.Repeat("x", 40_000) // its keys exceed Badger's key size limit
	ops := []*writeOp{
		queuedOp(t, b, ctx, "a", storetest.Record(1, "r", "", 1)),
		queuedOp(t, b, ctx, huge, storetest.Record(1, "r", "", 1)),
		queuedOp(t, b, ctx, huge, storetest.Record(2, "r", "", 1)),
		queuedOp(t, b, ctx, "b", storetest.Record(1, "r", "", 1)),
	}
	b.processBatch(ops)
	if err := answer(t, ops[0]); err != nil {
		t.Errorf("session a: %v", err)
	}
	if err := answer(t, ops[1]); err == nil {
		t.Errorf("huge session: commit of an oversized key succeeded")
	}
	if err := answer(t, ops[2]); !errors.Is(err, errEarlierFailed) {
		t.Errorf("huge session turn 2 = %v, want errEarlierFailed", err)
	}
	if err := answer(t, ops[3]); err != nil {
		t.Errorf("session b: %v", err)
	}
	for session, want := range map[string]int64{"a": 2, "b": 2} {
		if got := nextTurn(t, b, session); got != want {
			t.Errorf("session %s next turn = %d, want %d", session, got, want)
		}
	}
	// Through the public API the failure is an error, not a panic.
	err := b.CommitTurn(ctx, &cachestore.TurnCommit{Session: huge, Record: storetest.Record(1, "r", "", 1)})
	if err == nil || !strings.Contains(err.Error(), "committing turn 1 of session") {
		t.Errorf("CommitTurn of a huge session id = %v", err)
	}
}

func TestBadgerBatchSpansTransactions(t *testing.T) {
	b := mustOpen(t, TestOptions(t.TempDir()))
	ctx := context.Background()
	// Each op carries 500 run-state entries: a Small transaction holds
	// about 6500 entries, so 30 ops need a few transactions.
	var ops []*writeOp
	for i := range 30 {
		session := fmt.Sprintf("s%02d", i)
		op := queuedOp(t, b, ctx, session, storetest.Record(1, "r", "", 1))
		for j := range 500 {
			op.main = append(op.main, kv{key: fetchedKey(session, "r", fmt.Sprintf("tool-%d", j)), value: []byte{}})
		}
		ops = append(ops, op)
	}
	b.processBatch(ops)
	for i, op := range ops {
		if err := answer(t, op); err != nil {
			t.Errorf("op %d: %v", i, err)
		}
	}
	if got := b.stats.txns.Load(); got < 2 || got > 5 {
		t.Errorf("30 large commits took %d transactions, want a few", got)
	}
	for i := range ops {
		session := fmt.Sprintf("s%02d", i)
		if got := len(storetest.Turns(t, b, session)); got != 1 {
			t.Errorf("session %s has %d turns, want 1", session, got)
		}
		if got := len(storetest.LoadRun(t, b, session, "r").Fetched); got != 500 {
			t.Errorf("session %s has %d fetched marks, want 500", session, got)
		}
	}
}

func TestBadgerTxnTooBigSplitsCacheOnly(t *testing.T) {
	b := mustOpen(t, TestOptions(t.TempDir()))
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	// More entries than a Small transaction may hold.
	var cache []cachestore.CacheEntry
	for i := range 8000 {
		cache = append(cache, cachestore.CacheEntry{Key: fmt.Sprintf("k%05d", i), Value: []byte("v"), Expires: exp})
	}
	if err := b.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(1, "r", "", 2), CachePut: cache}); err != nil {
		t.Fatalf("CommitTurn with 8000 cache entries: %v", err)
	}
	if got := b.stats.splits.Load(); got != 1 {
		t.Errorf("splits = %d, want 1", got)
	}
	if got := nextTurn(t, b, "s"); got != 2 {
		t.Errorf("next turn = %d, want 2", got)
	}
	for _, i := range []int{0, 4000, 7999} {
		if _, ok := storetest.CacheGet(t, b, fmt.Sprintf("k%05d", i), time.Now()); !ok {
			t.Errorf("cache entry %d missing", i)
		}
	}

	// Run state too big for one transaction goes around the turn's
	// transaction: stale entries are deleted before it, new ones written
	// after it.
	var dedup []*cachestore.DedupEntry
	for i := range 8000 {
		dedup = append(dedup, &cachestore.DedupEntry{Key: fmt.Sprintf("d%05d", i), Tool: "t"})
	}
	err := b.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(2, "r", "", 1), DedupPut: dedup, DedupDel: []string{"d00007"}})
	if err != nil {
		t.Fatalf("CommitTurn with 8000 dedup entries: %v", err)
	}
	if got := nextTurn(t, b, "s"); got != 3 {
		t.Errorf("next turn = %d, want 3", got)
	}
	rs := storetest.LoadRun(t, b, "s", "r")
	if len(rs.Dedup) != 7999 || rs.Dedup["d00007"] != nil {
		t.Errorf("%d dedup entries (want 7999), d00007 present: %v", len(rs.Dedup), rs.Dedup["d00007"] != nil)
	}
	if got := b.stats.splits.Load(); got != 2 {
		t.Errorf("splits = %d, want 2", got)
	}
	storetest.Commit(t, b, "s", storetest.Record(3, "r", "", 1))
}

func TestBadgerCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	b := mustOpen(t, TestOptions(dir))
	ctx := context.Background()
	err := b.db.Update(func(txn *badgerdb.Txn) error {
		if err := txn.Set(metaKey("s"), []byte{0xff, 0xff, 0xff}); err != nil {
			return err
		}
		return txn.Set(intentKey("t", 1), []byte{0x0a, 0x7f})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.LoadSession(ctx, "s"); !errors.Is(err, cachestore.ErrCorrupt) {
		t.Errorf("LoadSession over corrupt meta = %v, want cachestore.ErrCorrupt", err)
	}
	if err := b.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: storetest.Record(1, "r", "", 1)}); !errors.Is(err, cachestore.ErrCorrupt) {
		t.Errorf("CommitTurn over corrupt meta = %v, want cachestore.ErrCorrupt", err)
	}
	if _, err := b.LoadSession(ctx, "t"); !errors.Is(err, cachestore.ErrCorrupt) {
		t.Errorf("LoadSession over a corrupt intent = %v, want cachestore.ErrCorrupt", err)
	}
	if _, err := b.RecoverAll(ctx); !errors.Is(err, cachestore.ErrCorrupt) {
		t.Errorf("RecoverAll over a corrupt intent = %v, want cachestore.ErrCorrupt", err)
	}
	storetest.Commit(t, b, "u", storetest.Record(1, "r", "", 1))

	// Reopening logs the bad intent and opens; other sessions work.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = mustOpen(t, TestOptions(dir))
	if _, err := b.LoadSession(ctx, "t"); !errors.Is(err, cachestore.ErrCorrupt) {
		t.Errorf("LoadSession over a corrupt intent after reopening = %v, want cachestore.ErrCorrupt", err)
	}
	if got := nextTurn(t, b, "u"); got != 2 {
		t.Errorf("session u next turn = %d, want 2", got)
	}
}

func TestBadgerGCLoopStopsOnClose(t *testing.T) {
	opts := TestOptions(t.TempDir())
	opts.GCInterval = time.Millisecond
	b := mustOpen(t, opts)
	for turn := int64(1); turn <= 50; turn++ {
		storetest.Commit(t, b, "s", storetest.Record(turn, "r", "", 10))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// goleak (TestMain) checks that the GC and committer goroutines ended.
}

func TestCodecRoundTrip(t *testing.T) {
	in := storetest.CrashIntent("s/1", 7)
	raw, err := cachestore.EncodeIntent(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cachestore.DecodeIntent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got, protocmp.Transform()); diff != "" {
		t.Errorf("intent round trip (-want +got):\n%s", diff)
	}
	empty := &cachestore.Intent{Session: "s", Turn: 1, Names: []string{"", "a"}, IDs: []string{"", ""}, Started: []int{0}}
	raw, err = cachestore.EncodeIntent(empty)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = cachestore.DecodeIntent(raw); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(empty, got, protocmp.Transform()); diff != "" {
		t.Errorf("intent with empty strings (-want +got):\n%s", diff)
	}

	e := &cachestore.DedupEntry{Key: "k", Tool: "read_files", Content: "c", Paths: []string{"a", ""}, StaleOnMutation: true}
	gotE, err := cachestore.DecodeDedup(cachestore.EncodeDedup(e))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e, gotE); diff != "" {
		t.Errorf("dedup round trip (-want +got):\n%s", diff)
	}

	v := cachestore.FileVersion{Version: 3, Time: time.Unix(0, 1_700_000_000_123_456_789), Size: 10, Deleted: true, Note: "remove_file"}
	gotV, err := decodeFileVersion(encodeFileVersion(v))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v, gotV); diff != "" {
		t.Errorf("file version round trip (-want +got):\n%s", diff)
	}

	exp := time.Unix(0, 1_700_000_000_000_000_001)
	val, at, has, err := decodeCache(encodeCache(cachestore.CacheEntry{Key: "k", Value: []byte("v"), Expires: exp}))
	if err != nil || string(val) != "v" || at != exp.UnixNano() || !has {
		t.Errorf("cache round trip = %q, %d, %v, %v", val, at, has, err)
	}
	if _, _, has, _ := decodeCache(encodeCache(cachestore.CacheEntry{Key: "k"})); has {
		t.Errorf("cache entry without expiry decoded with one")
	}
}

// FuzzDecode checks that no stored bytes make a decoder panic.
func FuzzDecode(f *testing.F) {
	raw, _ := cachestore.EncodeIntent(storetest.CrashIntent("s", 1))
	f.Add(raw)
	f.Add(cachestore.EncodeDedup(&cachestore.DedupEntry{Key: "k", Paths: []string{"a"}}))
	f.Add(encodeNumber(42))
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = cachestore.DecodeIntent(b)
		_, _ = cachestore.DecodeDedup(b)
		_, _ = decodeNumber(b)
		_, _, _, _ = decodeCache(b)
		_, _ = decodeFileVersion(b)
	})
}
