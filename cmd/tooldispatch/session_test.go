package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionNotFound: asking for a session nobody wrote is a mistake the
// command says, exit status 1 and nothing on stdout, naming the sessions
// the data directory does hold; a data directory that does not exist is
// said so too (and not created).
func TestSessionNotFound(t *testing.T) {
	ws := t.TempDir()
	data := t.TempDir()
	runTurns(t, envelope(`"session":"alpha","provider":"claude-code","auto_load_schemas":true`,
		`{"id":"c1","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"1+1\"}"}}`),
		"--workspace", ws, "--data", data)

	e, stdout, stderr := testEnv(strings.NewReader(""))
	if code := e.main([]string{"session", "--workspace", ws, "--data", data, "--session", "nosuch"}); code != exitInput {
		t.Errorf("an unknown session: exit status %d, want %d", code, exitInput)
	}
	if stdout.String() != "" {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
	for _, want := range []string{`session "nosuch" has no committed turns`, data, "sessions there: alpha"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}

	missing := filepath.Join(t.TempDir(), "never")
	e, stdout, stderr = testEnv(strings.NewReader(""))
	if code := e.main([]string{"session", "--workspace", ws, "--data", missing}); code != exitInput {
		t.Errorf("a data directory that does not exist: exit status %d, want %d", code, exitInput)
	}
	if stdout.String() != "" || !strings.Contains(stderr.String(), "no data directory at "+missing) {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("session created %s (%v)", missing, err)
	}

	// The session that exists prints as before.
	e, stdout, stderr = testEnv(strings.NewReader(""))
	if code := e.main([]string{"session", "--workspace", ws, "--data", data, "--session", "alpha"}); code != exitOK {
		t.Fatalf("session alpha: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var sess sessionOutput
	if err := json.Unmarshal([]byte(stdout.String()), &sess); err != nil || len(sess.Tools) != 1 || sess.Tools[0].Status != "ok" {
		t.Errorf("session alpha (%v): %s", err, stdout.String())
	}
}
