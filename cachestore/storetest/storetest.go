// Package storetest is the contract of cachestore.Store as a test: the
// cases every store of this module passes (Badger, Memory, PostgreSQL), so
// that a store written elsewhere can prove itself against the same ones.
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) (cachestore.Store, func() cachestore.Store) {
//			s := openMyStore(t)
//			return s, func() cachestore.Store { s = reopenMyStore(t, s); return s }
//		})
//	}
//
// The package knows the Store interface and the messages it carries and
// nothing of any implementation: it must not import Badger, pgx or the
// stores' own packages.
package storetest

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Opener opens a fresh, empty store for one test (closed by the test's
// cleanup) and returns it with restart, which simulates a process restart
// and returns the store to use afterwards: a store on disk closes and
// reopens; any store resolves the intents left behind (RecoverAll, or on
// open) before restart returns.
type Opener func(t *testing.T) (s cachestore.Store, restart func() cachestore.Store)

// RecoverOnRestart returns what an Opener returns for a store that keeps
// nothing outside the process (in memory): s itself, closed when the test
// ends, and a restart that resolves the intents left behind (RecoverAll)
// and goes on with s.
func RecoverOnRestart(t *testing.T, s cachestore.Store) (cachestore.Store, func() cachestore.Store) {
	t.Cleanup(func() { _ = s.Close() })
	return s, func() cachestore.Store {
		t.Helper()
		if _, err := s.RecoverAll(context.Background()); err != nil {
			t.Fatalf("RecoverAll: %v", err)
		}
		return s
	}
}

// Run runs every case of the contract against the stores open makes, each
// as a subtest of t. The cases use the wall clock only where the contract
// says a store may (cache entries carry their expiry), and no sleeps.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"commit_and_reload", testCommitAndReload},
		{"stale_turn", testStaleTurn},
		{"intent_resolution", testIntentResolution},
		{"intent_replaced", testIntentReplaced},
		{"intent_tasks", testIntentTasks},
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
		{"invalid_utf8", testInvalidUTF8},
		{"kv", testKV},
		{"kv_create", testKVCreate},
		{"not_found", testNotFound},
		{"amend_tool_message", testAmendToolMessage},
		{"approvals", testApprovals},
		{"approval_shadowed", testApprovalShadowed},
		{"waiting_index", testWaitingIndex},
		{"waiting_paging", testWaitingPaging},
		{"waiting_bounds", testWaitingBounds},
		{"waiting_cap", testWaitingCap},
		{"event_counter", testEventCounter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open) })
	}
}

// RunBig runs the cases of turns at the dispatcher's documented limits:
// 4096 calls in one turn, and 20 calls of 900 KB of arguments (18 MB).
// A store must take their intent, its rewrites, the commit, a restart and
// the resolution of a crashed big turn. They write about 100 MB and skip
// under -short.
func RunBig(t *testing.T, open Opener) {
	if testing.Short() {
		t.Skip("big turns write ~100 MB")
	}
	for _, sh := range bigShapes {
		t.Run(sh.Name, func(t *testing.T) { testBigTurnCommits(t, open, sh) })
	}
}

// testInvalidUTF8: a turn holding invalid UTF-8 is stored with each invalid
// sequence replaced by U+FFFD, found by its turn id as given, and the
// caller's record is left alone.
func testInvalidUTF8(t *testing.T, open Opener) {
	s, restart := open(t)
	rec := Record(1, "r", "id\xff", 1)
	rec.ToolMessages[0].Content = "bin\xff\xfeary"
	Commit(t, s, "s", rec)
	s = restart()
	got := Turns(t, s, "s")
	if len(got) != 1 || got[0].ToolMessages[0].Content != "bin\uFFFDary" {
		t.Fatalf("stored content = %q, want invalid bytes replaced", got[0].GetToolMessages()[0].GetContent())
	}
	if _, err := s.TurnByID(context.Background(), "s", "id\xff"); err != nil {
		t.Errorf("TurnByID by the id as given: %v", err)
	}
	if rec.ToolMessages[0].Content != "bin\xff\xfeary" {
		t.Errorf("the caller's record was modified")
	}
}

// testKVCreate: a store that implements cachestore.KVCreator writes a
// record only into a free key, and of concurrent creators of one key
// exactly one wins while all read the winner's value.
func testKVCreate(t *testing.T, open Opener) {
	s, _ := open(t)
	c, ok := s.(cachestore.KVCreator)
	if !ok {
		t.Skip("the store does not implement cachestore.KVCreator")
	}
	ctx := context.Background()
	got, created, err := c.KVCreate(ctx, "ns", "k", []byte("first"))
	if err != nil || !created || string(got) != "first" {
		t.Fatalf("KVCreate into a free key = %q, %v, %v", got, created, err)
	}
	got, created, err = c.KVCreate(ctx, "ns", "k", []byte("second"))
	if err != nil || created || string(got) != "first" {
		t.Fatalf("KVCreate into a taken key = %q, %v, %v; want the first value kept", got, created, err)
	}
	if v, err := s.KVGet(ctx, "ns", "k"); err != nil || string(v) != "first" {
		t.Fatalf("KVGet after KVCreate = %q, %v", v, err)
	}
	const n = 8
	type res struct {
		v       string
		created bool
		err     error
	}
	out := make(chan res, n)
	for i := range n {
		go func() {
			v, created, err := c.KVCreate(ctx, "ns", "race", []byte{byte('a' + i)})
			out <- res{string(v), created, err}
		}()
	}
	winners, values := 0, map[string]bool{}
	for range n {
		r := <-out
		if r.err != nil {
			t.Fatalf("concurrent KVCreate: %v", r.err)
		}
		if r.created {
			winners++
		}
		values[r.v] = true
	}
	if winners != 1 || len(values) != 1 {
		t.Errorf("concurrent KVCreate: %d created, values %v; want one winner whose value all read", winners, values)
	}
}

