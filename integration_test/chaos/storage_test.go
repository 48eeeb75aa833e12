package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// Chaos mode's storage faults through `serve` and `run`, real processes on
// Badger: a seeded policy of storage rules fails or slows the intents and
// commits of turns. Each test checks what the client saw against the chaos
// report, that nothing is half-written, that no call ran twice, that no
// turn the client was answered is lost, that the next turn works once the
// fault is over (a restart without the policy), and that the same seed
// gives the same faults whatever the scheduling, another seed others.

// storagePolicyTOML hits intents and commits with every storage fault.
const storagePolicyTOML = `seed = %d
[[storage]]
ops = ["intent"]
faults = [
  { kind = "write_error", probability = 0.1 },
  { kind = "disk_full", probability = 0.1 },
  { kind = "stall", probability = 0.1, min = "5ms", max = "60ms" },
]
[[storage]]
ops = ["commit"]
faults = [
  { kind = "disk_full", probability = 0.12 },
  { kind = "write_error", probability = 0.12 },
  { kind = "sync_error", probability = 0.12 },
  { kind = "slow_fsync", probability = 0.12, min = "5ms", max = "60ms" },
  { kind = "stall", probability = 0.12, delay = "40ms" },
]
`

// storagePolicy writes the policy with seed and returns its file.
func storagePolicy(t *testing.T, seed uint64) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "chaos.toml")
	if err := os.WriteFile(f, fmt.Appendf(nil, storagePolicyTOML, seed), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// storageTurn is one turn of two mutating calls that record their run in
// the workspace's ran.log.
type storageTurn struct {
	session, turnID string
	calls           []string
}

func (k storageTurn) body() []byte {
	var tcs []map[string]any
	for _, c := range k.calls {
		args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "echo " + c + " >> ran.log"}})
		tcs = append(tcs, map[string]any{"id": c, "type": "function", "function": map[string]any{"name": "run_command", "arguments": string(args)}})
	}
	b, _ := json.Marshal(map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true,
		"turn_id": k.turnID, "approve": "all", "message": map[string]any{"role": "assistant", "tool_calls": tcs}})
	return b
}

func storageTurns(sessions []string, turns int, prefix string) map[string][]storageTurn {
	out := map[string][]storageTurn{}
	for _, s := range sessions {
		for i := 1; i <= turns; i++ {
			id := fmt.Sprintf("%s%s-t%d", prefix, s, i)
			out[s] = append(out[s], storageTurn{session: s, turnID: id, calls: []string{id + "a", id + "b"}})
		}
	}
	return out
}

// maxAnswer is how much of an answer chaos mode records.
const maxAnswer = 300

// answer is what the client of one turn was answered.
type answer struct {
	code     int
	turn     int64
	statuses []string // "id=status", in call order (200)
	err      string   // the error (a failure)
}

// seen is the answer as chaos mode records it for serve.
func (a answer) seen() string {
	if a.code == http.StatusOK {
		return fmt.Sprintf("HTTP %d: %s", a.code, strings.Join(a.statuses, " "))
	}
	return fmt.Sprintf("HTTP %d: %s", a.code, a.err)
}

