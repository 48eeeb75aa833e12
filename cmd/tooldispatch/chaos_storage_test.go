package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore/faults"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// TestStorageNamesAgree: the operations and fault kinds a chaos policy's
// storage rules may name are the store seam's writes and the fault
// injector's kinds, by the same names.
func TestStorageNamesAgree(t *testing.T) {
	for _, name := range chaos.StorageOps {
		if k, ok := seam.ParseKind(name); !ok || !k.Write() {
			t.Errorf("chaos.StorageOps names %q, which is no write of the store's seam", name)
		}
	}
	for _, kind := range chaos.StorageKinds {
		if !slices.Contains(faults.Kinds, kind) || kind == faults.ReadError {
			t.Errorf("chaos.StorageKinds names %q, which is no write fault of cachestore/faults", kind)
		}
	}
}

// storageReport is the storage rows of chaos report --json for session.
func storageReport(t *testing.T, ws, data, session string) []chaos.ReportedStorageFault {
	t.Helper()
	code, stdout, stderr := execute(t, nil, "chaos", "report", "--workspace", ws, "--data", data, "--session", session, "--json")
	if code != 0 {
		t.Fatalf("chaos report: exit %d: %s", code, stderr)
	}
	var rows []chaos.ReportedStorageFault
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if !strings.Contains(line, `"op":`) {
			continue
		}
		var r chaos.ReportedStorageFault
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("report line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestRunChaosStorageFaults: a chaos policy's storage rules, from a
// policy file (--chaos) or the configuration ([chaos]), inject their
// faults into run's store: a full disk at the commit stops run with exit
// 4 and the injected fault named, and chaos report lists it with what run
// answered; slow fsyncs and stalls delay turns that then succeed.
func TestRunChaosStorageFaults(t *testing.T) {
	full := "seed = 1\n[[storage]]\nops = [\"commit\"]\nfaults = [{ kind = \"disk_full\", probability = 1.0 }]\n"
	slow := "seed = 1\n[[storage]]\nops = [\"commit\", \"intent\"]\nfaults = [\n" +
		"  { kind = \"slow_fsync\", probability = 0.5, delay = \"30ms\" },\n" +
		"  { kind = \"stall\", probability = 0.5, min = \"5ms\", max = \"40ms\" },\n]\n"
	policyFile := func(src string) []string {
		f := filepath.Join(t.TempDir(), "chaos.toml")
		if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"--chaos", f}
	}
	inConfig := func(src string) []string {
		src = strings.Replace(src, "seed = 1\n", "[chaos]\nseed = 1\n", 1)
		return []string{"--config", writeConfig(t, strings.ReplaceAll(src, "[[storage]]", "[[chaos.storage]]"))}
	}
	turns := envelope(`"provider":"claude-code","auto_load_schemas":true,"approve":"all","turn_id":"t1"`, editCall("e1", "a.txt", "a")) + "\n" +
		envelope(`"provider":"claude-code","auto_load_schemas":true,"approve":"all","turn_id":"t2"`, editCall("e2", "b.txt", "b")) + "\n"
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		faults []string // kinds, in order
	}{
		{"full disk, --chaos", policyFile(full), exitNoSpace, []string{"disk_full"}},
		{"full disk, [chaos]", inConfig(full), exitNoSpace, []string{"disk_full"}},
		{"slow, --chaos", policyFile(slow), exitOK, nil},
		{"slow, [chaos]", inConfig(slow), exitOK, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, data := t.TempDir(), t.TempDir()
			args := append([]string{"run", "--workspace", ws, "--data", data, "--events=false", "--session", "s", "--run", "r", "--approve", "all"}, c.args...)
			code, stdout, stderr := execute(t, strings.NewReader(turns), args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d:\n%s\n%s", code, c.code, stdout, tail(stderr, 2000))
			}
			rows := storageReport(t, ws, data, "s")
			if len(rows) == 0 {
				t.Fatalf("chaos report lists no storage fault; stderr:\n%s", tail(stderr, 2000))
			}
			if c.code == exitNoSpace {
				if !strings.Contains(stderr, "no space left on device (disk_full injected)") {
					t.Errorf("run does not name the injected fault:\n%s", tail(stderr, 2000))
				}
				r := rows[0]
				if len(rows) != 1 || r.Op != "commit" || r.Session != "s" || r.Run != "r" || r.Turn != 1 || r.Fault != "disk_full" ||
					!strings.HasPrefix(r.Client, "exit 4: turn 1: ") {
					t.Errorf("report rows %+v, want one: commit of s turn 1, disk_full, the client saw exit 4", rows)
				}
				if strings.Contains(stdout, `"role":"tool"`) {
					t.Errorf("run printed results of a turn that was not committed:\n%s", stdout)
				}
				return
			}
			for _, r := range rows {
				d, err := time.ParseDuration(r.Delay)
				if (r.Fault != "slow_fsync" && r.Fault != "stall") || err != nil || d < 5*time.Millisecond || d > 40*time.Millisecond ||
					r.Fault == "slow_fsync" && d != 30*time.Millisecond {
					t.Errorf("report row %+v: want a slow fsync of 30ms or a stall of 5ms to 40ms", r)
				}
				if !strings.HasPrefix(r.Client, "printed: e") || !strings.HasSuffix(r.Client, "=ok") {
					t.Errorf("report row %+v: want the client to have seen its result ok", r)
				}
			}
			if got := strings.Count(stdout, `"status":"ok"`); got != 2 {
				t.Errorf("%d results ok, want 2:\n%s", got, stdout)
			}
		})
	}
}

