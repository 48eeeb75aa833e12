package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// TestClusterStorageChaos: a cluster member's storage faults hit the
// shared store (PostgreSQL) it writes its sessions to: with a policy
// failing half the commits with a full disk, a member answers those turns
// 507 and the others 200, stores what it answered 200 and nothing of the
// others' calls that did not start, and its chaos report lists each fault
// with the 507 its client saw.
func TestClusterStorageChaos(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "chaos.toml")
	src := "seed = 3\n[[storage]]\nops = [\"commit\"]\nfaults = [{ kind = \"disk_full\", probability = 0.5 }]\n"
	if err := os.WriteFile(policy, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	// The warm-up turns are tried until one commits.
	ms, _ := startClusterWith(t, 1, ws, clusterSetup{args: []string{"--chaos", policy}})
	m := ms[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	codes := map[int64]int{}
	answered := map[string]string{}
	for i := 1; i <= 12; i++ {
		id := fmt.Sprintf("k%d", i)
		body, _ := json.Marshal(map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
			"turn_id": id, "message": map[string]any{"role": "assistant", "tool_calls": []any{commandCall(id, "echo "+id)}}})
		req, _ := http.NewRequestWithContext(ctx, "POST", m.http+"/v1/sessions/pgchaos/turns", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var r turnReply
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("turn %s: %d %s", id, resp.StatusCode, b)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			answered[id] = r.Messages[0].Status
		case http.StatusInsufficientStorage:
			if !strings.Contains(r.Error, "(disk_full injected)") {
				t.Errorf("turn %s: 507 %s, want the injected fault named", id, r.Error)
			}
		default:
			t.Fatalf("turn %s: %d %s", id, resp.StatusCode, b)
		}
		if _, dup := codes[r.Turn]; dup {
			t.Errorf("turn %s was numbered %d, as an earlier one", id, r.Turn)
		}
		codes[r.Turn] = resp.StatusCode
	}
	stored := storedStatuses(t, m.http, "pgchaos")
	for id, st := range answered {
		if stored[id] != st {
			t.Errorf("turn %s was answered %s, the shared store holds %q", id, st, stored[id])
		}
	}
	// A refused turn's call had started (its intent was written): it
	// reads outcome_unknown, never lost.
	for id, st := range stored {
		if _, ok := answered[id]; !ok && st != "outcome_unknown" {
			t.Errorf("the call of refused turn %s reads %q, want outcome_unknown", id, st)
		}
	}
	// The last turn's intent, when its commit was refused, is resolved
	// when the session is loaded again.
	want := 12
	if _, ok := answered["k12"]; !ok {
		want = 11
	}
	if len(stored) != want {
		t.Errorf("the shared store holds %d of the 12 calls, want %d: %v", len(stored), want, stored)
	}
	if code, _ := stopMember(t, m, syscall.SIGTERM, time.Minute); code != 143 {
		t.Errorf("the member exited %d, want 143", code)
	}
	out, err := exec.Command(binary, "chaos", "report", "--workspace", ws, "--data", m.data, "--session", "pgchaos", "--json").Output()
	if err != nil {
		t.Fatalf("chaos report: %v", err)
	}
	faulted := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r chaos.ReportedStorageFault
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Op == "" {
			continue
		}
		faulted++
		if r.Op != "commit" || r.Fault != chaos.StorageDiskFull || codes[r.Turn] != http.StatusInsufficientStorage ||
			!strings.HasPrefix(r.Client, "HTTP 507: ") {
			t.Errorf("report row %+v: the client of turn %d saw %d", r, r.Turn, codes[r.Turn])
		}
	}
	refused := 0
	for _, c := range codes {
		if c == http.StatusInsufficientStorage {
			refused++
		}
	}
	if refused == 0 || len(answered) == 0 || faulted != refused {
		t.Errorf("%d turns refused, %d answered, %d faults reported: want some of each, one fault a refusal", refused, len(answered), faulted)
	}
	t.Logf("12 turns: %d answered 200, %d refused 507", len(answered), refused)
}