func postStorageTurn(ctx context.Context, base string, k storageTurn) (answer, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/sessions/"+k.session+"/turns", bytes.NewReader(k.body()))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Turn     int64  `json:"turn"`
		Error    string `json:"error"`
		Messages []struct {
			ID     string `json:"tool_call_id"`
			Status string `json:"status"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return answer{}, fmt.Errorf("%d %s: %v", resp.StatusCode, b, err)
	}
	a := answer{code: resp.StatusCode, turn: r.Turn, err: r.Error}
	for _, m := range r.Messages {
		a.statuses = append(a.statuses, m.ID+"="+m.Status)
	}
	return a, nil
}

// serveStorageTurns posts every session's turns, the sessions at once and
// each session's turns one after the other, in the order order gives the
// sessions; with serial set, one session after the other.
func serveStorageTurns(t *testing.T, s *server, turns map[string][]storageTurn, order []string, serial bool) map[string]answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	got := map[string]answer{}
	var wg sync.WaitGroup
	for _, sess := range order {
		post := func() {
			for _, k := range turns[sess] {
				a, err := postStorageTurn(ctx, s.url, k)
				if err != nil {
					t.Errorf("turn %s: %v", k.turnID, err)
					return
				}
				mu.Lock()
				got[k.turnID] = a
				mu.Unlock()
			}
		}
		if serial {
			post()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); post() }()
	}
	wg.Wait()
	return got
}

// storageRows is chaos report's storage faults of session.
func storageRows(t *testing.T, ws, data, session string) []chaos.ReportedStorageFault {
	t.Helper()
	out, err := exec.Command(binary, "chaos", "report", "--workspace", ws, "--data", data, "--session", session, "--json").Output()
	if err != nil {
		var xe *exec.ExitError
		if errors.As(err, &xe) {
			t.Fatalf("chaos report: %v\n%s", err, xe.Stderr)
		}
		t.Fatalf("chaos report: %v", err)
	}
	var rows []chaos.ReportedStorageFault
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if !bytes.Contains(line, []byte(`"op":`)) {
			continue
		}
		var r chaos.ReportedStorageFault
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("report line %s: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// faultList is rows without their times, one string a fault, for
// comparing two runs.
func faultList(rows []chaos.ReportedStorageFault) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s %s %s %d %s %s %s | %s", r.Op, r.Session, r.Run, r.Turn, r.Key, r.Fault, r.Delay, r.Client))
	}
	slices.Sort(out)
	return out
}

// ranCounts reads the workspace's ran.log: how often each call ran.
func ranCounts(ws string) map[string]int {
	ran := map[string]int{}
	for _, id := range strings.Fields(readFile(filepath.Join(ws, "ran.log"))) {
		ran[id]++
	}
	return ran
}

// checkStored: every call of every committed turn of the sessions has one
// result (readSession), no call ran twice, a call reads ok only if it ran
// once and error or canceled only if it never ran; every call the client
// was answered is stored as it was answered; with all set, every call of
// turns has a result (none lost).
func checkStored(t *testing.T, ws, data string, turns map[string][]storageTurn, answers map[string]answer, all bool) map[string]string {
	t.Helper()
	stored := map[string]string{}
	for sess := range turns {
		for id, st := range readSession(t, ws, data, sess).status {
			stored[id] = st
		}
	}
	ran := ranCounts(ws)
	for id, n := range ran {
		if n > 1 {
			t.Errorf("INVARIANT: call %s ran %d times", id, n)
		}
	}
	for id, st := range stored {
		switch st {
		case "ok":
			if ran[id] != 1 {
				t.Errorf("INVARIANT: call %s reads ok but ran %d times", id, ran[id])
			}
		case "outcome_unknown":
		case "error", "canceled":
			if ran[id] != 0 {
				t.Errorf("INVARIANT: call %s reads %s but ran", id, st)
			}
		default:
			t.Errorf("INVARIANT: call %s reads %q", id, st)
		}
	}
	for _, a := range answers {
		for _, s := range a.statuses {
			id, st, _ := strings.Cut(s, "=")
			if stored[id] != st {
				t.Errorf("INVARIANT: the client was answered %s=%s, the store holds %q", id, st, stored[id])
			}
		}
	}
	if all {
		for _, ks := range turns {
			for _, k := range ks {
				for _, c := range k.calls {
					if _, ok := stored[c]; !ok {
						t.Errorf("INVARIANT: call %s has no result", c)
					}
				}
			}
		}
	}
	return stored
}

// checkServeAnswers checks each storage fault against what the client of
// its turn saw, and each failed answer against a fault: a full disk at
// the commit is 507, a write error or failing fsync there 500, a failing
// intent a 200 whose calls from that intent on read error, a slow fsync or
// a stall a 200.
func checkServeAnswers(t *testing.T, rows []chaos.ReportedStorageFault, answers map[string]answer) {
	t.Helper()
	byTurn := map[string][]answer{}
	for id, a := range answers {
		sess := id[:strings.Index(id, "-")]
		k := fmt.Sprintf("%s/%d", sess, a.turn)
		byTurn[k] = append(byTurn[k], a)
	}
	commitFault := map[string]string{}
	for _, r := range rows {
		k := fmt.Sprintf("%s/%d", r.Session, r.Turn)
		i := slices.IndexFunc(byTurn[k], func(a answer) bool { return messages.ClipText(a.seen(), maxAnswer) == r.Client })
		if i < 0 {
			t.Errorf("%s fault of turn %s: the report says the client saw %q; the client saw %v", r.Fault, k, r.Client, byTurn[k])
			continue
		}
		a := byTurn[k][i]
		want := http.StatusOK
		switch {
		case r.Op == "commit" && r.Fault == chaos.StorageDiskFull:
			want = http.StatusInsufficientStorage
		case r.Op == "commit" && (r.Fault == chaos.StorageWriteError || r.Fault == chaos.StorageSyncError):
			want = http.StatusInternalServerError
		case r.Op == "intent" && (r.Fault == chaos.StorageWriteError || r.Fault == chaos.StorageDiskFull) && a.code == http.StatusOK:
			ids := strings.Split(r.Key, ",")
			if last := ids[len(ids)-1] + "=error"; !slices.Contains(a.statuses, last) {
				t.Errorf("%s at the intent of %s (calls %s): the client saw %v, want %s", r.Fault, k, r.Key, a.statuses, last)
			}
		}
		if r.Op == "commit" {
			commitFault[k] = r.Fault
			if a.code != want {
				t.Errorf("%s at the commit of %s: the client saw %d, want %d", r.Fault, k, a.code, want)
			}
		}
	}
	for id, a := range answers {
		sess := id[:strings.Index(id, "-")]
		k := fmt.Sprintf("%s/%d", sess, a.turn)
		switch a.code {
		case http.StatusOK:
		case http.StatusInsufficientStorage, http.StatusInternalServerError:
			if commitFault[k] == "" {
				t.Errorf("turn %s (%s) was answered %d %s with no storage fault at its commit", id, k, a.code, a.err)
			}
		default:
			t.Errorf("turn %s was answered %d %s", id, a.code, a.err)
		}
	}
}

// coverage fails the test unless rows hold every fault kind at both
// operations the policy names.
func coverage(t *testing.T, rows []chaos.ReportedStorageFault, seed uint64) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Op+" "+r.Fault]++
	}
	for _, want := range []string{"intent write_error", "intent disk_full", "intent stall", "commit disk_full", "commit write_error",
		"commit sync_error", "commit slow_fsync", "commit stall"} {
		if seen[want] == 0 {
			t.Errorf("seed %d injected no %s: this run does not exercise it (faults: %v)", seed, want, seen)
		}
	}
	t.Logf("seed %d: faults %v", seed, seen)
}

var storageSessions = []string{"sa", "sb", "sc", "sd"}

// TestStorageFaultsServe: serve with a seeded policy of storage faults
// takes 40 turns of 4 sessions at once; every fault is in the chaos report
// with what the client saw, the store holds what the clients were
// answered and nothing half-written, no call ran twice; restarted without
// the policy, every turn sent again with its turn_id is answered (replayed
// or run) and the next turn works. The same seed on another data folder,
// sessions one after the other and one call at a time, injects the same
// faults at the same operations; another seed others.
func TestStorageFaultsServe(t *testing.T) {
	seed := seed(t)
	ws, data := t.TempDir(), t.TempDir()
	turns := storageTurns(storageSessions, 10, "")
	s := startServer(t, ws, data, "--chaos", storagePolicy(t, seed))
	answers := serveStorageTurns(t, s, turns, storageSessions, false)
	s.stop(t)
	var rows []chaos.ReportedStorageFault
	for _, sess := range storageSessions {
		rows = append(rows, storageRows(t, ws, data, sess)...)
	}
	coverage(t, rows, seed)
	checkServeAnswers(t, rows, answers)
	checkStored(t, ws, data, turns, answers, false)
	codes := map[int]int{}
	for _, a := range answers {
		codes[a.code]++
	}

	// The fault is over: the same turns again, then one more each.
	s = startServer(t, ws, data)
	again := serveStorageTurns(t, s, turns, storageSessions, false)
	for id, a := range again {
		if a.code != http.StatusOK {
			t.Errorf("turn %s sent again once the faults are over: %d %s", id, a.code, a.err)
		}
		if first := answers[id]; first.code == http.StatusOK && !slices.Equal(first.statuses, a.statuses) {
			t.Errorf("turn %s was answered %v, then replayed as %v", id, first.statuses, a.statuses)
		}
	}
	next := storageTurns(storageSessions, 1, "next-")
	for id, a := range serveStorageTurns(t, s, next, storageSessions, false) {
		if a.code != http.StatusOK || !slices.Equal(a.statuses, []string{id + "a=ok", id + "b=ok"}) {
			t.Errorf("the next turn %s: %d %v %s", id, a.code, a.statuses, a.err)
		}
	}
	s.stop(t)
	for sess, ks := range next {
		turns[sess] = append(turns[sess], ks...)
	}
	stored := checkStored(t, ws, data, turns, answers, true)
	checkStored(t, ws, data, turns, again, true)
	unknown := 0
	for _, st := range stored {
		if st == "outcome_unknown" {
			unknown++
		}
	}

	// Replay: the same seed, another scheduling; then another seed.
	replay := func(seed uint64, extra ...string) []string {
		ws, data := t.TempDir(), t.TempDir()
		s := startServer(t, ws, data, append([]string{"--chaos", storagePolicy(t, seed)}, extra...)...)
		reversed := slices.Clone(storageSessions)
		slices.Reverse(reversed)
		serveStorageTurns(t, s, storageTurns(storageSessions, 10, ""), reversed, true)
		s.stop(t)
		var rows []chaos.ReportedStorageFault
		for _, sess := range storageSessions {
			rows = append(rows, storageRows(t, ws, data, sess)...)
		}
		return faultList(rows)
	}
	first := faultList(rows)
	if diff := listDiff(first, replay(seed, "--max-concurrency", "1")); diff != "" {
		t.Errorf("seed %d injected other faults in another scheduling:\n%s", seed, diff)
	}
	if other := replay(seed + 1); slices.Equal(first, other) {
		t.Errorf("seeds %d and %d injected the same %d faults", seed, seed+1, len(first))
	}
	t.Logf("FIGURES storage serve: turns=%d faults=%d answers=%v calls=%d outcome_unknown=%d lost=0 duplicates=0",
		len(answers), len(rows), codes, len(stored), unknown)
}

// listDiff lists what is in one sorted list and not the other.
func listDiff(a, b []string) string {
	var out strings.Builder
	for _, x := range a {
		if !slices.Contains(b, x) {
			fmt.Fprintf(&out, "- %s\n", x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			fmt.Fprintf(&out, "+ %s\n", x)
		}
	}
	return out.String()
}

// runBinary runs the command and returns its exit status and outputs.
func runBinary(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var xe *exec.ExitError
	switch {
	case errors.As(err, &xe):
		return xe.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatalf("%v: %v", args, err)
	}
	return 0, out.String(), errb.String()
}

// printedStatuses reads run's results: status by call id.
func printedStatuses(t *testing.T, stdout string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			ID     string `json:"tool_call_id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.ID == "" {
			t.Fatalf("run printed %q (%v)", line, err)
		}
		got[m.ID] = m.Status
	}
	return got
}

