package cachestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/tooldispatch/tooldispatch/messages"
)

// opener opens a fresh store for one test and returns it with a restart
// function that simulates a process restart: Badger on disk closes and
// reopens its directory (which recovers intents), the others run RecoverAll.
type opener func(t *testing.T) (Store, func() Store)

var storeImpls = []struct {
	name string
	open opener
}{
	{"badger", openBadgerForTest},
	{"badger_in_memory", func(t *testing.T) (Store, func() Store) {
		return recoverOnRestart(t, mustOpenBadger(t, TestOptions("")))
	}},
	{"memory", func(t *testing.T) (Store, func() Store) {
		return recoverOnRestart(t, NewMemory())
	}},
}

func mustOpenBadger(t testing.TB, opts BadgerOptions) *Badger {
	t.Helper()
	b, err := OpenBadger(opts)
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func openBadgerForTest(t *testing.T) (Store, func() Store) {
	dir := t.TempDir()
	s := mustOpenBadger(t, TestOptions(dir))
	return s, func() Store {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		s = mustOpenBadger(t, TestOptions(dir))
		return s
	}
}

func recoverOnRestart(t *testing.T, s Store) (Store, func() Store) {
	t.Cleanup(func() { _ = s.Close() })
	return s, func() Store {
		t.Helper()
		if _, err := s.RecoverAll(context.Background()); err != nil {
			t.Fatalf("RecoverAll: %v", err)
		}
		return s
	}
}

// TestContract runs the Store contract against every implementation.
func TestContract(t *testing.T) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open opener)
	}{
		{"commit_and_reload", testCommitAndReload},
		{"stale_turn", testStaleTurn},
		{"intent_resolution", testIntentResolution},
		{"intent_replaced", testIntentReplaced},
		{"commit_deletes_intent", testCommitDeletesIntent},
		{"recover_all_on_restart", testRecoverAllOnRestart},
		{"turn_by_id", testTurnByID},
		{"run_state", testRunState},
		{"cache_expiry", testCacheExpiry},
		{"cache_in_commit", testCacheInCommit},
		{"file_versions", testFileVersions},
		{"file_versions_concurrent", testFileVersionsConcurrent},
		{"ids_do_not_collide", testIDsDoNotCollide},
		{"concurrent_sessions", testConcurrentSessions},
		{"canceled_context", testCanceledContext},
		{"no_aliasing", testNoAliasing},
		{"close", testClose},
	}
	for _, impl := range storeImpls {
		t.Run(impl.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) { tt.fn(t, impl.open) })
			}
		})
	}
}

// record builds a turn record with n calls that all succeeded.
func record(turn int64, run, turnID string, n int) *messages.TurnRecord {
	rec := &messages.TurnRecord{
		Turn:         turn,
		Run:          run,
		TurnId:       turnID,
		Provider:     "openai",
		TimeUnixNano: 1_700_000_000_000_000_000 + turn,
		Assistant:    &messages.AssistantMessage{Role: "assistant", Content: fmt.Sprintf("turn %d", turn)},
	}
	for i := range n {
		id := fmt.Sprintf("call_%d_%d", turn, i)
		rec.Assistant.ToolCalls = append(rec.Assistant.ToolCalls, &messages.ToolCall{
			Id: id, Type: "function",
			Function: &messages.FunctionCall{Name: "read_files", Arguments: `{"paths":["a.txt"]}`},
		})
		rec.ToolMessages = append(rec.ToolMessages, &messages.ToolMessage{
			Role: "tool", ToolCallId: id, Name: "read_files", Status: "ok",
			Content: fmt.Sprintf("content of turn %d call %d", turn, i),
		})
	}
	return rec
}

func commit(t *testing.T, s Store, session string, rec *messages.TurnRecord) {
	t.Helper()
	if err := s.CommitTurn(context.Background(), &TurnCommit{Session: session, Record: rec}); err != nil {
		t.Fatalf("CommitTurn(%q, %d): %v", session, rec.Turn, err)
	}
}

func turns(t *testing.T, s Store, session string) []*messages.TurnRecord {
	t.Helper()
	got, err := s.Turns(context.Background(), session)
	if err != nil {
		t.Fatalf("Turns(%q): %v", session, err)
	}
	return got
}

func loadSession(t *testing.T, s Store, session string) SessionState {
	t.Helper()
	st, err := s.LoadSession(context.Background(), session)
	if err != nil {
		t.Fatalf("LoadSession(%q): %v", session, err)
	}
	return st
}

// ignoreTime ignores the time of turn records (recovered turns get the
// time of their recovery).
var ignoreTime = protocmp.IgnoreFields(&messages.TurnRecord{}, "time_unix_nano")

