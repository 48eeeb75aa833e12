package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Record builds a turn record with n calls that all succeeded.
func Record(turn int64, run, turnID string, n int) *messages.TurnRecord {
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

// Commit commits rec to the session, failing the test on an error.
func Commit(t *testing.T, s cachestore.Store, session string, rec *messages.TurnRecord) {
	t.Helper()
	if err := s.CommitTurn(context.Background(), &cachestore.TurnCommit{Session: session, Record: rec}); err != nil {
		t.Fatalf("CommitTurn(%q, %d): %v", session, rec.Turn, err)
	}
}

// Turns returns the session's committed turns, failing the test on an error.
func Turns(t *testing.T, s cachestore.Store, session string) []*messages.TurnRecord {
	t.Helper()
	got, err := s.Turns(context.Background(), session)
	if err != nil {
		t.Fatalf("Turns(%q): %v", session, err)
	}
	return got
}

// LoadSession loads the session, failing the test on an error.
func LoadSession(t *testing.T, s cachestore.Store, session string) cachestore.SessionState {
	t.Helper()
	st, err := s.LoadSession(context.Background(), session)
	if err != nil {
		t.Fatalf("LoadSession(%q): %v", session, err)
	}
	return st
}

// IgnoreTime ignores the time of turn records (recovered turns get the
// time of their recovery).
var IgnoreTime = protocmp.IgnoreFields(&messages.TurnRecord{}, "time_unix_nano")

// DiffTurns compares turn records (protobuf-aware, empty equals nil) and
// returns the go-cmp diff (-want +got).
func DiffTurns(want, got []*messages.TurnRecord, opts ...cmp.Option) string {
	return cmp.Diff(want, got, append([]cmp.Option{protocmp.Transform(), cmpopts.EquateEmpty()}, opts...)...)
}

func testCommitAndReload(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	if st := LoadSession(t, s, "s1"); st.NextTurn != 1 {
		t.Fatalf("NextTurn of a new session = %d, want 1", st.NextTurn)
	}
	var want []*messages.TurnRecord
	for turn := int64(1); turn <= 3; turn++ {
		rec := Record(turn, "r1", fmt.Sprintf("tid-%d", turn), int(turn))
		want = append(want, Record(turn, "r1", fmt.Sprintf("tid-%d", turn), int(turn)))
		Commit(t, s, "s1", rec)
	}
	s = restart()
	if diff := DiffTurns(want, Turns(t, s, "s1")); diff != "" {
		t.Errorf("Turns after restart (-want +got):\n%s", diff)
	}
	if st := LoadSession(t, s, "s1"); st.NextTurn != 4 {
		t.Errorf("NextTurn after restart = %d, want 4", st.NextTurn)
	}
	sessions, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"s1"}, sessions); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}
	if got := Turns(t, s, "unknown"); got == nil || len(got) != 0 {
		t.Errorf("Turns of an unknown session = %#v, want empty and non-nil", got)
	}
}

func testStaleTurn(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	tests := []struct {
		name string
		turn int64
		want error
	}{
		{"turn_2_before_1", 2, cachestore.ErrStaleTurn},
		{"turn_0", 0, cachestore.ErrStaleTurn},
		{"turn_1", 1, nil},
		{"turn_1_again", 1, cachestore.ErrStaleTurn},
		{"turn_3_skips_2", 3, cachestore.ErrStaleTurn},
		{"turn_2", 2, nil},
	}
	for _, tt := range tests {
		err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(tt.turn, "r", "", 1)})
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: CommitTurn = %v, want %v", tt.name, err, tt.want)
		}
	}
	for _, turn := range []int64{1, 2, 4} {
		err := s.WriteIntent(ctx, &cachestore.Intent{Session: "s", Turn: turn})
		if !errors.Is(err, cachestore.ErrStaleTurn) {
			t.Errorf("WriteIntent(turn %d) with next turn 3 = %v, want cachestore.ErrStaleTurn", turn, err)
		}
	}
	if got := len(Turns(t, s, "s")); got != 2 {
		t.Errorf("%d Turns committed, want 2", got)
	}
	if st := LoadSession(t, s, "s"); st.NextTurn != 3 {
		t.Errorf("NextTurn = %d, want 3", st.NextTurn)
	}
}

