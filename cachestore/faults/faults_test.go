package faults_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/faults"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
	"github.com/tooldispatch/tooldispatch/messages"
)

func put(s cachestore.Store, key string) error {
	return s.KVPut(context.Background(), "ns", key, []byte("v"))
}

func stored(t *testing.T, m *cachestore.Memory, key string) bool {
	t.Helper()
	_, err := m.KVGet(context.Background(), "ns", key)
	if err != nil && !errors.Is(err, cachestore.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestNthWrite: a rule hits the Nth matching write and Count-1 after it,
// only its own kinds and session, and writes nothing it fails.
func TestNthWrite(t *testing.T) {
	m := cachestore.NewMemory()
	in := faults.New(faults.Rule{Ops: []seam.Kind{seam.KVPut}, Nth: 2, Count: 2, Fault: faults.Fault{Kind: faults.WriteError}})
	s := in.Wrap(m)
	var got []bool
	for _, k := range []string{"a", "b", "c", "d"} {
		err := put(s, k)
		if err != nil && !errors.Is(err, faults.ErrInjected) {
			t.Fatalf("put %s: %v", k, err)
		}
		got = append(got, err == nil)
		if stored(t, m, k) != (err == nil) {
			t.Errorf("put %s: error %v, stored %v", k, err, stored(t, m, k))
		}
	}
	if want := []bool{true, false, false, true}; !equal(got, want) {
		t.Errorf("writes succeeded %v, want %v", got, want)
	}
	if _, _, err := s.CacheGet(context.Background(), "k", time.Now()); err != nil {
		t.Errorf("a read under a write rule: %v", err)
	}
	if n := in.Count(faults.WriteError); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}

	in.Set(faults.Rule{Session: "other", Fault: faults.Fault{Kind: faults.WriteError}})
	if _, err := s.LoadSession(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if err := s.EndRun(context.Background(), "s", "r"); err != nil {
		t.Errorf("a rule of another session hit session s: %v", err)
	}
	if err := s.EndRun(context.Background(), "other", "r"); !errors.Is(err, faults.ErrInjected) {
		t.Errorf("the rule of session other missed it: %v", err)
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestKinds: what each kind does to a write and to a read.
func TestKinds(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		stored   bool
		noSpace  bool
		readFail bool
	}{
		{faults.WriteError, false, false, false},
		{faults.DiskFull, false, true, false},
		{faults.SyncError, true, false, false},
		{faults.ReadError, true, false, true},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			m := cachestore.NewMemory()
			in := faults.New(faults.Rule{Ops: []seam.Kind{seam.KVPut, seam.KVGet}, Count: -1, Fault: faults.Fault{Kind: tc.kind}})
			s := in.Wrap(m)
			err := put(s, "k")
			if got := stored(t, m, "k"); got != tc.stored {
				t.Errorf("stored = %v, want %v (error %v)", got, tc.stored, err)
			}
			if wantErr := tc.kind != faults.ReadError; (err != nil) != wantErr {
				t.Errorf("write error = %v, want an error: %v", err, wantErr)
			}
			if errors.Is(err, cachestore.ErrNoSpace) != tc.noSpace {
				t.Errorf("errors.Is(%v, ErrNoSpace) = %v", err, !tc.noSpace)
			}
			_, rerr := s.KVGet(context.Background(), "ns", "k")
			if tc.readFail != (rerr != nil && errors.Is(rerr, faults.ErrInjected)) {
				t.Errorf("read error = %v", rerr)
			}
		})
	}
}

// TestStallAndSlowSync: a stall holds the write until Release (or the
// caller gives up, writing nothing); a slow fsync returns after its delay
// with the write applied.
func TestStallAndSlowSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := cachestore.NewMemory()
		in := faults.New(faults.Rule{Ops: []seam.Kind{seam.KVPut}, Count: -1, Fault: faults.Fault{Kind: faults.Stall}})
		s := in.Wrap(m)
		done := make(chan error, 1)
		go func() { done <- put(s, "a") }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a stalled write returned: %v", err)
		default:
		}
		in.Release()
		if err := <-done; err != nil || !stored(t, m, "a") {
			t.Fatalf("the released write: %v, stored %v", err, stored(t, m, "a"))
		}

		in.Rearm()
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- s.KVPut(ctx, "ns", "b", []byte("v")) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || stored(t, m, "b") {
			t.Fatalf("a stalled write given up: %v, stored %v", err, stored(t, m, "b"))
		}

		in.Set(faults.Rule{Ops: []seam.Kind{seam.KVPut}, Fault: faults.Fault{Kind: faults.SlowSync, Delay: 3 * time.Second}})
		start := time.Now()
		if err := put(s, "c"); err != nil || !stored(t, m, "c") {
			t.Fatalf("a slow fsync: %v", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("the slow fsync took %v, want its delay", d)
		}
	})
}

// TestDecide: the chaos decision sees each operation with the count of
// the earlier ones of its kind, session and turn.
func TestDecide(t *testing.T) {
	m := cachestore.NewMemory()
	in := faults.New()
	var attempts []int
	in.SetDecide(func(op *seam.Op, attempt int) (faults.Fault, bool) {
		if op.Kind != seam.EndRun {
			return faults.Fault{}, false
		}
		attempts = append(attempts, attempt)
		return faults.Fault{Kind: faults.WriteError}, attempt == 1
	})
	var recorded []faults.Injected
	in.OnInject = func(j faults.Injected) { recorded = append(recorded, j) }
	s := in.Wrap(m)
	ctx := context.Background()
	var errs []bool
	for range 3 {
		errs = append(errs, s.EndRun(ctx, "s", "r") != nil)
	}
	if !equal(errs, []bool{false, true, false}) || len(attempts) != 3 || attempts[2] != 2 {
		t.Errorf("errors %v, attempts %v", errs, attempts)
	}
	if len(recorded) != 1 || recorded[0].Op.Kind != seam.EndRun || recorded[0].Fault.Kind != faults.WriteError {
		t.Errorf("OnInject got %+v", recorded)
	}
}

// TestDecideAttemptsOutlastOtherSessions: the attempt a decision sees is
// the count of the same operation before it, however many operations of
// other sessions came between: a turn's commit tried again after a
// failure is its attempt 1 even after 70 000 other sessions' turns
// committed (their counts are dropped once they commit, so the counts
// kept stay few).
func TestDecideAttemptsOutlastOtherSessions(t *testing.T) {
	m := cachestore.NewMemory()
	in := faults.New()
	var seen []int
	in.SetDecide(func(op *seam.Op, attempt int) (faults.Fault, bool) {
		if op.Session != "s" {
			return faults.Fault{}, false
		}
		seen = append(seen, attempt)
		return faults.Fault{Kind: faults.WriteError}, attempt == 0
	})
	s := in.Wrap(m)
	ctx := context.Background()
	commit := func(session string) error {
		rec := &messages.TurnRecord{Turn: 1, Run: "r", Assistant: &messages.AssistantMessage{Role: "assistant"}}
		return s.CommitTurn(ctx, &cachestore.TurnCommit{Session: session, Record: rec})
	}
	if err := commit("s"); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("the first commit of s: %v, want the injected fault", err)
	}
	for i := range 70000 {
		if err := commit(fmt.Sprintf("o%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := commit("s"); err != nil {
		t.Fatalf("the commit of s tried again: %v", err)
	}
	if !slices.Equal(seen, []int{0, 1}) {
		t.Errorf("the commits of s were decided as attempts %v, want [0 1]", seen)
	}
	if n := faults.TrackedAttempts(in); n > 16 {
		t.Errorf("%d attempt counts kept after every session but s committed", n)
	}
}