func diffTurns(want, got []*messages.TurnRecord, opts ...cmp.Option) string {
	return cmp.Diff(want, got, append([]cmp.Option{protocmp.Transform(), cmpopts.EquateEmpty()}, opts...)...)
}

func testCommitAndReload(t *testing.T, open opener) {
	s, restart := open(t)
	ctx := context.Background()
	if st := loadSession(t, s, "s1"); st.NextTurn != 1 {
		t.Fatalf("NextTurn of a new session = %d, want 1", st.NextTurn)
	}
	var want []*messages.TurnRecord
	for turn := int64(1); turn <= 3; turn++ {
		rec := record(turn, "r1", fmt.Sprintf("tid-%d", turn), int(turn))
		want = append(want, record(turn, "r1", fmt.Sprintf("tid-%d", turn), int(turn)))
		commit(t, s, "s1", rec)
	}
	s = restart()
	if diff := diffTurns(want, turns(t, s, "s1")); diff != "" {
		t.Errorf("Turns after restart (-want +got):\n%s", diff)
	}
	if st := loadSession(t, s, "s1"); st.NextTurn != 4 {
		t.Errorf("NextTurn after restart = %d, want 4", st.NextTurn)
	}
	sessions, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"s1"}, sessions); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}
	if got := turns(t, s, "unknown"); got == nil || len(got) != 0 {
		t.Errorf("Turns of an unknown session = %#v, want empty and non-nil", got)
	}
}

func testStaleTurn(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	tests := []struct {
		name string
		turn int64
		want error
	}{
		{"turn_2_before_1", 2, ErrStaleTurn},
		{"turn_0", 0, ErrStaleTurn},
		{"turn_1", 1, nil},
		{"turn_1_again", 1, ErrStaleTurn},
		{"turn_3_skips_2", 3, ErrStaleTurn},
		{"turn_2", 2, nil},
	}
	for _, tt := range tests {
		err := s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: record(tt.turn, "r", "", 1)})
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: CommitTurn = %v, want %v", tt.name, err, tt.want)
		}
	}
	for _, turn := range []int64{1, 2, 4} {
		err := s.WriteIntent(ctx, &Intent{Session: "s", Turn: turn})
		if !errors.Is(err, ErrStaleTurn) {
			t.Errorf("WriteIntent(turn %d) with next turn 3 = %v, want ErrStaleTurn", turn, err)
		}
	}
	if got := len(turns(t, s, "s")); got != 2 {
		t.Errorf("%d turns committed, want 2", got)
	}
	if st := loadSession(t, s, "s"); st.NextTurn != 3 {
		t.Errorf("NextTurn = %d, want 3", st.NextTurn)
	}
}

// crashIntent is an intent of a 4-call turn: call 1 was decided in pass 1,
// calls 0 and 3 may have started, call 2 had not.
func crashIntent(session string, turn int64) *Intent {
	return &Intent{
		Session:  session,
		Turn:     turn,
		Run:      "r1",
		TurnID:   "tid-crash",
		Provider: "claude-code",
		Assistant: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
			{Id: "c0", Type: "function", Function: &messages.FunctionCall{Name: "run_command", Arguments: `{"cmd":"make"}`}},
			{Id: "c1", Type: "function", Function: &messages.FunctionCall{Name: "nope", Arguments: `{}`}},
			{Id: "c2", Type: "function", Function: &messages.FunctionCall{Name: "edit_file", Arguments: `{}`}},
			{Id: "c3", Type: "function", Function: &messages.FunctionCall{Name: "read_files", Arguments: `{}`}},
		}},
		Decided: map[int]*messages.ToolMessage{
			1: {Role: "tool", ToolCallId: "c1", Name: "nope", Status: "unknown_tool", Content: "unknown tool nope"},
		},
		Started:   []int{0, 3},
		Names:     []string{"run_command", "nope", "edit_file", "read_files"},
		IDs:       []string{"c0", "c1", "c2", "c3"},
		CallsHash: "hash-of-the-calls",
	}
}

// resolvedCrashIntent is the turn record crashIntent resolves to.
func resolvedCrashIntent(turn int64) *messages.TurnRecord {
	in := crashIntent("", turn)
	return &messages.TurnRecord{
		Turn: turn, Run: "r1", TurnId: "tid-crash", Provider: "claude-code", Assistant: in.Assistant, CallsHash: "hash-of-the-calls",
		ToolMessages: []*messages.ToolMessage{
			{Role: "tool", ToolCallId: "c0", Name: "run_command", Status: "outcome_unknown",
				Content: "outcome unknown: the dispatcher stopped while this call was running; it may or may not have taken effect. Check its effect before calling it again."},
			{Role: "tool", ToolCallId: "c1", Name: "nope", Status: "unknown_tool", Content: "unknown tool nope"},
			{Role: "tool", ToolCallId: "c2", Name: "edit_file", Status: "canceled",
				Content: "canceled: the dispatcher stopped before this call started; it did not run."},
			{Role: "tool", ToolCallId: "c3", Name: "read_files", Status: "outcome_unknown",
				Content: "outcome unknown: the dispatcher stopped while this call was running; it may or may not have taken effect. Check its effect before calling it again."},
		},
	}
}