// runStorageChaos runs rounds of 4 turns through run with the policy of
// seed, each round followed by a run without it over the same input (the
// fault is over: what was committed is replayed, the rest runs), checking
// each round; it returns the faults and run's exit statuses.
func runStorageChaos(t *testing.T, seed uint64, rounds int) (faults []string, exits []int) {
	t.Helper()
	ws, data := t.TempDir(), t.TempDir()
	policy := storagePolicy(t, seed)
	const session = "rs"
	all := map[string][]storageTurn{}
	printed := map[string]answer{}
	var rows []chaos.ReportedStorageFault
	for i := range rounds {
		turns := storageTurns([]string{session}, 4, fmt.Sprintf("r%02d", i))[session]
		all[session] = append(all[session], turns...)
		var lines []string
		for _, k := range turns {
			lines = append(lines, string(k.body()))
		}
		input := filepath.Join(t.TempDir(), "turns.jsonl")
		if err := os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"run", "--workspace", ws, "--data", data, "--approve", "all", "--shell", "--events=false",
			"--session", session, "--run", "r", input}
		code, stdout, stderr := runBinary(t, append(args, "--chaos", policy)...)
		exits = append(exits, code)
		got := printedStatuses(t, stdout)
		for id, st := range got {
			printed[id] = answer{statuses: []string{id + "=" + st}}
		}
		all := storageRows(t, ws, data, session)
		fresh := all[len(rows):]
		rows = all
		checkRunRound(t, i, code, stderr, got, fresh)
		if code, _, stderr := runBinary(t, args...); code != 0 {
			t.Fatalf("round %d: run without the policy: exit %d\n%s", i, code, stderr)
		}
	}
	checkStored(t, ws, data, all, printed, true)
	// run's messages name the data folder, which differs between runs.
	for i := range rows {
		c := strings.ReplaceAll(rows[i].Client, data, "DATA")
		rows[i].Client = c[:min(len(c), 200)]
	}
	return faultList(rows), exits
}

