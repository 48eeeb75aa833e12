package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestHeldStoreNamesItsHolder: session on a data directory serve holds
// says which process holds it and what to use instead, and never shows
// the token serve was given.
func TestHeldStoreNamesItsHolder(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	s := startServe(t, "--workspace", ws, "--data", data, "--token", "sekrit-token-value")
	e, stdout, stderr := testEnv(strings.NewReader(""))
	code := e.main([]string{"session", "--workspace", ws, "--data", data, "--session", "s1"})
	if code != exitFailure {
		t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitFailure, stderr.String())
	}
	msg := stderr.String()
	for _, want := range []string{
		fmt.Sprintf("process %d", s.pid),
		"tooldispatch serve",
		"GET " + s.base + "/v1/sessions/s1",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "sekrit-token-value") {
		t.Errorf("the message shows the token:\n%s", msg)
	}
	if stdout.String() != "" {
		t.Errorf("stdout: %q", stdout.String())
	}
}

// TestHeldStoreStaleRecord: when the recorded holder is gone, the message
// says so instead of naming a process that does not hold the store.
func TestHeldStoreStaleRecord(t *testing.T) {
	data := t.TempDir()
	holder, err := openStore(data, false, false, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"pid":%d,"command":"tooldispatch run x"}`, dead.Process.Pid)
	if err := os.WriteFile(filepath.Join(data, pidFileName), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	e, _, stderr := testEnv(strings.NewReader(""))
	if code := e.main([]string{"session", "--data", data}); code != exitFailure {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, fmt.Sprintf("process %d", dead.Process.Pid)) ||
		!strings.Contains(msg, "no longer running") {
		t.Errorf("the message does not say the recorded holder is gone:\n%s", msg)
	}
}

// TestStoreRecordRemovedOnClose: the record of the holder lives as long as
// the store is open.
func TestStoreRecordRemovedOnClose(t *testing.T) {
	data := t.TempDir()
	st, err := openStore(data, false, false, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(data, pidFileName))
	if err != nil || !strings.Contains(string(b), fmt.Sprintf(`"pid":%d`, os.Getpid())) {
		t.Errorf("record while open: %q, %v", b, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, pidFileName)); !os.IsNotExist(err) {
		t.Errorf("record after close: %v", err)
	}
}
