package badger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

// crashDirEnv tells a re-executed test binary to act as the crash-test
// writer on the Badger directory it names.
const crashDirEnv = "CACHESTORE_CRASH_DIR"

const (
	crashWriters      = 6 // sessions committing turns in a loop
	crashStuck        = 3 // sessions whose turn 2 stays an intent
	crashMinCommitted = 150
	crashTimeout      = 2 * time.Minute
)

// TestHelperProcess is the writer the crash test kills. It does nothing in
// a normal test run.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process of TestBadgerCrashRecovery")
	}
	opts := TestOptions(dir)
	opts.SyncWrites = true
	b, err := Open(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open: %v\n", err)
		os.Exit(3)
	}
	ctx := context.Background()
	say, fail := writerOutput()
	for i := range crashStuck {
		id := fmt.Sprintf("stuck-%d", i)
		if err := b.CommitTurn(ctx, &cachestore.TurnCommit{Session: id, Record: storetest.Record(1, "r", "", 2)}); err != nil {
			fail(err)
		}
		if err := b.WriteIntent(ctx, storetest.CrashIntent(id, 2)); err != nil {
			fail(err)
		}
		say("STUCK %s", id)
	}
	for i := range crashWriters {
		go func() {
			id := fmt.Sprintf("writer-%d", i)
			for turn := int64(1); ; turn++ {
				in := &cachestore.Intent{Session: id, Turn: turn, Run: "r", Started: []int{0, 1, 2},
					Names: []string{"read_files", "read_files", "read_files"},
					IDs:   []string{fmt.Sprintf("call_%d_0", turn), fmt.Sprintf("call_%d_1", turn), fmt.Sprintf("call_%d_2", turn)}}
				if err := b.WriteIntent(ctx, in); err != nil {
					fail(err)
				}
				say("INTENT %s %d", id, turn)
				if err := b.CommitTurn(ctx, &cachestore.TurnCommit{Session: id, Record: storetest.Record(turn, "r", "", 3),
					FetchedAdd: []string{fmt.Sprintf("tool-%d", turn)}}); err != nil {
					fail(err)
				}
				say("COMMIT %s %d", id, turn)
			}
		}()
	}
	select {} // until killed
}

// TestBadgerCrashRecovery SIGKILLs a process in the middle of writing
// intents and commits, then reopens its directory: every turn it reported
// committed is there, and every intent became a turn.
func TestBadgerCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), crashTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	committed := map[string]int64{} // highest turn reported committed
	intended := map[string]int64{}  // highest turn reported with an intent
	stuck, total := 0, 0
	sc := bufio.NewScanner(stdout)
	read := func() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "STUCK":
			stuck++
		case len(f) == 3 && (f[0] == "COMMIT" || f[0] == "INTENT"):
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("bad line %q", sc.Text())
			}
			if f[0] == "COMMIT" {
				committed[f[1]] = n
				total++
			} else {
				intended[f[1]] = n
			}
		}
	}
	for sc.Scan() {
		read()
		if stuck == crashStuck && total >= crashMinCommitted {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	// The writer went on until the kill reached it: what it reported in
	// the meantime is still in the pipe, and counts.
	for sc.Scan() {
		read()
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("writer ended with %v, not by SIGKILL; stderr:\n%s", err, stderr.String())
	}
	if stuck != crashStuck || total < crashMinCommitted {
		t.Fatalf("writer reported %d stuck sessions and %d commits before ending; stderr:\n%s", stuck, total, stderr.String())
	}

	b := mustOpen(t, TestOptions(dir))
	bg := context.Background()
	for i := range crashStuck {
		id := fmt.Sprintf("stuck-%d", i)
		ts := storetest.Turns(t, b, id)
		if len(ts) != 2 {
			t.Fatalf("%s has %d turns, want 2", id, len(ts))
		}
		if diff := storetest.DiffTurns([]*messages.TurnRecord{storetest.ResolvedCrashIntent(2)}, ts[1:], storetest.IgnoreTime); diff != "" {
			t.Errorf("%s: recovered turn (-want +got):\n%s", id, diff)
		}
	}
	resolved := 0
	for i := range crashWriters {
		id := fmt.Sprintf("writer-%d", i)
		ts := storetest.Turns(t, b, id)
		if int64(len(ts)) < committed[id] {
			t.Errorf("%s: %d turns after the crash, %d were reported committed", id, len(ts), committed[id])
		}
		if int64(len(ts)) > max(committed[id], intended[id])+1 {
			t.Errorf("%s: %d turns, more than were started", id, len(ts))
		}
		for j, rec := range ts {
			turn := int64(j + 1)
			if rec.Turn != turn {
				t.Fatalf("%s: turn %d stored as %d", id, turn, rec.Turn)
			}
			last := j == len(ts)-1
			switch {
			case proto.Equal(rec, storetest.Record(turn, "r", "", 3)):
			case last && turn > committed[id] && allStatus(rec, cachestore.StatusOutcomeUnknown):
				// The intent of the turn in flight, resolved on open.
				resolved++
			default:
				t.Errorf("%s: turn %d = %v", id, turn, rec)
			}
		}
		if rs := storetest.LoadRun(t, b, id, "r"); int64(len(rs.Fetched)) < committed[id] {
			t.Errorf("%s: %d fetched marks, want at least %d", id, len(rs.Fetched), committed[id])
		}
	}
	t.Logf("killed after %d reported commits; %d writer turns in flight were resolved", total, resolved)
	if n := countPrefix(t, b, prefixIntent); n != 0 {
		t.Errorf("%d intent records left after reopening", n)
	}
	if n, err := b.RecoverAll(bg); err != nil || n != 0 {
		t.Errorf("RecoverAll after reopening = %d, %v; want 0", n, err)
	}
}

func allStatus(rec *messages.TurnRecord, status string) bool {
	for _, m := range rec.GetToolMessages() {
		if m.GetStatus() != status {
			return false
		}
	}
	return len(rec.GetToolMessages()) > 0
}

func countPrefix(t *testing.T, b *Store, prefix string) int {
	t.Helper()
	n := 0
	err := b.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte(prefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// writerOutput gives a crash test's writer process its two ways to speak:
// say writes a line to stdout (lines of concurrent writers never mix),
// fail writes the error to stderr and exits 4.
func writerOutput() (say func(format string, args ...any), fail func(error)) {
	var mu sync.Mutex
	say = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	fail = func(err error) {
		fmt.Fprintf(os.Stderr, "writer: %v\n", err)
		os.Exit(4)
	}
	return say, fail
}