func testIntentResolution(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	commit(t, s, "s", record(1, "r1", "", 1))
	if err := s.WriteIntent(ctx, crashIntent("s", 2)); err != nil {
		t.Fatalf("WriteIntent: %v", err)
	}
	if st := loadSession(t, s, "s"); st.NextTurn != 3 {
		t.Errorf("NextTurn after resolving = %d, want 3", st.NextTurn)
	}
	want := []*messages.TurnRecord{record(1, "r1", "", 1), resolvedCrashIntent(2)}
	got := turns(t, s, "s")
	if diff := diffTurns(want, got, ignoreTime); diff != "" {
		t.Errorf("Turns (-want +got):\n%s", diff)
	}
	if got[1].GetTimeUnixNano() == 0 {
		t.Errorf("resolved turn has no time")
	}
	rec, err := s.TurnByID(ctx, "s", "tid-crash")
	if err != nil {
		t.Fatalf("TurnByID of the resolved turn: %v", err)
	}
	if diff := diffTurns(want[1:], []*messages.TurnRecord{rec}, ignoreTime); diff != "" {
		t.Errorf("TurnByID (-want +got):\n%s", diff)
	}
	// Resolved once: loading again adds nothing.
	if st := loadSession(t, s, "s"); st.NextTurn != 3 {
		t.Errorf("NextTurn on second load = %d, want 3", st.NextTurn)
	}
	if n, err := s.RecoverAll(ctx); err != nil || n != 0 {
		t.Errorf("RecoverAll after resolution = %d, %v; want 0, nil", n, err)
	}
	// The session goes on at turn 3.
	commit(t, s, "s", record(3, "r1", "", 1))
}

func testIntentReplaced(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	first := crashIntent("s", 1)
	first.Started = nil
	if err := s.WriteIntent(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteIntent(ctx, crashIntent("s", 1)); err != nil {
		t.Fatal(err)
	}
	loadSession(t, s, "s")
	if diff := diffTurns([]*messages.TurnRecord{resolvedCrashIntent(1)}, turns(t, s, "s"), ignoreTime); diff != "" {
		t.Errorf("Turns (-want +got):\n%s", diff)
	}
}

func testCommitDeletesIntent(t *testing.T, open opener) {
	s, restart := open(t)
	ctx := context.Background()
	if err := s.WriteIntent(ctx, crashIntent("s", 1)); err != nil {
		t.Fatal(err)
	}
	rec := record(1, "r1", "tid", 4)
	commit(t, s, "s", rec)
	s = restart()
	if st := loadSession(t, s, "s"); st.NextTurn != 2 {
		t.Errorf("NextTurn = %d, want 2", st.NextTurn)
	}
	if diff := diffTurns([]*messages.TurnRecord{record(1, "r1", "tid", 4)}, turns(t, s, "s")); diff != "" {
		t.Errorf("Turns (-want +got):\n%s", diff)
	}
}

func testRecoverAllOnRestart(t *testing.T, open opener) {
	s, restart := open(t)
	ctx := context.Background()
	sessions := []string{"a", "b", "c"}
	for i, id := range sessions {
		for turn := int64(1); turn <= int64(i); turn++ {
			commit(t, s, id, record(turn, "r1", "", 2))
		}
		if err := s.WriteIntent(ctx, crashIntent(id, int64(i)+1)); err != nil {
			t.Fatal(err)
		}
	}
	// A session with only an intent has no committed turn yet.
	got, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "c"}, got); diff != "" {
		t.Errorf("Sessions before restart (-want +got):\n%s", diff)
	}
	s = restart()
	for i, id := range sessions {
		ts := turns(t, s, id)
		if len(ts) != i+1 {
			t.Fatalf("session %s has %d turns, want %d", id, len(ts), i+1)
		}
		if diff := diffTurns([]*messages.TurnRecord{resolvedCrashIntent(int64(i) + 1)}, ts[i:], ignoreTime); diff != "" {
			t.Errorf("session %s: resolved turn (-want +got):\n%s", id, diff)
		}
	}
	got, err = s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sessions, got); diff != "" {
		t.Errorf("Sessions after restart (-want +got):\n%s", diff)
	}
	if n, err := s.RecoverAll(ctx); err != nil || n != 0 {
		t.Errorf("second RecoverAll = %d, %v; want 0, nil", n, err)
	}
}

