package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSIGTERMCancelsAtTheGrace: serve (one process) SIGTERMed while
// a command that ignores SIGTERM, SIGINT and SIGHUP runs lets it run for
// --grace, then cancels it: its turn answers canceled, committed, and
// serve exits 143, without a panic.
func TestServeSIGTERMCancelsAtTheGrace(t *testing.T) {
	ws := exampleWorkspace(t)
	cmd := command(t, nil, "serve", "--addr", "127.0.0.1:0", "--workspace", ws, "--data", t.TempDir(), "--approve", "all", "--shell", "--grace", "1s")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var stderr strings.Builder
	r := bufio.NewReader(pipe)
	base := ""
	for base == "" {
		line, err := r.ReadString('\n')
		stderr.WriteString(line)
		if err != nil {
			t.Fatalf("serve ended before serving: %v\n%s", err, stderr.String())
		}
		if _, rest, ok := strings.Cut(line, "serving on "); ok {
			base, _, _ = strings.Cut(rest, " ")
		}
	}
	go func() {
		defer close(exited)
		rest, _ := io.ReadAll(r)
		stderr.Write(rest)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	marker := filepath.Join(ws, "started")
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "trap '' TERM INT HUP; touch started; sleep 60"}})
	body, _ := json.Marshal(map[string]any{"provider": "claude-code", "auto_load_schemas": true,
		"message": map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "stubborn", "type": "function",
			"function": map[string]any{"name": "run_command", "arguments": string(args)}}}}})
	type reply struct {
		code int
		msgs []toolMessageJSON
		err  error
	}
	done := make(chan reply, 1)
	go func() {
		resp, err := http.Post(base+"/v1/sessions/grace/turns", "application/json", strings.NewReader(string(body)))
		if err != nil {
			done <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		var out struct {
			Messages []toolMessageJSON `json:"messages"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		done <- reply{resp.StatusCode, out.Messages, err}
	}()
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		select {
		case rep := <-done:
			t.Fatalf("the turn ended before its command started: %+v", rep)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signaled := time.Now()
	select {
	case rep := <-done:
		t.Logf("the turn answered %.2fs after SIGTERM", time.Since(signaled).Seconds())
		if rep.err != nil || rep.code != 200 || len(rep.msgs) != 1 || rep.msgs[0].Status != "canceled" {
			t.Errorf("the turn running at SIGTERM: %d %+v %v, want 200 and canceled", rep.code, rep.msgs, rep.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the turn did not end within 30 s of SIGTERM (grace 1 s)")
	}
	select {
	case <-exited:
		t.Logf("serve exited %d, %.2fs after SIGTERM", cmd.ProcessState.ExitCode(), time.Since(signaled).Seconds())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit within 30 s of SIGTERM (grace 1 s)")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitSIGTERM || strings.Contains(stderr.String(), "panic") {
		t.Errorf("serve exited %d, want %d:\n%s", code, exitSIGTERM, stderr.String())
	}
}
