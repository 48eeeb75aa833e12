package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// toolCallsTurn is an assistant turn (auto_load_schemas, so the first call
// of a tool runs) of calls given as {id, name, arguments object}.
func toolCallsTurn(t *testing.T, calls ...[3]any) string {
	t.Helper()
	var tcs []map[string]any
	for _, c := range calls {
		args, err := json.Marshal(c[2])
		if err != nil {
			t.Fatal(err)
		}
		tcs = append(tcs, map[string]any{"id": c[0], "type": "function",
			"function": map[string]any{"name": c[1], "arguments": string(args)}})
	}
	b, err := json.Marshal(map[string]any{"auto_load_schemas": true,
		"message": map[string]any{"role": "assistant", "tool_calls": tcs}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// runTurn runs one turn in process and returns its results by call id.
func runTurn(t *testing.T, input string, args ...string) map[string]toolMessageJSON {
	t.Helper()
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, append(args, "--provider", "claude-code", "--events=false", "-")...)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	got := map[string]toolMessageJSON{}
	for _, r := range out.results {
		got[r.ToolCallID] = r
	}
	return got
}

// ownFileTexts are texts of tooldispatch's own files no result may show:
// names of Badger's files, the key file's name, the configuration's
// marker.
var ownFileTexts = []string{"secret.key", "MANIFEST", "KEYREGISTRY", ".vlog", ".sst", "LOCK", "OPERATOR-CONFIG"}

// wantRefused fails unless the result of call id is not ok and shows
// nothing of tooldispatch's own files (key bytes included).
func wantRefused(t *testing.T, res map[string]toolMessageJSON, id string, key []byte) {
	t.Helper()
	r, ok := res[id]
	if !ok {
		t.Fatalf("no result for %s", id)
	}
	if r.Status == "ok" {
		t.Errorf("%s (%s) is ok: %.300q", id, r.Name, r.Content)
	}
	if len(key) > 0 && strings.Contains(r.Content, strings.TrimSpace(string(key))) {
		t.Errorf("%s (%s) shows the secret key", id, r.Name)
	}
}

// wantNotListed fails if a find_files result lists one of tooldispatch's
// own files.
func wantNotListed(t *testing.T, res map[string]toolMessageJSON, id string) {
	t.Helper()
	r := res[id]
	if r.Status != "ok" {
		t.Fatalf("find_files %s: %s %q", id, r.Status, r.Content)
	}
	for _, line := range strings.Split(r.Content, "\n") {
		if strings.HasPrefix(line, "[") || strings.HasPrefix(line, "no files match") {
			continue
		}
		for _, s := range ownFileTexts {
			if strings.Contains(line, s) {
				t.Errorf("find_files %s lists %s:\n%s", id, s, r.Content)
			}
		}
	}
}

// TestDefaultDataOutsideWorkspace: without --data, the store and the
// secret key live in the user's state directory, not in the workspace;
// run, session, chaos report and tools find the same directory; no tool
// reaches it.
func TestDefaultDataOutsideWorkspace(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	ws := exampleWorkspace(t)

	res := runTurn(t, toolCallsTurn(t,
		[3]any{"r1", "read_files", map[string]any{"paths": []string{".tooldispatch/secret.key"}}},
		[3]any{"f1", "find_files", map[string]any{"pattern": "*"}},
		[3]any{"f2", "find_files", map[string]any{"pattern": "**/*.key"}},
	), "--workspace", ws, "--approve", "none")
	if _, err := os.Stat(filepath.Join(ws, dataDirName)); err == nil {
		t.Errorf("run created %s in the workspace", dataDirName)
	}
	wantRefused(t, res, "r1", nil)
	wantNotListed(t, res, "f1")
	wantNotListed(t, res, "f2")

	keys, _ := filepath.Glob(filepath.Join(state, "tooldispatch", "*", "secret.key"))
	if len(keys) != 1 {
		t.Fatalf("secret keys in the state directory: %v, want one", keys)
	}
	key := keys[0]
	data := filepath.Dir(key)
	if !strings.Contains(filepath.Base(data), filepath.Base(ws)) {
		t.Errorf("data directory %s does not name the workspace %s", data, filepath.Base(ws))
	}
	fi, err := os.Stat(key)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("secret key mode %v, want 0600", fi.Mode().Perm())
	}
	keyBytes, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}

	// A second run through a symlink to the state directory and by
	// absolute paths; the same store is used (session sees both turns).
	if err := os.Symlink(state, filepath.Join(ws, "st")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(state, key)
	if err != nil {
		t.Fatal(err)
	}
	res = runTurn(t, toolCallsTurn(t,
		[3]any{"r2", "read_files", map[string]any{"paths": []string{filepath.Join("st", rel)}}},
		[3]any{"r3", "read_files", map[string]any{"paths": []string{key}}},
		[3]any{"r4", "read_files", map[string]any{"paths": []string{data}}},
		[3]any{"f3", "find_files", map[string]any{"pattern": "*", "path": filepath.Join("st", filepath.Dir(rel))}},
		[3]any{"e1", "edit_file", map[string]any{"path": filepath.Join("st", rel), "content": "pwned"}},
	), "--workspace", ws, "--approve", "all")
	for _, id := range []string{"r2", "r3", "r4", "f3", "e1"} {
		wantRefused(t, res, id, keyBytes)
	}
	if b, _ := os.ReadFile(key); string(b) != string(keyBytes) {
		t.Fatal("the secret key changed")
	}

	e, stdout, stderr := testEnv(nil)
	if code := e.main([]string{"session", "--workspace", ws}); code != exitOK {
		t.Fatalf("session: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var sess sessionOutput
	if err := json.Unmarshal([]byte(stdout.String()), &sess); err != nil {
		t.Fatalf("session output: %v\n%s", err, stdout.String())
	}
	if len(sess.Tools) != 8 {
		t.Errorf("session without --data shows %d tool messages, want the 8 of both runs", len(sess.Tools))
	}

	e, _, stderr = testEnv(nil)
	if code := e.main([]string{"chaos", "report", "--workspace", ws, "--json"}); code != exitOK {
		t.Errorf("chaos report: exit status %d; stderr:\n%s", code, stderr.String())
	}

	e, _, stderr = testEnv(nil)
	other := t.TempDir()
	if code := e.main([]string{"tools", "--workspace", other}); code != exitOK {
		t.Fatalf("tools: exit status %d; stderr:\n%s", code, stderr.String())
	}
	if dirs, _ := filepath.Glob(filepath.Join(state, "tooldispatch", "*")); len(dirs) != 1 {
		t.Errorf("state directory holds %v after tools; tools must create no data directory", dirs)
	}
}

// TestDefaultDataDirRule: the default data directory is one per workspace,
// the same for every spelling of the workspace's path, and --data wins.
func TestDefaultDataDirRule(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	base := t.TempDir()
	ws1, ws2 := filepath.Join(base, "project"), filepath.Join(base, "other", "project")
	for _, d := range []string{ws1, ws2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(ws1, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	dataOf := func(args ...string) string {
		t.Helper()
		e, _, stderr := testEnv(nil)
		o, err := e.parseFlags("run", args)
		if err != nil {
			t.Fatalf("parseFlags %v: %v; %s", args, err, stderr.String())
		}
		return o.data
	}
	d1 := dataOf("--workspace", ws1)
	if !strings.HasPrefix(d1, filepath.Join(state, "tooldispatch")+string(filepath.Separator)) {
		t.Errorf("default data %s is not in $XDG_STATE_HOME/tooldispatch", d1)
	}
	if !strings.Contains(filepath.Base(d1), "project") {
		t.Errorf("default data %s does not name the workspace", d1)
	}
	for _, same := range []string{filepath.Join(base, "link"), ws1 + "/", filepath.Join(base, "other", "..", "project")} {
		if d := dataOf("--workspace", same); d != d1 {
			t.Errorf("workspace %s: data %s, want %s", same, d, d1)
		}
	}
	if d2 := dataOf("--workspace", ws2); d2 == d1 {
		t.Errorf("two workspaces named project share the data directory %s", d1)
	}
	if d := dataOf("--workspace", ws1, "--data", filepath.Join(base, "mine")); d != filepath.Join(base, "mine") {
		t.Errorf("--data: got %s", d)
	}

	t.Setenv("XDG_STATE_HOME", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	if d := dataOf("--workspace", ws1); !strings.HasPrefix(d, filepath.Join(home, ".local", "state", "tooldispatch")+string(filepath.Separator)) {
		t.Errorf("without XDG_STATE_HOME: data %s, want it under ~/.local/state/tooldispatch", d)
	}
}

// TestDataInsideWorkspaceOutOfReach: --data inside the workspace, and a
// secret key file and a configuration inside it too: no tool reads,
// lists or changes them, by name, absolute path or symlink, and the store
// still works afterwards.
func TestDataInsideWorkspaceOutOfReach(t *testing.T) {
	ws := exampleWorkspace(t)
	data := filepath.Join(ws, "state")
	keyFile := filepath.Join(ws, "keys", "k.key")
	config := filepath.Join(ws, "tooldispatch.toml")
	cfg := fmt.Sprintf("# OPERATOR-CONFIG\n[secrets]\nkey_file = %q\n", keyFile)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--workspace", ws, "--data", data, "--config", config}
	// The first run creates the store and the key.
	runTurn(t, toolCallsTurn(t, [3]any{"c0", "calculate", map[string]any{"expression": "1+1"}}), append(flags, "--approve", "none")...)
	keyBytes, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("the key file was not created: %v", err)
	}
	for _, l := range [][2]string{{"state", "dd"}, {"keys/k.key", "k"}, {"tooldispatch.toml", "c"}} {
		if err := os.Symlink(l[0], filepath.Join(ws, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(data)
	if err != nil || len(entries) == 0 {
		t.Fatalf("data directory: %v, %d entries", err, len(entries))
	}
	var badgerFile string
	for _, e := range entries {
		if !e.IsDir() {
			badgerFile = e.Name()
			break
		}
	}

	res := runTurn(t, toolCallsTurn(t,
		[3]any{"r1", "read_files", map[string]any{"paths": []string{"state/" + badgerFile}}},
		[3]any{"r2", "read_files", map[string]any{"paths": []string{filepath.Join(data, badgerFile)}}},
		[3]any{"r3", "read_files", map[string]any{"paths": []string{"dd/" + badgerFile}}},
		[3]any{"r4", "read_files", map[string]any{"paths": []string{"keys/k.key"}}},
		[3]any{"r5", "read_files", map[string]any{"paths": []string{"k"}}},
		[3]any{"r6", "read_files", map[string]any{"paths": []string{"tooldispatch.toml"}}},
		[3]any{"r7", "read_files", map[string]any{"paths": []string{"c"}}},
		[3]any{"f1", "find_files", map[string]any{"pattern": "*"}},
		[3]any{"f2", "find_files", map[string]any{"pattern": "*", "path": "dd"}},
		[3]any{"e1", "edit_file", map[string]any{"path": "dd/" + badgerFile, "content": "pwned"}},
		[3]any{"e2", "edit_file", map[string]any{"path": "k", "content": "pwned"}},
		[3]any{"e3", "edit_file", map[string]any{"path": "c", "content": "pwned"}},
		[3]any{"d1", "remove_file", map[string]any{"path": "dd/" + badgerFile}},
		[3]any{"d2", "remove_file", map[string]any{"path": "keys/k.key"}},
		[3]any{"x1", "run_command", map[string]any{"argv": []string{"ls"}, "cwd": "dd"}},
	), append(flags, "--approve", "all")...)
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7", "f2", "e1", "e2", "e3", "d1", "d2", "x1"} {
		wantRefused(t, res, id, keyBytes)
	}
	if strings.Contains(res["r6"].Content+res["r7"].Content, "OPERATOR-CONFIG") {
		t.Error("read_files shows the configuration")
	}
	wantNotListed(t, res, "f1")
	if b, _ := os.ReadFile(keyFile); string(b) != string(keyBytes) {
		t.Fatal("the key file changed")
	}
	if b, _ := os.ReadFile(config); string(b) != cfg {
		t.Fatal("the configuration changed")
	}
	// The store is intact: a third run commits, and session shows every turn.
	runTurn(t, toolCallsTurn(t, [3]any{"c9", "calculate", map[string]any{"expression": "2+2"}}), append(flags, "--approve", "none")...)
	e, stdout, stderr := testEnv(nil)
	if code := e.main([]string{"session", "--data", data}); code != exitOK {
		t.Fatalf("session: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var sess sessionOutput
	if err := json.Unmarshal([]byte(stdout.String()), &sess); err != nil {
		t.Fatal(err)
	}
	if len(sess.Tools) != 17 {
		t.Errorf("session shows %d tool messages, want 17", len(sess.Tools))
	}
}

// TestHardLinkedFileEditRefused: an approved edit_file does not write
// through a hard link in the workspace to a file outside it.
func TestHardLinkedFileEditRefused(t *testing.T) {
	ws := exampleWorkspace(t)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("OUTSIDE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(ws, "hl.txt")); err != nil {
		t.Skipf("hard links not possible here: %v", err)
	}
	res := runTurn(t, toolCallsTurn(t,
		[3]any{"e1", "edit_file", map[string]any{"path": "hl.txt", "content": "pwned"}},
		[3]any{"e2", "edit_file", map[string]any{"path": "hl.txt", "old_string": "OUTSIDE", "new_string": "pwned"}},
	), "--workspace", ws, "--data", t.TempDir(), "--approve", "all")
	for _, id := range []string{"e1", "e2"} {
		wantRefused(t, res, id, nil)
		if !strings.Contains(res[id].Content, "hard links") {
			t.Errorf("%s: %q does not say why", id, res[id].Content)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "OUTSIDE\n" {
		t.Fatalf("the outside file changed: %q", b)
	}
}