// CrashIntent is an intent of a 4-call turn: call 1 was decided in pass 1,
// calls 0 and 3 may have started, call 2 had not.
func CrashIntent(session string, turn int64) *cachestore.Intent {
	return &cachestore.Intent{
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

// ResolvedCrashIntent is the turn record CrashIntent resolves to.
func ResolvedCrashIntent(turn int64) *messages.TurnRecord {
	in := CrashIntent("", turn)
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

func testIntentResolution(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	Commit(t, s, "s", Record(1, "r1", "", 1))
	if err := s.WriteIntent(ctx, CrashIntent("s", 2)); err != nil {
		t.Fatalf("WriteIntent: %v", err)
	}
	if st := LoadSession(t, s, "s"); st.NextTurn != 3 {
		t.Errorf("NextTurn after resolving = %d, want 3", st.NextTurn)
	}
	want := []*messages.TurnRecord{Record(1, "r1", "", 1), ResolvedCrashIntent(2)}
	got := Turns(t, s, "s")
	if diff := DiffTurns(want, got, IgnoreTime); diff != "" {
		t.Errorf("Turns (-want +got):\n%s", diff)
	}
	if got[1].GetTimeUnixNano() == 0 {
		t.Errorf("resolved turn has no time")
	}
	rec, err := s.TurnByID(ctx, "s", "tid-crash")
	if err != nil {
		t.Fatalf("TurnByID of the resolved turn: %v", err)
	}
	if diff := DiffTurns(want[1:], []*messages.TurnRecord{rec}, IgnoreTime); diff != "" {
		t.Errorf("TurnByID (-want +got):\n%s", diff)
	}
	// Resolved once: loading again adds nothing.
	if st := LoadSession(t, s, "s"); st.NextTurn != 3 {
		t.Errorf("NextTurn on second load = %d, want 3", st.NextTurn)
	}
	if n, err := s.RecoverAll(ctx); err != nil || n != 0 {
		t.Errorf("RecoverAll after resolution = %d, %v; want 0, nil", n, err)
	}
	// The session goes on at turn 3.
	Commit(t, s, "s", Record(3, "r1", "", 1))
}

func testIntentReplaced(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	first := CrashIntent("s", 1)
	first.Started = nil
	if err := s.WriteIntent(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteIntent(ctx, CrashIntent("s", 1)); err != nil {
		t.Fatal(err)
	}
	LoadSession(t, s, "s")
	if diff := DiffTurns([]*messages.TurnRecord{ResolvedCrashIntent(1)}, Turns(t, s, "s"), IgnoreTime); diff != "" {
		t.Errorf("Turns (-want +got):\n%s", diff)
	}
}

func testCommitDeletesIntent(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	if err := s.WriteIntent(ctx, CrashIntent("s", 1)); err != nil {
		t.Fatal(err)
	}
	rec := Record(1, "r1", "tid", 4)
	Commit(t, s, "s", rec)
	s = restart()
	if st := LoadSession(t, s, "s"); st.NextTurn != 2 {
		t.Errorf("NextTurn = %d, want 2", st.NextTurn)
	}
	if diff := DiffTurns([]*messages.TurnRecord{Record(1, "r1", "tid", 4)}, Turns(t, s, "s")); diff != "" {
		t.Errorf("Turns (-want +got):\n%s", diff)
	}
}

func testRecoverAllOnRestart(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	sessions := []string{"a", "b", "c"}
	for i, id := range sessions {
		for turn := int64(1); turn <= int64(i); turn++ {
			Commit(t, s, id, Record(turn, "r1", "", 2))
		}
		if err := s.WriteIntent(ctx, CrashIntent(id, int64(i)+1)); err != nil {
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
		ts := Turns(t, s, id)
		if len(ts) != i+1 {
			t.Fatalf("session %s has %d Turns, want %d", id, len(ts), i+1)
		}
		if diff := DiffTurns([]*messages.TurnRecord{ResolvedCrashIntent(int64(i) + 1)}, ts[i:], IgnoreTime); diff != "" {
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

func testTurnByID(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	Commit(t, s, "s", Record(1, "r", "first", 1))
	Commit(t, s, "s", Record(2, "r", "", 1))
	Commit(t, s, "s", Record(3, "r", "third", 2))
	got, err := s.TurnByID(ctx, "s", "third")
	if err != nil {
		t.Fatal(err)
	}
	if diff := DiffTurns([]*messages.TurnRecord{Record(3, "r", "third", 2)}, []*messages.TurnRecord{got}); diff != "" {
		t.Errorf("TurnByID (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ session, id string }{{"s", "missing"}, {"s", ""}, {"other", "first"}} {
		if _, err := s.TurnByID(ctx, tt.session, tt.id); !errors.Is(err, cachestore.ErrNotFound) {
			t.Errorf("TurnByID(%q, %q) = %v, want cachestore.ErrNotFound", tt.session, tt.id, err)
		}
	}
}

// LoadRun loads a run's state, failing the test on an error or a nil map.
func LoadRun(t *testing.T, s cachestore.Store, session, run string) *cachestore.RunState {
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

func testRunState(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	if rs := LoadRun(t, s, "s", "r1"); len(rs.Dedup)+len(rs.Fetched) != 0 {
		t.Errorf("new run = %+v, want empty", rs)
	}
	read := &cachestore.DedupEntry{Key: "k-read", Tool: "read_files", Content: "hello", Paths: []string{"a.txt", "b/c.txt"}}
	ls := &cachestore.DedupEntry{Key: "k-ls", Tool: "run_command", Content: "a.txt", StaleOnMutation: true}
	tmp := &cachestore.DedupEntry{Key: "k-tmp", Tool: "calculate", Content: "2"}
	err := s.CommitTurn(ctx, &cachestore.TurnCommit{
		Session: "s", Record: Record(1, "r1", "", 1),
		FetchedAdd: []string{"read_files", "run_command"},
		DedupPut:   []*cachestore.DedupEntry{read, ls, tmp},
		DedupDel:   []string{"k-tmp", "never-there"},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(1, "r2", "", 1), FetchedAdd: []string{"x"}})
	if !errors.Is(err, cachestore.ErrStaleTurn) {
		t.Fatalf("stale Commit = %v, want cachestore.ErrStaleTurn", err)
	}
	err = s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(2, "r2", "", 1), FetchedAdd: []string{"edit_file"}})
	if err != nil {
		t.Fatal(err)
	}
	s = restart()
	want := &cachestore.RunState{
		Dedup:   map[string]*cachestore.DedupEntry{"k-read": read, "k-ls": ls},
		Fetched: map[string]bool{"read_files": true, "run_command": true},
	}
	if diff := cmp.Diff(want, LoadRun(t, s, "s", "r1")); diff != "" {
		t.Errorf("run r1 (-want +got):\n%s", diff)
	}
	err = s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(3, "r1", "", 1), DedupDel: []string{"k-ls"}})
	if err != nil {
		t.Fatal(err)
	}
	delete(want.Dedup, "k-ls")
	if diff := cmp.Diff(want, LoadRun(t, s, "s", "r1")); diff != "" {
		t.Errorf("run r1 after delete (-want +got):\n%s", diff)
	}
	if err := s.EndRun(ctx, "s", "r1"); err != nil {
		t.Fatal(err)
	}
	if rs := LoadRun(t, s, "s", "r1"); len(rs.Dedup)+len(rs.Fetched) != 0 {
		t.Errorf("ended run = %+v, want empty", rs)
	}
	if rs := LoadRun(t, s, "s", "r2"); !rs.Fetched["edit_file"] || len(rs.Fetched) != 1 {
		t.Errorf("run r2 after ending r1 = %+v, want edit_file fetched", rs)
	}
	if err := s.EndRun(ctx, "s", "never-started"); err != nil {
		t.Errorf("EndRun of an unknown run = %v", err)
	}
	if got := len(Turns(t, s, "s")); got != 3 {
		t.Errorf("EndRun touched the session's turns: %d Turns, want 3", got)
	}
}

// CacheGet reads the cache, failing the test on an error.
func CacheGet(t *testing.T, s cachestore.Store, key string, now time.Time) ([]byte, bool) {
	t.Helper()
	v, ok, err := s.CacheGet(context.Background(), key, now)
	if err != nil {
		t.Fatalf("CacheGet(%q): %v", key, err)
	}
	return v, ok
}

func testCacheExpiry(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	ttl := 30 * time.Minute
	if err := s.CachePut(ctx, cachestore.CacheEntry{Key: "fetch_page|https://example.com", Value: []byte("page"), Expires: t0.Add(ttl)}); err != nil {
		t.Fatal(err)
	}
	if err := s.CachePut(ctx, cachestore.CacheEntry{Key: "forever", Value: []byte{}}); err != nil {
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
		v, ok := CacheGet(t, s, tt.key, tt.now)
		if ok != tt.hit || string(v) != tt.want {
			t.Errorf("%s: CacheGet = %q, %v; want %q, %v", tt.name, v, ok, tt.want, tt.hit)
		}
	}
	// A put replaces the value and the expiry.
	if err := s.CachePut(ctx, cachestore.CacheEntry{Key: "fetch_page|https://example.com", Value: []byte("new"), Expires: t0.Add(2 * ttl)}); err != nil {
		t.Fatal(err)
	}
	if v, ok := CacheGet(t, s, "fetch_page|https://example.com", t0.Add(ttl)); !ok || string(v) != "new" {
		t.Errorf("after replacing: CacheGet = %q, %v; want \"new\", true", v, ok)
	}
}

func testCacheInCommit(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	t0 := time.Now()
	err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(1, "r", "", 1), CachePut: []cachestore.CacheEntry{
		{Key: "http_request|s|GET https://a", Value: []byte("A"), Expires: t0.Add(30 * time.Minute)},
		{Key: "http_request|s|GET https://b", Value: []byte("B"), Expires: t0.Add(time.Minute)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s = restart()
	if v, ok := CacheGet(t, s, "http_request|s|GET https://a", t0.Add(2*time.Minute)); !ok || string(v) != "A" {
		t.Errorf("a = %q, %v; want \"A\", true", v, ok)
	}
	if v, ok := CacheGet(t, s, "http_request|s|GET https://b", t0.Add(2*time.Minute)); ok {
		t.Errorf("b = %q, %v; want expired", v, ok)
	}
	// A stale commit writes none of its cache entries.
	err = s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(1, "r", "", 1), CachePut: []cachestore.CacheEntry{
		{Key: "stale", Value: []byte("x"), Expires: t0.Add(time.Hour)},
	}})
	if !errors.Is(err, cachestore.ErrStaleTurn) {
		t.Fatalf("stale Commit = %v", err)
	}
	if _, ok := CacheGet(t, s, "stale", t0); ok {
		t.Errorf("a stale Commit wrote its cache entry")
	}
}

func testFileVersions(t *testing.T, open Opener) {
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
	want := []cachestore.FileVersion{
		{Version: 1, Size: 3, Note: "edit_file"},
		{Version: 2, Size: 3, Note: "edit_file"},
		{Version: 3, Size: 0, Deleted: true, Note: "remove_file"},
		{Version: 4, Size: 30, Note: "edit_file"},
	}
	if diff := cmp.Diff(want, vs, cmpopts.IgnoreFields(cachestore.FileVersion{}, "Time")); diff != "" {
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
		if _, _, err := s.FileVersionContent(ctx, ws, "a.txt", n); !errors.Is(err, cachestore.ErrNotFound) {
			t.Errorf("FileVersionContent(%d) = %v, want cachestore.ErrNotFound", n, err)
		}
	}
	if vs, err := s.FileVersions(ctx, ws, "never.txt"); err != nil || vs == nil || len(vs) != 0 {
		t.Errorf("FileVersions of an unknown file = %#v, %v; want empty", vs, err)
	}
}

func testFileVersionsConcurrent(t *testing.T, open Opener) {
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

func testIDsDoNotCollide(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	// Each pair would share keys if ids were pasted into keys verbatim.
	sessions := []string{
		"a", "a/b", "a/t/0000000000000001", "a/meta", "", "/", "a\x00b", "a\xffb", "ä/ö", "a%2Fb", "A",
	}
	for i, s1 := range sessions {
		for turn := int64(1); turn <= int64(i%3)+1; turn++ {
			Commit(t, s, s1, Record(turn, "r", fmt.Sprintf("%s#%d", s1, turn), 1))
		}
	}
	runs := [][2]string{{"a", "b/c"}, {"a/b", "c"}, {"a", "b"}, {"a/b", ""}, {"a", "b/"}, {"a", "b/d/x"}}
	for i, sr := range runs {
		// commit into the run through the session's next turn.
		st := LoadSession(t, s, sr[0])
		err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: sr[0], Record: Record(st.NextTurn, sr[1], "", 1),
			FetchedAdd: []string{fmt.Sprintf("tool%d", i)},
			DedupPut:   []*cachestore.DedupEntry{{Key: fmt.Sprintf("key/%d", i), Tool: "t", Content: sr[0] + "|" + sr[1]}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cacheKeys := []string{"a/b", "a", "a%2Fb", "a/b/"}
	for _, k := range cacheKeys {
		if err := s.CachePut(ctx, cachestore.CacheEntry{Key: k, Value: []byte("v:" + k)}); err != nil {
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
	checkSessionsApart(t, s, sessions, wantTurns)
	for i, sr := range runs {
		rs := LoadRun(t, s, sr[0], sr[1])
		want := &cachestore.RunState{
			Dedup:   map[string]*cachestore.DedupEntry{fmt.Sprintf("key/%d", i): {Key: fmt.Sprintf("key/%d", i), Tool: "t", Content: sr[0] + "|" + sr[1]}},
			Fetched: map[string]bool{fmt.Sprintf("tool%d", i): true},
		}
		if diff := cmp.Diff(want, rs); diff != "" {
			t.Errorf("run %q of session %q (-want +got):\n%s", sr[1], sr[0], diff)
		}
	}
	if err := s.EndRun(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if rs := LoadRun(t, s, "a", "b/c"); len(rs.Dedup) != 1 {
		t.Errorf("ending run %q removed run %q", "b", "b/c")
	}
	for _, k := range cacheKeys {
		if v, ok := CacheGet(t, s, k, time.Now()); !ok || string(v) != "v:"+k {
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

// checkSessionsApart checks that each session holds its own turns, numbered
// from 1, finds its first turn by id, and that Sessions lists them all,
// sorted.
func checkSessionsApart(t *testing.T, s cachestore.Store, sessions []string, wantTurns map[string]int) {
	t.Helper()
	ctx := context.Background()
	for _, s1 := range sessions {
		ts := Turns(t, s, s1)
		if len(ts) != wantTurns[s1] {
			t.Errorf("session %q has %d Turns, want %d", s1, len(ts), wantTurns[s1])
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
}

func testConcurrentSessions(t *testing.T, open Opener) {
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
					in := CrashIntent(id, turn)
					if err := s.WriteIntent(ctx, in); err != nil {
						errs <- err
						return
					}
				}
				rec := Record(turn, "r", fmt.Sprintf("%s/%d", id, turn), 3)
				err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: id, Record: rec,
					FetchedAdd: []string{fmt.Sprintf("tool-%d", turn)},
					CachePut:   []cachestore.CacheEntry{{Key: fmt.Sprintf("%s/%d", id, turn), Value: []byte("v")}},
				})
				if err != nil {
					errs <- err
					return
				}
				// A replay of the same turn is refused.
				if err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: id, Record: rec}); !errors.Is(err, cachestore.ErrStaleTurn) {
					errs <- fmt.Errorf("replayed Commit of %s turn %d = %v, want cachestore.ErrStaleTurn", id, turn, err)
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
		ts := Turns(t, s, id)
		if len(ts) != perSession {
			t.Errorf("%s has %d Turns, want %d", id, len(ts), perSession)
			continue
		}
		for j, rec := range ts {
			want := Record(int64(j+1), "r", fmt.Sprintf("%s/%d", id, j+1), 3)
			if proto.Equal(want, rec) {
				continue
			}
			if diff := DiffTurns([]*messages.TurnRecord{want}, []*messages.TurnRecord{rec}); diff != "" {
				t.Errorf("%s turn %d (-want +got):\n%s", id, j+1, diff)
			}
		}
		if rs := LoadRun(t, s, id, "r"); len(rs.Fetched) != perSession {
			t.Errorf("%s fetched %d tools, want %d", id, len(rs.Fetched), perSession)
		}
		if _, ok := CacheGet(t, s, fmt.Sprintf("%s/%d", id, perSession), time.Now()); !ok {
			t.Errorf("%s: cache entry of the last turn missing", id)
		}
	}
	if n, err := s.RecoverAll(ctx); err != nil || n != 0 {
		t.Errorf("RecoverAll = %d, %v; want 0 (every intent committed)", n, err)
	}
}

func testCanceledContext(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(1, "r", "", 1)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CommitTurn with a canceled context = %v, want context.Canceled", err)
	}
	if err := s.WriteIntent(ctx, CrashIntent("s", 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteIntent with a canceled context = %v, want context.Canceled", err)
	}
	if st := LoadSession(t, s, "s"); st.NextTurn != 1 {
		t.Errorf("NextTurn = %d, want 1: a canceled Commit was applied", st.NextTurn)
	}
	if got := Turns(t, s, "s"); len(got) != 0 {
		t.Errorf("%d Turns after canceled commits, want 0", len(got))
	}
}

func testNoAliasing(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	rec := Record(1, "r", "tid", 2)
	entry := &cachestore.DedupEntry{Key: "k", Tool: "read_files", Content: "c", Paths: []string{"a"}}
	value := []byte("value")
	err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: rec, DedupPut: []*cachestore.DedupEntry{entry},
		CachePut: []cachestore.CacheEntry{{Key: "k", Value: value}}})
	if err != nil {
		t.Fatal(err)
	}
	in := CrashIntent("s", 2)
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

	got := Turns(t, s, "s")
	if diff := DiffTurns([]*messages.TurnRecord{Record(1, "r", "tid", 2)}, got[:1]); diff != "" {
		t.Errorf("stored turn changed with the caller's copy (-want +got):\n%s", diff)
	}
	// Mutate what the store returned, then read again.
	got[0].ToolMessages[0].Content = "mutated again"
	if diff := DiffTurns([]*messages.TurnRecord{Record(1, "r", "tid", 2)}, Turns(t, s, "s")[:1]); diff != "" {
		t.Errorf("stored turn changed with a returned copy (-want +got):\n%s", diff)
	}
	rs := LoadRun(t, s, "s", "r")
	rs.Dedup["k"].Paths[0] = "mutated again"
	if rs := LoadRun(t, s, "s", "r"); rs.Dedup["k"].Paths[0] != "a" {
		t.Errorf("stored dedup entry aliased: %+v", rs.Dedup["k"])
	}
	v, _ := CacheGet(t, s, "k", time.Now())
	if string(v) != "value" {
		t.Errorf("cached value = %q, want \"value\"", v)
	}
	v[0] = 'Y'
	if v, _ := CacheGet(t, s, "k", time.Now()); string(v) != "value" {
		t.Errorf("cached value aliased: %q", v)
	}
	LoadSession(t, s, "s")
	if diff := DiffTurns([]*messages.TurnRecord{ResolvedCrashIntent(2)}, Turns(t, s, "s")[1:], IgnoreTime); diff != "" {
		t.Errorf("stored intent changed with the caller's copy (-want +got):\n%s", diff)
	}
}

func testClose(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	Commit(t, s, "s", Record(1, "r", "", 1))
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
		"WriteIntent": func() error { return s.WriteIntent(ctx, CrashIntent("s", 2)) },
		"CommitTurn": func() error {
			return s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(2, "r", "", 1)})
		},
		"RecoverAll": func() error { _, err := s.RecoverAll(ctx); return err },
		"CacheGet":   func() error { _, _, err := s.CacheGet(ctx, "k", time.Now()); return err },
		"CachePut":   func() error { return s.CachePut(ctx, cachestore.CacheEntry{Key: "k"}) },
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
		if err := call(); !errors.Is(err, cachestore.ErrClosed) {
			t.Errorf("%s after Close = %v, want cachestore.ErrClosed", name, err)
		}
	}
}

// BigShape is the shape of a big turn: Calls calls of about ArgBytes bytes
// of arguments each (RunBig's, and a store's own tests of its limits).
type BigShape struct {
	Name     string
	Calls    int
	ArgBytes int
}

var bigShapes = []BigShape{
	{"4096_calls", 4096, 40},
	{"20_calls_of_900KB", 20, 900 << 10},
}

// BigSession and bigRun, the session and run of the big turns, look like
// the ids the command line makes.
const (
	BigSession = "default"
	bigRun     = "run-20260901T120000Z-0123456789abcdef"
)

// bigArgs is a JSON object of about n bytes, different for each call.
func bigArgs(i, n int) string {
	pad := max(n-40, 1)
	return fmt.Sprintf(`{"expression":"%d+1","pad":"%s"}`, i, strings.Repeat(string(rune('a'+i%26)), pad))
}

func bigAssistant(sh BigShape) *messages.AssistantMessage {
	a := &messages.AssistantMessage{Role: "assistant"}
	for i := range sh.Calls {
		a.ToolCalls = append(a.ToolCalls, &messages.ToolCall{Id: fmt.Sprintf("c%d", i), Type: "function",
			Function: &messages.FunctionCall{Name: "calculate", Arguments: bigArgs(i, sh.ArgBytes)}})
	}
	return a
}

// BigIntent is the intent record of a big turn whose calls in started may
// have started.
func BigIntent(sh BigShape, turn int64, started []int) *cachestore.Intent {
	in := &cachestore.Intent{Session: BigSession, Turn: turn, Run: bigRun, TurnID: "tid-" + sh.Name, Provider: "openai",
		Assistant: bigAssistant(sh), Decided: map[int]*messages.ToolMessage{}, Started: started}
	for i := range sh.Calls {
		in.Names = append(in.Names, "calculate")
		in.IDs = append(in.IDs, fmt.Sprintf("c%d", i))
	}
	return in
}

// BigCommit is the commit of a big turn: every call ok, each with a
// de-duplication entry.
func BigCommit(sh BigShape, turn int64) *cachestore.TurnCommit {
	rec := &messages.TurnRecord{Turn: turn, Run: bigRun, TurnId: "tid-" + sh.Name, Provider: "openai",
		TimeUnixNano: 1_700_000_000_000_000_000, Assistant: bigAssistant(sh)}
	c := &cachestore.TurnCommit{Session: BigSession, Record: rec, FetchedAdd: []string{"calculate"}}
	for i := range sh.Calls {
		rec.ToolMessages = append(rec.ToolMessages, &messages.ToolMessage{Role: "tool", ToolCallId: fmt.Sprintf("c%d", i),
			Name: "calculate", Status: "ok", Content: fmt.Sprint(i + 1)})
		sum := sha256.Sum256([]byte("calculate|" + bigArgs(i, sh.ArgBytes)))
		c.DedupPut = append(c.DedupPut, &cachestore.DedupEntry{Key: hex.EncodeToString(sum[:]), Tool: "calculate", Content: fmt.Sprint(i + 1)})
	}
	return c
}

func testBigTurnCommits(t *testing.T, open Opener, sh BigShape) {
	s, restart := open(t)
	ctx := context.Background()
	LoadSession(t, s, BigSession)
	// The intent is rewritten before each segment of the turn.
	if err := s.WriteIntent(ctx, BigIntent(sh, 1, nil)); err != nil {
		t.Fatalf("WriteIntent: %v", err)
	}
	all := make([]int, sh.Calls)
	for i := range all {
		all[i] = i
	}
	if err := s.WriteIntent(ctx, BigIntent(sh, 1, all)); err != nil {
		t.Fatalf("WriteIntent (rewrite): %v", err)
	}
	if err := s.CommitTurn(ctx, BigCommit(sh, 1)); err != nil {
		t.Fatalf("CommitTurn: %v", err)
	}
	s = restart()
	if st := LoadSession(t, s, BigSession); st.NextTurn != 2 {
		t.Errorf("NextTurn after restart = %d, want 2", st.NextTurn)
	}
	want := BigCommit(sh, 1)
	if got := Turns(t, s, BigSession); len(got) != 1 || !proto.Equal(want.Record, got[0]) {
		t.Errorf("Turns after restart: %d Turns, or the turn differs from the one committed", len(got))
	}
	rec, err := s.TurnByID(ctx, BigSession, "tid-"+sh.Name)
	if err != nil {
		t.Fatalf("TurnByID: %v", err)
	}
	if len(rec.GetToolMessages()) != sh.Calls {
		t.Errorf("TurnByID: %d tool messages, want %d", len(rec.GetToolMessages()), sh.Calls)
	}
	rs := LoadRun(t, s, BigSession, bigRun)
	if len(rs.Dedup) != sh.Calls || !rs.Fetched["calculate"] {
		t.Errorf("run state after restart: %d dedup entries (want %d), fetched %v", len(rs.Dedup), sh.Calls, rs.Fetched)
	}
	if n, err := s.RecoverAll(ctx); err != nil || n != 0 {
		t.Errorf("RecoverAll after the Commit = %d, %v; want 0, nil (the intent is gone)", n, err)
	}

	// A big turn interrupted after its intent: the next load resolves it
	// into a whole turn, every call outcome_unknown.
	if err := s.WriteIntent(ctx, BigIntent(sh, 2, all)); err != nil {
		t.Fatalf("WriteIntent of turn 2: %v", err)
	}
	s = restart()
	if st := LoadSession(t, s, BigSession); st.NextTurn != 3 {
		t.Fatalf("NextTurn after resolving turn 2 = %d, want 3", st.NextTurn)
	}
	got := Turns(t, s, BigSession)
	if len(got) != 2 {
		t.Fatalf("%d Turns, want 2", len(got))
	}
	want2 := cachestore.ResolveIntent(BigIntent(sh, 2, all), time.Unix(0, got[1].GetTimeUnixNano()))
	if !proto.Equal(want2, got[1]) {
		t.Errorf("resolved turn 2 differs from cachestore.ResolveIntent of its intent")
	}
	// The session goes on.
	Commit(t, s, BigSession, Record(3, bigRun, "", 1))
}