// testKV: records of a namespace survive a restart, list in key order by
// prefix, stay apart from other namespaces, and delete idempotently.
func testKV(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	put := map[string]string{"b/2": "two", "b/1": "one", "a": "x", "b": "bare", "c/1": "c"}
	for k, v := range put {
		if err := s.KVPut(ctx, "ns", k, []byte(v)); err != nil {
			t.Fatalf("KVPut(%q): %v", k, err)
		}
	}
	if err := s.KVPut(ctx, "other", "b/1", []byte("elsewhere")); err != nil {
		t.Fatal(err)
	}
	if err := s.KVPut(ctx, "ns", "b/1", []byte("ONE")); err != nil {
		t.Fatal(err)
	}
	s = restart()
	got, err := s.KVList(ctx, "ns", "b/")
	if err != nil {
		t.Fatal(err)
	}
	want := []cachestore.KV{{Key: "b/1", Value: []byte("ONE")}, {Key: "b/2", Value: []byte("two")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("KVList(ns, b/) (-want +got):\n%s", diff)
	}
	all, err := s.KVList(ctx, "ns", "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range all {
		keys = append(keys, kv.Key)
	}
	if diff := cmp.Diff([]string{"a", "b", "b/1", "b/2", "c/1"}, keys); diff != "" {
		t.Errorf("KVList(ns, \"\") keys (-want +got):\n%s", diff)
	}
	if v, err := s.KVGet(ctx, "other", "b/1"); err != nil || string(v) != "elsewhere" {
		t.Errorf("KVGet(other, b/1) = %q, %v; want \"elsewhere\"", v, err)
	}
	for range 2 {
		if err := s.KVDelete(ctx, "ns", "b/1"); err != nil {
			t.Errorf("KVDelete(ns, b/1): %v (deleting twice is not an error)", err)
		}
	}
	if _, err := s.KVGet(ctx, "ns", "b/1"); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("KVGet of a deleted key = %v, want ErrNotFound", err)
	}
	if v, err := s.KVGet(ctx, "ns", "b/2"); err != nil || string(v) != "two" {
		t.Errorf("KVGet(ns, b/2) after deleting b/1 = %q, %v", v, err)
	}
}

// testNotFound: every "does not exist" error matches ErrNotFound and
// fs.ErrNotExist, which is how packages that see a store through a small
// interface of their own recognise it.
func testNotFound(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	Commit(t, s, "s", Record(1, "r", "tid", 1))
	if _, err := s.SaveFileVersion(ctx, "/w", "a.txt", []byte("x"), false, "edit_file"); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"KVGet", func() error { _, err := s.KVGet(ctx, "ns", "missing"); return err }},
		{"TurnByID", func() error { _, err := s.TurnByID(ctx, "s", "missing"); return err }},
		{"FileVersionContent", func() error { _, _, err := s.FileVersionContent(ctx, "/w", "a.txt", 2); return err }},
		{"FileVersionContent_of_unknown_file", func() error {
			_, _, err := s.FileVersionContent(ctx, "/w", "b.txt", 1)
			return err
		}},
	}
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, cachestore.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s of something missing = %v, want an error matching ErrNotFound and fs.ErrNotExist", c.name, err)
		}
	}
}

// testAmendToolMessage: a pending call's message is replaced once; a
// settled call refuses with ErrAlreadySettled and an unknown one with
// ErrNotFound; the amendment survives a restart. An amendment without a
// name keeps the committed message's name.
func testAmendToolMessage(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	rec := Record(1, "r", "tid", 2)
	rec.ToolMessages[1].Status = "client_pending"
	rec.ToolMessages[1].Content = ""
	Commit(t, s, "s", rec)
	// The dispatcher amends with the result only; the name stays the call's.
	got, err := s.AmendToolMessage(ctx, "s", "call_1_1", []string{"client_pending"},
		&messages.ToolMessage{Role: "tool", ToolCallId: "call_1_1", Status: "ok", Content: "from the client"})
	answer := &messages.ToolMessage{Role: "tool", ToolCallId: "call_1_1", Name: "read_files", Status: "ok", Content: "from the client"}
	if err != nil {
		t.Fatalf("AmendToolMessage: %v", err)
	}
	if got.GetTurn() != 1 || !proto.Equal(got.GetToolMessages()[1], answer) {
		t.Errorf("AmendToolMessage returned turn %d with message %v, want turn 1 with the answer", got.GetTurn(), got.GetToolMessages())
	}
	if _, err := s.AmendToolMessage(ctx, "s", "call_1_1", []string{"client_pending"}, answer); !errors.Is(err, cachestore.ErrAlreadySettled) {
		t.Errorf("second AmendToolMessage = %v, want ErrAlreadySettled", err)
	}
	if _, err := s.AmendToolMessage(ctx, "s", "call_1_0", []string{"client_pending"}, answer); !errors.Is(err, cachestore.ErrAlreadySettled) {
		t.Errorf("AmendToolMessage of an ok call = %v, want ErrAlreadySettled", err)
	}
	if _, err := s.AmendToolMessage(ctx, "s", "nope", []string{"client_pending"}, answer); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("AmendToolMessage of an unknown call = %v, want ErrNotFound", err)
	}
	s = restart()
	want := Record(1, "r", "tid", 2)
	want.ToolMessages[1] = answer
	if diff := DiffTurns([]*messages.TurnRecord{want}, Turns(t, s, "s")); diff != "" {
		t.Errorf("Turns after the amendment and a restart (-want +got):\n%s", diff)
	}
}