func testTurnByID(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	commit(t, s, "s", record(1, "r", "first", 1))
	commit(t, s, "s", record(2, "r", "", 1))
	commit(t, s, "s", record(3, "r", "third", 2))
	got, err := s.TurnByID(ctx, "s", "third")
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffTurns([]*messages.TurnRecord{record(3, "r", "third", 2)}, []*messages.TurnRecord{got}); diff != "" {
		t.Errorf("TurnByID (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ session, id string }{{"s", "missing"}, {"s", ""}, {"other", "first"}} {
		if _, err := s.TurnByID(ctx, tt.session, tt.id); !errors.Is(err, ErrNotFound) {
			t.Errorf("TurnByID(%q, %q) = %v, want ErrNotFound", tt.session, tt.id, err)
		}
	}
}

func loadRun(t *testing.T, s Store, session, run string) *RunState {
	t.Helper()
	rs, err := s.LoadRun(context.Background(), session, run)
	if err != nil {
		t.Fatalf("LoadRun(%q, %q): %v", session, run, err)
	}
	if rs == nil || rs.Dedup == nil || rs.Fetched == nil {
		t.Fatalf("LoadRun(%q, %q) = %#v, want non-nil maps", session, run, rs)
	}
	return rs
}

func testRunState(t *testing.T, open opener) {
	s, restart := open(t)
	ctx := context.Background()
	if rs := loadRun(t, s, "s", "r1"); len(rs.Dedup)+len(rs.Fetched) != 0 {
		t.Errorf("new run = %+v, want empty", rs)
	}
	read := &DedupEntry{Key: "k-read", Tool: "read_files", Content: "hello", Paths: []string{"a.txt", "b/c.txt"}}
	ls := &DedupEntry{Key: "k-ls", Tool: "run_command", Content: "a.txt", StaleOnMutation: true}
	tmp := &DedupEntry{Key: "k-tmp", Tool: "calculate", Content: "2"}
	err := s.CommitTurn(ctx, &TurnCommit{
		Session: "s", Record: record(1, "r1", "", 1),
		FetchedAdd: []string{"read_files", "run_command"},
		DedupPut:   []*DedupEntry{read, ls, tmp},
		DedupDel:   []string{"k-tmp", "never-there"},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: record(1, "r2", "", 1), FetchedAdd: []string{"x"}})
	if !errors.Is(err, ErrStaleTurn) {
		t.Fatalf("stale commit = %v, want ErrStaleTurn", err)
	}
	err = s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: record(2, "r2", "", 1), FetchedAdd: []string{"edit_file"}})
	if err != nil {
		t.Fatal(err)
	}
	s = restart()
	want := &RunState{
		Dedup:   map[string]*DedupEntry{"k-read": read, "k-ls": ls},
		Fetched: map[string]bool{"read_files": true, "run_command": true},
	}
	if diff := cmp.Diff(want, loadRun(t, s, "s", "r1")); diff != "" {
		t.Errorf("run r1 (-want +got):\n%s", diff)
	}
	err = s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: record(3, "r1", "", 1), DedupDel: []string{"k-ls"}})
	if err != nil {
		t.Fatal(err)
	}
	delete(want.Dedup, "k-ls")
	if diff := cmp.Diff(want, loadRun(t, s, "s", "r1")); diff != "" {
		t.Errorf("run r1 after delete (-want +got):\n%s", diff)
	}
	if err := s.EndRun(ctx, "s", "r1"); err != nil {
		t.Fatal(err)
	}
	if rs := loadRun(t, s, "s", "r1"); len(rs.Dedup)+len(rs.Fetched) != 0 {
		t.Errorf("ended run = %+v, want empty", rs)
	}
	if rs := loadRun(t, s, "s", "r2"); !rs.Fetched["edit_file"] || len(rs.Fetched) != 1 {
		t.Errorf("run r2 after ending r1 = %+v, want edit_file fetched", rs)
	}
	if err := s.EndRun(ctx, "s", "never-started"); err != nil {
		t.Errorf("EndRun of an unknown run = %v", err)
	}
	if got := len(turns(t, s, "s")); got != 3 {
		t.Errorf("EndRun touched the session's turns: %d turns, want 3", got)
	}
}

func cacheGet(t *testing.T, s Store, key string, now time.Time) ([]byte, bool) {
	t.Helper()
	v, ok, err := s.CacheGet(context.Background(), key, now)
	if err != nil {
		t.Fatalf("CacheGet(%q): %v", key, err)
	}
	return v, ok
}