// TestTurnCannotSwitchStorageFaultsOn: a turn's "chaos" holding storage
// rules is refused (run: exit 1; serve: 400), saying they are the
// operator's, and nothing runs.
func TestTurnCannotSwitchStorageFaultsOn(t *testing.T) {
	policy := `{"seed":1,"storage":[{"ops":["commit"],"faults":[{"kind":"disk_full","probability":1}]}]}`
	body := envelope(`"provider":"claude-code","auto_load_schemas":true,"approve":"all","chaos":`+policy, editCall("e1", "a.txt", "a"))
	ws := t.TempDir()
	code, stdout, stderr := execute(t, strings.NewReader(body+"\n"), "run", "--workspace", ws, "--data", t.TempDir(), "--events=false")
	if code != exitInput || !strings.Contains(stderr, "storage faults are set by the operator only") {
		t.Errorf("run: exit %d, %s, want %d saying storage faults are the operator's", code, tail(stderr, 1000), exitInput)
	}
	s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--approve", "all")
	status, b := post(t, s.base+"/v1/sessions/s/turns", body)
	if status != http.StatusBadRequest || !strings.Contains(string(b), "storage faults are set by the operator only") {
		t.Errorf("serve: %d %s, want 400 saying storage faults are the operator's", status, b)
	}
	if _, err := os.Stat(filepath.Join(ws, "a.txt")); err == nil || strings.Contains(stdout, `"role":"tool"`) {
		t.Error("the refused turn ran")
	}
}

// TestStorageFaultLogHoldsNoCacheKeys: a fault injected into a write to
// the result cache is recorded with a digest of the cache key, never the
// key: a fetched URL's query (a token, say) stays out of the storage-fault
// log and the chaos report. The call itself is not affected: a cache that
// cannot be written is a miss.
func TestStorageFaultLogHoldsNoCacheKeys(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><title>T</title></head><body><p>a page</p></body></html>")
	}))
	defer page.Close()
	const token = "tok-7f3a9c1e5b"
	cfg := writeConfig(t, "[web]\nallow_loopback = true\n\n[chaos]\nseed = 1\n[[chaos.storage]]\nops = [\"cache_put\"]\n"+
		"faults = [{ kind = \"write_error\", probability = 1.0 }]\n")
	args, _ := json.Marshal(map[string]string{"url": page.URL + "/doc?access_token=" + token})
	q, _ := json.Marshal(string(args))
	call := fmt.Sprintf(`{"id":"f1","type":"function","function":{"name":"fetch_page","arguments":%s}}`, q)
	ws, data := t.TempDir(), t.TempDir()
	code, stdout, stderr := execute(t, strings.NewReader(envelope(`"provider":"claude-code","auto_load_schemas":true`, call)+"\n"),
		"run", "--workspace", ws, "--data", data, "--events=false", "--session", "s", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, `"status":"ok"`) {
		t.Fatalf("exit %d: %s\n%s", code, stdout, tail(stderr, 2000))
	}
	rows := storageReport(t, ws, data, "s")
	if len(rows) != 1 || rows[0].Op != "cache_put" || rows[0].Fault != "write_error" || !strings.HasPrefix(rows[0].Key, "sha256:") {
		t.Fatalf("report rows %+v, want the cache write's fault with a digest for its key", rows)
	}
	b, err := os.ReadFile(filepath.Join(data, storageLogName))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{token, page.URL} {
		if strings.Contains(string(b), secret) || strings.Contains(stderr, secret) {
			t.Errorf("the storage-fault log or the log lines hold %q:\n%s\n%s", secret, b, stderr)
		}
	}
}

// TestChaosStorageExample: the example policy of storage faults, run on
// the example turns as the README shows, injects faults, and each is
// reported with what run printed or the status it exited with.
func TestChaosStorageExample(t *testing.T) {
	ws, data := exampleWorkspace(t), t.TempDir()
	policy := filepath.Join("..", "..", "examples", "chaos-storage.toml")
	turns := filepath.Join("..", "..", "examples", "turns.jsonl")
	code, stdout, stderr := execute(t, nil, "run", "--workspace", ws, "--data", data, "--approve", "none", "--run", "demo",
		"--session", "storage-demo", "--events=false", "--chaos", policy, turns)
	if code != exitOK && code != exitFailure && code != exitNoSpace {
		t.Fatalf("exit %d:\n%s", code, tail(stderr, 2000))
	}
	printed := map[string]string{}
	for _, m := range parseRunOutput(t, stdout).results {
		printed[m.ToolCallID] = m.Status
	}
	rows := storageReport(t, ws, data, "storage-demo")
	if len(rows) == 0 {
		t.Fatal("the example policy injects no storage fault on the example turns")
	}
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r.Client, "printed: "):
			for _, s := range strings.Fields(strings.TrimPrefix(r.Client, "printed: ")) {
				id, st, _ := strings.Cut(s, "=")
				if printed[id] != st {
					t.Errorf("row %+v: run printed %s=%q", r, id, printed[id])
				}
			}
		case code != exitOK && strings.HasPrefix(r.Client, fmt.Sprintf("exit %d: ", code)):
		default:
			t.Errorf("row %+v: run exited %d", r, code)
		}
	}
}
