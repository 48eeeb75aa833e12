package badger

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

// The crash loop (TestBadgerCrashLoop) is a benchmark-style run, not a CI
// test: it runs when TOOLDISPATCH_CRASH_LOOP_RUNS says how many kills.
const (
	crashLoopRunsEnv = "TOOLDISPATCH_CRASH_LOOP_RUNS"
	crashLoopSeedEnv = "TOOLDISPATCH_CRASH_LOOP_SEED"
	// crashLoopDirEnv and crashLoopSyncEnv tell a re-executed test binary
	// to be the loop's writer on that directory, with SyncWrites or not.
	crashLoopDirEnv  = "CACHESTORE_CRASH_LOOP_DIR"
	crashLoopSyncEnv = "CACHESTORE_CRASH_LOOP_SYNC"
)

const (
	loopSessions = 4                      // sessions the writer commits turns to
	loopCalls    = 3                      // calls per turn
	loopPad      = 2 << 10                // bytes of each argument and result: turns and intents go to the value log
	loopMaxKill  = 400 * time.Millisecond // kills land uniformly in [0, loopMaxKill) after the start or after OPEN
	loopGC       = 10 * time.Millisecond  // value-log GC runs all the time
	loopTimeout  = 30 * time.Second       // one writer's life, or one check, at most
)

// loopOptions are the options of the loop's writer and checker: files as
// small as Badger allows, so that value-log files rotate, memtables flush
// and levels compact within each writer's short life, and GC all the time.
func loopOptions(dir string, sync bool) Options {
	o := TestOptions(dir)
	o.tinyFiles = true
	o.SyncWrites = sync
	o.GCInterval = loopGC
	return o
}

func loopPadding(session string, turn int64, i int, what string) string {
	unit := fmt.Sprintf("%s %s t%d c%d. ", what, session, turn, i)
	return strings.Repeat(unit, loopPad/len(unit)+1)[:loopPad]
}

// loopAssistant is the assistant message of a session's turn.
func loopAssistant(session string, turn int64) *messages.AssistantMessage {
	a := &messages.AssistantMessage{Role: "assistant", Content: fmt.Sprintf("turn %d", turn)}
	for i := range loopCalls {
		a.ToolCalls = append(a.ToolCalls, &messages.ToolCall{
			Id: fmt.Sprintf("call_%d_%d", turn, i), Type: "function",
			Function: &messages.FunctionCall{Name: "read_files", Arguments: fmt.Sprintf(`{"pad":%q}`, loopPadding(session, turn, i, "argument"))},
		})
	}
	return a
}

// loopRecord is the turn the writer commits, and the checker expects.
func loopRecord(session string, turn int64) *messages.TurnRecord {
	rec := &messages.TurnRecord{Turn: turn, Run: "r", Provider: "openai",
		TimeUnixNano: 1_700_000_000_000_000_000 + turn, Assistant: loopAssistant(session, turn)}
	for i, c := range rec.Assistant.ToolCalls {
		rec.ToolMessages = append(rec.ToolMessages, &messages.ToolMessage{
			Role: "tool", ToolCallId: c.Id, Name: "read_files", Status: "ok", Content: loopPadding(session, turn, i, "result"),
		})
	}
	return rec
}

func loopIntent(session string, turn int64) *cachestore.Intent {
	in := &cachestore.Intent{Session: session, Turn: turn, Run: "r", Provider: "openai", Assistant: loopAssistant(session, turn)}
	for i, c := range in.Assistant.ToolCalls {
		in.Started = append(in.Started, i)
		in.Names = append(in.Names, "read_files")
		in.IDs = append(in.IDs, c.Id)
	}
	return in
}