// checkRunRound checks one round's faults against what run printed and
// its exit status: 0 when no commit failed, else 4 for a full disk at the
// commit, 3 for a write error or a failing fsync there.
func checkRunRound(t *testing.T, round, code int, stderr string, printed map[string]string, rows []chaos.ReportedStorageFault) {
	t.Helper()
	wantCode := 0
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r.Client, "printed: "):
			for _, s := range strings.Fields(strings.TrimPrefix(r.Client, "printed: ")) {
				id, st, _ := strings.Cut(s, "=")
				if printed[id] != st {
					t.Errorf("round %d: the report says run printed %s=%s, it printed %q", round, id, st, printed[id])
				}
			}
			if r.Op == "commit" && (r.Fault == chaos.StorageDiskFull || r.Fault == chaos.StorageWriteError || r.Fault == chaos.StorageSyncError) {
				t.Errorf("round %d: %s at the commit of turn %d, and its results were printed", round, r.Fault, r.Turn)
			}
		case strings.HasPrefix(r.Client, fmt.Sprintf("exit %d: ", code)):
			if r.Op != "commit" {
				continue
			}
			switch r.Fault {
			case chaos.StorageDiskFull:
				wantCode = 4
			case chaos.StorageWriteError, chaos.StorageSyncError:
				wantCode = 3
			default:
				t.Errorf("round %d: run stopped (exit %d) after a %s at the commit", round, code, r.Fault)
			}
		default:
			t.Errorf("round %d: %s at the %s of turn %d: the report says run answered %q; run exited %d", round, r.Fault, r.Op, r.Turn, r.Client, code)
		}
	}
	if code != wantCode {
		t.Errorf("round %d: run exited %d, want %d by its faults %+v\n%s", round, code, wantCode, rows, stderr)
	}
	if code != 0 && !strings.Contains(stderr, "injected)") {
		t.Errorf("round %d: run's message does not name the injected fault:\n%s", round, stderr)
	}
}