func testCacheExpiry(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	ttl := 30 * time.Minute
	if err := s.CachePut(ctx, CacheEntry{Key: "fetch_page|https://example.com", Value: []byte("page"), Expires: t0.Add(ttl)}); err != nil {
		t.Fatal(err)
	}
	if err := s.CachePut(ctx, CacheEntry{Key: "forever", Value: []byte{}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  string
		now  time.Time
		want string
		hit  bool
	}{
		{"at_write", "fetch_page|https://example.com", t0, "page", true},
		{"a_hit_late_in_life", "fetch_page|https://example.com", t0.Add(29 * time.Minute), "page", true},
		{"one_ns_before_expiry", "fetch_page|https://example.com", t0.Add(ttl - time.Nanosecond), "page", true},
		{"at_expiry", "fetch_page|https://example.com", t0.Add(ttl), "", false},
		{"after_expiry", "fetch_page|https://example.com", t0.Add(ttl + time.Second), "", false},
		{"hits_did_not_extend", "fetch_page|https://example.com", t0.Add(ttl), "", false},
		{"missing", "nope", t0, "", false},
		{"no_expiry", "forever", t0.Add(24 * time.Hour), "", true},
	}
	for _, tt := range tests {
		v, ok := cacheGet(t, s, tt.key, tt.now)
		if ok != tt.hit || string(v) != tt.want {
			t.Errorf("%s: CacheGet = %q, %v; want %q, %v", tt.name, v, ok, tt.want, tt.hit)
		}
	}
	// A put replaces the value and the expiry.
	if err := s.CachePut(ctx, CacheEntry{Key: "fetch_page|https://example.com", Value: []byte("new"), Expires: t0.Add(2 * ttl)}); err != nil {
		t.Fatal(err)
	}
	if v, ok := cacheGet(t, s, "fetch_page|https://example.com", t0.Add(ttl)); !ok || string(v) != "new" {
		t.Errorf("after replacing: CacheGet = %q, %v; want \"new\", true", v, ok)
	}
}

func testCacheInCommit(t *testing.T, open opener) {
	s, restart := open(t)
	ctx := context.Background()
	t0 := time.Now()
	err := s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: record(1, "r", "", 1), CachePut: []CacheEntry{
		{Key: "http_request|s|GET https://a", Value: []byte("A"), Expires: t0.Add(30 * time.Minute)},
		{Key: "http_request|s|GET https://b", Value: []byte("B"), Expires: t0.Add(time.Minute)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s = restart()
	if v, ok := cacheGet(t, s, "http_request|s|GET https://a", t0.Add(2*time.Minute)); !ok || string(v) != "A" {
		t.Errorf("a = %q, %v; want \"A\", true", v, ok)
	}
	if v, ok := cacheGet(t, s, "http_request|s|GET https://b", t0.Add(2*time.Minute)); ok {
		t.Errorf("b = %q, %v; want expired", v, ok)
	}
	// A stale commit writes none of its cache entries.
	err = s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: record(1, "r", "", 1), CachePut: []CacheEntry{
		{Key: "stale", Value: []byte("x"), Expires: t0.Add(time.Hour)},
	}})
	if !errors.Is(err, ErrStaleTurn) {
		t.Fatalf("stale commit = %v", err)
	}
	if _, ok := cacheGet(t, s, "stale", t0); ok {
		t.Errorf("a stale commit wrote its cache entry")
	}
}

func testFileVersions(t *testing.T, open opener) {
	s, restart := open(t)
	ctx := context.Background()
	ws := "/home/u/project"
	save := func(ws, path, content string, deleted bool, note string) int64 {
		t.Helper()
		v, err := s.SaveFileVersion(ctx, ws, path, []byte(content), deleted, note)
		if err != nil {
			t.Fatalf("SaveFileVersion(%q, %q): %v", ws, path, err)
		}
		return v
	}
	before := time.Now().Add(-time.Second)
	got := []int64{
		save(ws, "a.txt", "one", false, "edit_file"),
		save(ws, "a.txt", "two", false, "edit_file"),
		save(ws, "b/a.txt", "other file", false, "edit_file"),
		save(ws, "a.txt", "", true, "remove_file"),
		save(ws+"/", "a.txt", "same workspace, trailing slash", false, "edit_file"),
		save("/home/u/other", "a.txt", "other workspace", false, "edit_file"),
	}
	if diff := cmp.Diff([]int64{1, 2, 1, 3, 4, 1}, got); diff != "" {
		t.Errorf("version numbers (-want +got):\n%s", diff)
	}
	s = restart()
	vs, err := s.FileVersions(ctx, ws, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []FileVersion{
		{Version: 1, Size: 3, Note: "edit_file"},
		{Version: 2, Size: 3, Note: "edit_file"},
		{Version: 3, Size: 0, Deleted: true, Note: "remove_file"},
		{Version: 4, Size: 30, Note: "edit_file"},
	}
	if diff := cmp.Diff(want, vs, cmpopts.IgnoreFields(FileVersion{}, "Time")); diff != "" {
		t.Errorf("FileVersions (-want +got):\n%s", diff)
	}
	for _, v := range vs {
		if v.Time.Before(before) || v.Time.After(time.Now()) {
			t.Errorf("version %d time %v is not the time of saving", v.Version, v.Time)
		}
	}
	content, v, err := s.FileVersionContent(ctx, ws, "a.txt", 2)
	if err != nil || string(content) != "two" || v.Version != 2 {
		t.Errorf("FileVersionContent(2) = %q, %+v, %v; want \"two\"", content, v, err)
	}
	content, v, err = s.FileVersionContent(ctx, ws, "a.txt", 3)
	if err != nil || len(content) != 0 || content == nil || !v.Deleted {
		t.Errorf("FileVersionContent(3) = %q, %+v, %v; want empty deleted version", content, v, err)
	}
	for _, n := range []int64{0, 5, -1} {
		if _, _, err := s.FileVersionContent(ctx, ws, "a.txt", n); !errors.Is(err, ErrNotFound) {
			t.Errorf("FileVersionContent(%d) = %v, want ErrNotFound", n, err)
		}
	}
	if vs, err := s.FileVersions(ctx, ws, "never.txt"); err != nil || vs == nil || len(vs) != 0 {
		t.Errorf("FileVersions of an unknown file = %#v, %v; want empty", vs, err)
	}
}

func testFileVersionsConcurrent(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	const writers, each = 8, 10
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				v, err := s.SaveFileVersion(ctx, "/w", "f.txt", []byte(fmt.Sprintf("%d/%d", w, i)), false, "edit_file")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[v] {
					t.Errorf("version %d handed out twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	vs, err := s.FileVersions(ctx, "/w", "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != writers*each {
		t.Fatalf("%d versions, want %d", len(vs), writers*each)
	}
	for i, v := range vs {
		if v.Version != int64(i+1) {
			t.Errorf("version %d listed as %d", i+1, v.Version)
		}
	}
}

func testIDsDoNotCollide(t *testing.T, open opener) {
	s, restart := open(t)
	ctx := context.Background()
	// Each pair would share keys if ids were pasted into keys verbatim.
	sessions := []string{
		"a", "a/b", "a/t/0000000000000001", "a/meta", "", "/", "a\x00b", "a\xffb", "ä/ö", "a%2Fb", "A",
	}
	for i, s1 := range sessions {
		for turn := int64(1); turn <= int64(i%3)+1; turn++ {
			commit(t, s, s1, record(turn, "r", fmt.Sprintf("%s#%d", s1, turn), 1))
		}
	}
	runs := [][2]string{{"a", "b/c"}, {"a/b", "c"}, {"a", "b"}, {"a/b", ""}, {"a", "b/"}, {"a", "b/d/x"}}
	for i, sr := range runs {
		// Commit into the run through the session's next turn.
		st := loadSession(t, s, sr[0])
		err := s.CommitTurn(ctx, &TurnCommit{Session: sr[0], Record: record(st.NextTurn, sr[1], "", 1),
			FetchedAdd: []string{fmt.Sprintf("tool%d", i)},
			DedupPut:   []*DedupEntry{{Key: fmt.Sprintf("key/%d", i), Tool: "t", Content: sr[0] + "|" + sr[1]}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cacheKeys := []string{"a/b", "a", "a%2Fb", "a/b/"}
	for _, k := range cacheKeys {
		if err := s.CachePut(ctx, CacheEntry{Key: k, Value: []byte("v:" + k)}); err != nil {
			t.Fatal(err)
		}
	}
	paths := [][2]string{{"/w", "a/b"}, {"/w/a", "b"}, {"/w", "a/b/c"}, {"/w", "a"}}
	for _, p := range paths {
		if _, err := s.SaveFileVersion(ctx, p[0], p[1], []byte(p[0]+"|"+p[1]), false, ""); err != nil {
			t.Fatal(err)
		}
	}

	s = restart()
	wantTurns := map[string]int{}
	for i, s1 := range sessions {
		wantTurns[s1] = i%3 + 1
	}
	for _, sr := range runs {
		wantTurns[sr[0]]++
	}
	for _, s1 := range sessions {
		ts := turns(t, s, s1)
		if len(ts) != wantTurns[s1] {
			t.Errorf("session %q has %d turns, want %d", s1, len(ts), wantTurns[s1])
			continue
		}
		for i, rec := range ts {
			if rec.Turn != int64(i+1) {
				t.Errorf("session %q turn %d has number %d", s1, i+1, rec.Turn)
			}
		}
		if _, err := s.TurnByID(ctx, s1, s1+"#1"); err != nil {
			t.Errorf("TurnByID(%q): %v", s1, err)
		}
	}
	gotSessions, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantSessions := append([]string(nil), sessions...)
	if diff := cmp.Diff(wantSessions, gotSessions, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}
	for i := 1; i < len(gotSessions); i++ {
		if gotSessions[i-1] >= gotSessions[i] {
			t.Errorf("Sessions not sorted: %q before %q", gotSessions[i-1], gotSessions[i])
		}
	}
	for i, sr := range runs {
		rs := loadRun(t, s, sr[0], sr[1])
		want := &RunState{
			Dedup:   map[string]*DedupEntry{fmt.Sprintf("key/%d", i): {Key: fmt.Sprintf("key/%d", i), Tool: "t", Content: sr[0] + "|" + sr[1]}},
			Fetched: map[string]bool{fmt.Sprintf("tool%d", i): true},
		}
		if diff := cmp.Diff(want, rs); diff != "" {
			t.Errorf("run %q of session %q (-want +got):\n%s", sr[1], sr[0], diff)
		}
	}
	if err := s.EndRun(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if rs := loadRun(t, s, "a", "b/c"); len(rs.Dedup) != 1 {
		t.Errorf("ending run %q removed run %q", "b", "b/c")
	}
	for _, k := range cacheKeys {
		if v, ok := cacheGet(t, s, k, time.Now()); !ok || string(v) != "v:"+k {
			t.Errorf("cache %q = %q, %v", k, v, ok)
		}
	}
	for _, p := range paths {
		vs, err := s.FileVersions(ctx, p[0], p[1])
		if err != nil || len(vs) != 1 {
			t.Errorf("FileVersions(%q, %q) = %v, %v; want one version", p[0], p[1], vs, err)
			continue
		}
		c, _, err := s.FileVersionContent(ctx, p[0], p[1], 1)
		if err != nil || string(c) != p[0]+"|"+p[1] {
			t.Errorf("FileVersionContent(%q, %q) = %q, %v", p[0], p[1], c, err)
		}
	}
}

func testConcurrentSessions(t *testing.T, open opener) {
	s, restart := open(t)
	const sessions, perSession = 64, 12
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("session-%02d", i)
			for turn := int64(1); turn <= perSession; turn++ {
				if turn%3 == 0 {
					in := crashIntent(id, turn)
					if err := s.WriteIntent(ctx, in); err != nil {
						errs <- err
						return
					}
				}
				rec := record(turn, "r", fmt.Sprintf("%s/%d", id, turn), 3)
				err := s.CommitTurn(ctx, &TurnCommit{Session: id, Record: rec,
					FetchedAdd: []string{fmt.Sprintf("tool-%d", turn)},
					CachePut:   []CacheEntry{{Key: fmt.Sprintf("%s/%d", id, turn), Value: []byte("v")}},
				})
				if err != nil {
					errs <- err
					return
				}
				// A replay of the same turn is refused.
				if err := s.CommitTurn(ctx, &TurnCommit{Session: id, Record: rec}); !errors.Is(err, ErrStaleTurn) {
					errs <- fmt.Errorf("replayed commit of %s turn %d = %v, want ErrStaleTurn", id, turn, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s = restart()
	for i := range sessions {
		id := fmt.Sprintf("session-%02d", i)
		ts := turns(t, s, id)
		if len(ts) != perSession {
			t.Errorf("%s has %d turns, want %d", id, len(ts), perSession)
			continue
		}
		for j, rec := range ts {
			want := record(int64(j+1), "r", fmt.Sprintf("%s/%d", id, j+1), 3)
			if proto.Equal(want, rec) {
				continue
			}
			if diff := diffTurns([]*messages.TurnRecord{want}, []*messages.TurnRecord{rec}); diff != "" {
				t.Errorf("%s turn %d (-want +got):\n%s", id, j+1, diff)
			}
		}
		if rs := loadRun(t, s, id, "r"); len(rs.Fetched) != perSession {
			t.Errorf("%s fetched %d tools, want %d", id, len(rs.Fetched), perSession)
		}
		if _, ok := cacheGet(t, s, fmt.Sprintf("%s/%d", id, perSession), time.Now()); !ok {
			t.Errorf("%s: cache entry of the last turn missing", id)
		}
	}
	if n, err := s.RecoverAll(ctx); err != nil || n != 0 {
		t.Errorf("RecoverAll = %d, %v; want 0 (every intent committed)", n, err)
	}
}

func testCanceledContext(t *testing.T, open opener) {
	s, _ := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: record(1, "r", "", 1)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CommitTurn with a canceled context = %v, want context.Canceled", err)
	}
	if err := s.WriteIntent(ctx, crashIntent("s", 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteIntent with a canceled context = %v, want context.Canceled", err)
	}
	if st := loadSession(t, s, "s"); st.NextTurn != 1 {
		t.Errorf("NextTurn = %d, want 1: a canceled commit was applied", st.NextTurn)
	}
	if got := turns(t, s, "s"); len(got) != 0 {
		t.Errorf("%d turns after canceled commits, want 0", len(got))
	}
}

func testNoAliasing(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	rec := record(1, "r", "tid", 2)
	entry := &DedupEntry{Key: "k", Tool: "read_files", Content: "c", Paths: []string{"a"}}
	value := []byte("value")
	err := s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: rec, DedupPut: []*DedupEntry{entry},
		CachePut: []CacheEntry{{Key: "k", Value: value}}})
	if err != nil {
		t.Fatal(err)
	}
	in := crashIntent("s", 2)
	if err := s.WriteIntent(ctx, in); err != nil {
		t.Fatal(err)
	}
	// Mutate everything the caller handed over.
	rec.ToolMessages[0].Content = "mutated"
	rec.Assistant.Content = "mutated"
	entry.Paths[0] = "mutated"
	value[0] = 'X'
	in.Decided[1].Status = "mutated"
	in.Started[0] = 2
	in.IDs[0] = "mutated"

	got := turns(t, s, "s")
	if diff := diffTurns([]*messages.TurnRecord{record(1, "r", "tid", 2)}, got[:1]); diff != "" {
		t.Errorf("stored turn changed with the caller's copy (-want +got):\n%s", diff)
	}
	// Mutate what the store returned, then read again.
	got[0].ToolMessages[0].Content = "mutated again"
	if diff := diffTurns([]*messages.TurnRecord{record(1, "r", "tid", 2)}, turns(t, s, "s")[:1]); diff != "" {
		t.Errorf("stored turn changed with a returned copy (-want +got):\n%s", diff)
	}
	rs := loadRun(t, s, "s", "r")
	rs.Dedup["k"].Paths[0] = "mutated again"
	if rs := loadRun(t, s, "s", "r"); rs.Dedup["k"].Paths[0] != "a" {
		t.Errorf("stored dedup entry aliased: %+v", rs.Dedup["k"])
	}
	v, _ := cacheGet(t, s, "k", time.Now())
	if string(v) != "value" {
		t.Errorf("cached value = %q, want \"value\"", v)
	}
	v[0] = 'Y'
	if v, _ := cacheGet(t, s, "k", time.Now()); string(v) != "value" {
		t.Errorf("cached value aliased: %q", v)
	}
	loadSession(t, s, "s")
	if diff := diffTurns([]*messages.TurnRecord{resolvedCrashIntent(2)}, turns(t, s, "s")[1:], ignoreTime); diff != "" {
		t.Errorf("stored intent changed with the caller's copy (-want +got):\n%s", diff)
	}
}

func testClose(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	commit(t, s, "s", record(1, "r", "", 1))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	calls := map[string]func() error{
		"LoadSession": func() error { _, err := s.LoadSession(ctx, "s"); return err },
		"Turns":       func() error { _, err := s.Turns(ctx, "s"); return err },
		"TurnByID":    func() error { _, err := s.TurnByID(ctx, "s", "x"); return err },
		"Sessions":    func() error { _, err := s.Sessions(ctx); return err },
		"LoadRun":     func() error { _, err := s.LoadRun(ctx, "s", "r"); return err },
		"EndRun":      func() error { return s.EndRun(ctx, "s", "r") },
		"WriteIntent": func() error { return s.WriteIntent(ctx, crashIntent("s", 2)) },
		"CommitTurn": func() error {
			return s.CommitTurn(ctx, &TurnCommit{Session: "s", Record: record(2, "r", "", 1)})
		},
		"RecoverAll": func() error { _, err := s.RecoverAll(ctx); return err },
		"CacheGet":   func() error { _, _, err := s.CacheGet(ctx, "k", time.Now()); return err },
		"CachePut":   func() error { return s.CachePut(ctx, CacheEntry{Key: "k"}) },
		"SaveFileVersion": func() error {
			_, err := s.SaveFileVersion(ctx, "/w", "a", nil, false, "")
			return err
		},
		"FileVersions": func() error { _, err := s.FileVersions(ctx, "/w", "a"); return err },
		"FileVersionContent": func() error {
			_, _, err := s.FileVersionContent(ctx, "/w", "a", 1)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}