// TestCrashLoopWriter is the writer the crash loop kills: it opens the
// store (resolving what the last kill left), says OPEN, then commits turns
// to every session as fast as it can, an intent before each, and says
// COMMIT session turn after each commit returned. It does nothing in a
// normal test run.
func TestCrashLoopWriter(t *testing.T) {
	dir := os.Getenv(crashLoopDirEnv)
	if dir == "" {
		t.Skip("helper process of TestBadgerCrashLoop")
	}
	b, err := Open(loopOptions(dir, os.Getenv(crashLoopSyncEnv) == "1"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "open: %v\n", err)
		os.Exit(3)
	}
	say, fail := writerOutput()
	say("OPEN")
	ctx := context.Background()
	for i := range loopSessions {
		go func() {
			s := fmt.Sprintf("loop-%d", i)
			st, err := b.LoadSession(ctx, s)
			if err != nil {
				fail(err)
			}
			for turn := st.NextTurn; ; turn++ {
				if err := b.WriteIntent(ctx, loopIntent(s, turn)); err != nil {
					fail(err)
				}
				if err := b.CommitTurn(ctx, &cachestore.TurnCommit{Session: s, Record: loopRecord(s, turn)}); err != nil {
					fail(err)
				}
				say("COMMIT %s %d", s, turn)
			}
		}()
	}
	select {} // until killed
}

// loopFigures are what the crash loop reports.
type loopFigures struct {
	runs, killed, killedBeforeOpen, opens, committed, found, lost, resolved, vlogFiles int
}

// TestBadgerCrashLoop SIGKILLs a writer (TestCrashLoopWriter) at a random
// point of its life, hundreds of times on the same directory — while it
// opens the store and resolves the last kill's intents, while it commits,
// while Badger rotates value-log files, flushes memtables, compacts and
// rewrites the value log — and after each kill opens the directory and
// checks every turn the writer reported committed: there, whole, never
// changed afterwards; a turn it did not report is either whole or its
// intent resolved to outcome_unknown. Half the runs use SyncWrites. It
// reports runs, opens, committed turns found and lost; a directory that
// does not open is kept (its path is in the failure).
//
//	TOOLDISPATCH_CRASH_LOOP_RUNS=500 go test ./cachestore/badger -run '^TestBadgerCrashLoop$' -v -timeout 1h
func TestBadgerCrashLoop(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv(crashLoopRunsEnv))
	if runs <= 0 {
		t.Skipf("a benchmark-style crash loop: set %s to the number of kills", crashLoopRunsEnv)
	}
	seed, err := strconv.ParseUint(os.Getenv(crashLoopSeedEnv), 10, 64)
	if err != nil {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (%s)", seed, crashLoopSeedEnv)
	rng := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	var fig loopFigures
	reported := map[string]map[int64]bool{}     // turns reported committed, per session
	seen := map[string][]*messages.TurnRecord{} // the turns found by the last check
	defer func() {
		t.Logf("FIGURES crash loop: runs=%d killed=%d killed_before_open=%d opens=%d committed_reported=%d found=%d lost=%d intents_resolved=%d value_log_files=%d",
			fig.runs, fig.killed, fig.killedBeforeOpen, fig.opens, fig.committed, fig.found, fig.lost, fig.resolved, fig.vlogFiles)
	}()
	for run := range runs {
		sync := run%2 == 1
		// Every other kill counts from the writer's start, so it may land
		// in the open; the others from its OPEN, so they land among the
		// writes however slow the machine is to start a process.
		afterOpen := run%4 >= 2
		delay := time.Duration(rng.Int64N(int64(loopMaxKill)))
		opened, commits, werr := loopWriter(t, dir, sync, afterOpen, delay, reported)
		fig.runs++
		if werr != nil {
			t.Fatalf("run %d (sync %v, kill %v after the %s): %v\n%s", run, sync, delay, from(afterOpen), werr, storetest.KeepDir(dir))
		}
		fig.killed++
		fig.committed += commits
		if opened {
			fig.opens++
		} else {
			fig.killedBeforeOpen++
		}
		b, err := Open(loopOptions(dir, sync))
		if err != nil {
			t.Fatalf("run %d (sync %v, kill %v after the %s): the store does not open after the kill: %v\n%s", run, sync, delay, from(afterOpen), err, storetest.KeepDir(dir))
		}
		fig.opens++
		found, lost, resolved := loopCheck(t, b, reported, seen)
		if err := b.Close(); err != nil {
			t.Fatalf("run %d: close: %v", run, err)
		}
		fig.found, fig.lost = found, lost
		fig.resolved += resolved
		if t.Failed() {
			t.Fatalf("run %d (sync %v, kill %v after the %s) lost or changed turns\n%s", run, sync, delay, from(afterOpen), storetest.KeepDir(dir))
		}
	}
	fig.vlogFiles = highestVlog(t, dir)
}