// TestStorageFaultsRun: run with a seeded policy of storage faults stops
// at a failed commit with the exit status the storage-fault docs give (4
// for a full disk, 3 otherwise) and the injected fault named, goes on
// after a failed intent (its calls error) or a slow commit; chaos report
// lists each fault with what run printed or its exit status; the run
// without the policy replays what was committed and runs the rest,
// nothing half-written, nothing run twice, nothing printed lost. Two runs
// of the rounds with one seed give the same faults and exit statuses,
// another seed others.
func TestStorageFaultsRun(t *testing.T) {
	seed := seed(t)
	const rounds = 6
	first, exits := runStorageChaos(t, seed, rounds)
	if len(first) == 0 || !slices.ContainsFunc(exits, func(c int) bool { return c != 0 }) {
		t.Errorf("seed %d: %d faults, exits %v: want faults and a stopped run", seed, len(first), exits)
	}
	again, exits2 := runStorageChaos(t, seed, rounds)
	if diff := listDiff(first, again); diff != "" || !slices.Equal(exits, exits2) {
		t.Errorf("seed %d twice: exits %v and %v, faults differ:\n%s", seed, exits, exits2, diff)
	}
	other, _ := runStorageChaos(t, seed+1, rounds)
	if slices.Equal(first, other) {
		t.Errorf("seeds %d and %d injected the same %d faults", seed, seed+1, len(first))
	}
	t.Logf("FIGURES storage run: rounds=%d turns=%d faults=%d exits=%v", rounds, 4*rounds, len(first), exits)
}