func from(afterOpen bool) string {
	if afterOpen {
		return "OPEN"
	}
	return "start"
}

// loopWriter starts the writer on dir, SIGKILLs it delay after its start
// (or after it said OPEN, with afterOpen) and returns whether it had said OPEN and how many commits it reported
// (adding them to reported). An error means it did not die by the kill: it ended
// on its own, or failed to open the store.
func loopWriter(t *testing.T, dir string, sync, afterOpen bool, delay time.Duration, reported map[string]map[int64]bool) (opened bool, commits int, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loopTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashLoopWriter$")
	cmd.Env = append(os.Environ(), crashLoopDirEnv+"="+dir, crashLoopSyncEnv+"="+map[bool]string{true: "1", false: "0"}[sync])
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return false, 0, err
	}
	if err := cmd.Start(); err != nil {
		return false, 0, err
	}
	kill := func() { _ = cmd.Process.Signal(syscall.SIGKILL) }
	var timer *time.Timer
	if !afterOpen {
		timer = time.AfterFunc(delay, kill)
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "OPEN":
			opened = true
			if afterOpen {
				timer = time.AfterFunc(delay, kill)
			}
		case len(f) == 3 && f[0] == "COMMIT":
			n, perr := strconv.ParseInt(f[2], 10, 64)
			if perr != nil {
				return opened, commits, fmt.Errorf("bad line %q", sc.Text())
			}
			commits++
			if reported[f[1]] == nil {
				reported[f[1]] = map[int64]bool{}
			}
			reported[f[1]][n] = true
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return opened, commits, fmt.Errorf("the writer ended with %v, not by the kill; stderr:\n%s", err, stderr.String())
	}
	return opened, commits, nil
}

// loopCheck compares the store with what the writers reported and what the
// last check found. It returns the turns reported committed that are there
// whole (found) and those that are not (lost), and how many turns became
// resolved intents since the last check.
func loopCheck(t *testing.T, b *Store, reported map[string]map[int64]bool, seen map[string][]*messages.TurnRecord) (found, lost, resolved int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loopTimeout)
	defer cancel()
	for i := range loopSessions {
		s := fmt.Sprintf("loop-%d", i)
		ts, err := b.Turns(ctx, s)
		if err != nil {
			t.Errorf("%s: turns: %v", s, err)
			lost += len(reported[s])
			continue
		}
		for turn := range reported[s] {
			if turn <= int64(len(ts)) && proto.Equal(ts[turn-1], loopRecord(s, turn)) {
				found++
				continue
			}
			lost++
			t.Errorf("%s: turn %d was reported committed and is not there whole", s, turn)
		}
		for j, rec := range ts {
			turn := int64(j + 1)
			switch {
			case rec.GetTurn() != turn:
				t.Errorf("%s: turn %d stored as %d", s, turn, rec.GetTurn())
			case proto.Equal(rec, loopRecord(s, turn)):
			case !allStatus(rec, cachestore.StatusOutcomeUnknown):
				t.Errorf("%s: turn %d is neither the committed turn nor a resolved intent: %v", s, turn, rec)
			case j >= len(seen[s]):
				// The writer was killed after its intent; the open resolved it.
				resolved++
			}
			if j < len(seen[s]) && !proto.Equal(rec, seen[s][j]) {
				t.Errorf("%s: turn %d changed since the last check", s, turn)
			}
		}
		if len(ts) < len(seen[s]) {
			t.Errorf("%s: %d turns, the last check found %d", s, len(ts), len(seen[s]))
		}
		seen[s] = ts
	}
	return found, lost, resolved
}

// highestVlog returns the highest value-log file number in dir: how many
// value-log files the runs created (one per open, one per rotation).
func highestVlog(t *testing.T, dir string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	hi := 0
	for _, n := range names {
		if v, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(n), ".vlog")); err == nil {
			hi = max(hi, v)
		}
	}
	return hi
}
