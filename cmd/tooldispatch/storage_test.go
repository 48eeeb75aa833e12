package main

import (
	"bufio"
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
)

// Storage faults through the command: a data folder that vanishes under
// serve and run (the store cannot close), and a full disk (a small tmpfs)
// under serve and run.

// child is a tooldispatch process the test watches until it exits.
type child struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
	base   string // serve's URL
}

// startChild starts the binary with args; serve is waited for until it
// serves.
func startChild(t *testing.T, stdin io.Reader, args ...string) *child {
	t.Helper()
	c := &child{cmd: command(t, stdin, args...), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	pipe, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(pipe)
	if args[0] == "serve" {
		for c.base == "" {
			line, err := r.ReadString('\n')
			c.stderr.Write([]byte(line))
			if err != nil {
				_ = c.cmd.Wait()
				t.Fatalf("serve ended before serving: %v\n%s", err, c.stderr)
			}
			if _, rest, ok := strings.Cut(line, "serving on "); ok {
				c.base, _, _ = strings.Cut(rest, " ")
			}
		}
	}
	go func() {
		defer close(c.exited)
		_, _ = io.Copy(c.stderr, r)
		_ = c.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
	return c
}

// waitExit waits for the process to exit, at most bound, and returns its
// status and how long it took.
func (c *child) waitExit(t *testing.T, from time.Time, bound time.Duration) (int, time.Duration) {
	t.Helper()
	select {
	case <-c.exited:
		return c.cmd.ProcessState.ExitCode(), time.Since(from)
	case <-time.After(bound):
		t.Fatalf("still running %s after it was told to stop:\n%s", bound, tail(c.stderr.String(), 2000))
		return 0, 0
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// post sends a JSON body and returns the status code and the body.
func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", url, err)
	}
	return resp.StatusCode, b
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, b
}

const calcTurn = `{"provider":"claude-code","auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
	`{"id":"c1","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"6*7\"}"}}]}}`

// closeBudgetSlack is what the tests allow beyond --grace and the close
// budget for the process to start its exit on a loaded machine.
const closeBudgetSlack = 20 * time.Second

// TestServeExitsWhenItsStoreCannotClose: serve SIGTERMed after its data
// folder vanished (a failed or unmounted disk) cannot close Badger, which
// retries flushing its memtable for ever; serve exits anyway, within
// --grace and the close budget, non-zero, saying why.
func TestServeExitsWhenItsStoreCannotClose(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	c := startChild(t, nil, "serve", "--addr", "127.0.0.1:0", "--workspace", t.TempDir(), "--data", data, "--grace", "2s")
	if code, b := post(t, c.base+"/v1/sessions/s/turns", calcTurn); code != 200 {
		t.Fatalf("a turn: %d %s", code, b)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := c.waitExit(t, time.Now(), 2*time.Second+closeGrace+closeBudgetSlack)
	t.Logf("serve exited %d, %.1fs after SIGTERM (grace 2s, close budget %s)", code, took.Seconds(), closeGrace)
	log := c.stderr.String()
	if code != exitFailure {
		t.Errorf("exit %d, want %d (the store could not close):\n%s", code, exitFailure, tail(log, 2000))
	}
	for _, want := range []string{"the store in " + data + " did not close", "no such file or directory"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, tail(log, 2000))
		}
	}
}

// TestRunExitsWhenItsStoreCannotClose: run whose data folder vanished ends
// when its input ends, or at SIGTERM, within the close budget, non-zero,
// saying why, instead of waiting for ever for Badger to close.
func TestRunExitsWhenItsStoreCannotClose(t *testing.T) {
	for _, stop := range []string{"end of input", "SIGTERM"} {
		t.Run(stop, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			// An *os.File: the child reads it directly, and Wait does not
			// wait for a copy of stdin that would end only with pw.
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			c := command(t, pr, "run", "--workspace", t.TempDir(), "--data", data, "--provider", "claude-code", "--events=false")
			out, err := c.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			ch := &child{cmd: c, stderr: &lockedBuffer{}, exited: make(chan struct{})}
			c.Stderr = ch.stderr
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			pr.Close()
			lines := bufio.NewReader(out)
			go func() {
				defer close(ch.exited)
				_ = c.Wait()
			}()
			t.Cleanup(func() { _ = c.Process.Kill(); pw.Close(); <-ch.exited })
			if _, err := fmt.Fprintln(pw, `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[`+
				`{"id":"c1","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"6*7\"}"}}]}}`); err != nil {
				t.Fatal(err)
			}
			line, err := lines.ReadString('\n')
			if err != nil || !strings.Contains(line, `"status":"ok"`) {
				t.Fatalf("the first turn's result: %q, %v\n%s", line, err, ch.stderr)
			}
			go func() { _, _ = io.Copy(io.Discard, lines) }()
			if err := os.RemoveAll(data); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if stop == "SIGTERM" {
				err = c.Process.Signal(syscall.SIGTERM)
			} else {
				err = pw.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			code, took := ch.waitExit(t, start, closeGrace+closeBudgetSlack)
			t.Logf("run exited %d, %.1fs after its %s (close budget %s)", code, took.Seconds(), stop, closeGrace)
			log := ch.stderr.String()
			if code != exitFailure {
				t.Errorf("exit %d, want %d:\n%s", code, exitFailure, tail(log, 2000))
			}
			for _, want := range []string{"the store in " + data + " did not close", "no such file or directory"} {
				if !strings.Contains(log, want) {
					t.Errorf("the log does not say %q:\n%s", want, tail(log, 2000))
				}
			}
		})
	}
}

// mountTmpfs mounts a tmpfs of size (e.g. "24m") on a new directory, or
// skips saying why it cannot; it is unmounted when the test ends.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if _, err := exec.LookPath("mount"); err != nil {
		t.Skipf("no mount command (%v): the full disk is tested through the store's seam (service TestNoSpace, cachestore/space)", err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s): it needs root or CAP_SYS_ADMIN; the full disk is tested "+
			"through the store's seam (service TestNoSpace, cachestore/space)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// bigEdit is a turn of one edit_file call writing 1 MB to path (under the
// 1 MiB a call's arguments may have).
func bigEdit(id, path string) string {
	return envelope(`"provider":"claude-code","auto_load_schemas":true,"approve":"all"`,
		editCall(id, path, strings.Repeat("x", 1_000_000)))
}

// TestServeOnAFullDisk: serve whose data folder is on a 24 MiB tmpfs takes
// 1 MiB turns until the free space falls below the reserve, then refuses
// new turns with 507 naming the folder, the free space and the reserve,
// and lives on: reads, the event stream, the approvals listing and
// /metrics work, /healthz says degraded and why, a log line marks it; when
// the volume grows, turns are taken again without a restart.
func TestServeOnAFullDisk(t *testing.T) {
	vol := mountTmpfs(t, "24m")
	data := filepath.Join(vol, "td")
	c := startChild(t, nil, "serve", "--addr", "127.0.0.1:0", "--workspace", t.TempDir(), "--data", data, "--approve", "all")
	turns := c.base + "/v1/sessions/s/turns"
	var answered, refused int
	var refusal []byte
	for i := 0; i < 40 && refused == 0; i++ {
		select {
		case <-c.exited:
			t.Fatalf("serve died after %d answered turns (exit %d):\n%s", answered, c.cmd.ProcessState.ExitCode(), tail(c.stderr.String(), 3000))
		default:
		}
		resp, err := http.Post(turns, "application/json", strings.NewReader(bigEdit(fmt.Sprintf("e%d", i), fmt.Sprintf("f%d.txt", i))))
		if err != nil {
			<-c.exited
			t.Fatalf("turn %d: %v; serve died after %d answered turns (exit %d):\n%s", i, err, answered,
				c.cmd.ProcessState.ExitCode(), tail(c.stderr.String(), 3000))
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			answered++
		case http.StatusInsufficientStorage:
			refused++
			refusal = b
		default:
			t.Fatalf("turn %d: %d %s", i, resp.StatusCode, b)
		}
	}
	t.Logf("%d turns of 1 MiB answered, then 507: %s", answered, refusal)
	if refused == 0 || answered == 0 {
		t.Fatalf("%d answered, %d refused: want some answered, then 507", answered, refused)
	}
	for _, want := range []string{data, "free", "reserve of 20 MiB"} {
		if !strings.Contains(string(refusal), want) {
			t.Errorf("the 507 does not name %q: %s", want, refusal)
		}
	}
	// Reads go on.
	if code, b := get(t, c.base+"/v1/sessions/s"); code != 200 || strings.Count(string(b), `"role":"tool"`) < answered {
		t.Errorf("GET the session: %d, %d tool messages, want %d", code, strings.Count(string(b), `"role":"tool"`), answered)
	}
	if code, b := get(t, c.base+"/v1/pending"); code != 200 {
		t.Errorf("GET /v1/pending: %d %s", code, b)
	}
	code, b := get(t, c.base+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(b), `"degraded"`) || !strings.Contains(string(b), data) {
		t.Errorf("/healthz: %d %s, want 503 degraded naming the folder", code, b)
	}
	if code, b := get(t, c.base+"/metrics"); code != 200 || !strings.Contains(string(b), "tooldispatch_store_space_low 1") {
		t.Errorf("/metrics: %d, want tooldispatch_store_space_low 1", code)
	}
	resp, err := http.Get(c.base + "/v1/sessions/s/events")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("the event stream: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	if log := c.stderr.String(); !strings.Contains(log, "below its free-space reserve") {
		t.Errorf("no log line marks the change:\n%s", tail(log, 2000))
	}

	// The volume grows: turns are taken again, without a restart.
	if out, err := exec.Command("mount", "-o", "remount,size=96m", vol).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v %s", err, out)
	}
	if code, b := post(t, turns, bigEdit("again", "again.txt")); code != 200 {
		t.Fatalf("a turn once space is back: %d %s", code, b)
	}
	if code, b := get(t, c.base+"/healthz"); code != 200 {
		t.Errorf("/healthz once space is back: %d %s", code, b)
	}
	if log := c.stderr.String(); !strings.Contains(log, "back above its free-space reserve") {
		t.Errorf("no log line marks the return:\n%s", tail(log, 2000))
	}
	// The session holds every answered turn, whole.
	code, b = get(t, c.base+"/v1/sessions/s")
	var sess struct {
		Tools []struct {
			Status string `json:"status"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(b, &sess); code != 200 || err != nil || len(sess.Tools) != answered+1 {
		t.Errorf("the session: %d, %d tool messages, want %d (%v)", code, len(sess.Tools), answered+1, err)
	}
}

// TestRunOnAFullDisk: run whose data folder is on a 24 MiB tmpfs prints
// the results of the turns it took, then stops at the first turn the
// reserve refuses, with exit status 4 and the same message as serve's 507;
// it never dies of the full disk.
func TestRunOnAFullDisk(t *testing.T) {
	vol := mountTmpfs(t, "24m")
	data := filepath.Join(vol, "td")
	var input strings.Builder
	for i := 0; i < 40; i++ {
		input.WriteString(bigEdit(fmt.Sprintf("e%d", i), fmt.Sprintf("f%d.txt", i)) + "\n")
	}
	code, stdout, stderr := execute(t, strings.NewReader(input.String()), "run", "--workspace", t.TempDir(), "--data", data,
		"--approve", "all", "--events=false")
	results := strings.Count(stdout, `"role":"tool"`)
	t.Logf("exit %d after %d results: %s", code, results, tail(stderr, 400))
	if code != exitNoSpace {
		t.Fatalf("exit %d, want %d:\n%s", code, exitNoSpace, tail(stderr, 3000))
	}
	if results == 0 || results == 40 {
		t.Errorf("%d results, want some, not all", results)
	}
	for _, want := range []string{data, "free", "reserve of 20 MiB"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the message does not name %q: %s", want, tail(stderr, 1000))
		}
	}
	// What was printed is what is stored.
	code, sess, serr := execute(t, nil, "session", "--data", data)
	var stored struct {
		Tools []toolMessageJSON `json:"tools"`
	}
	if err := json.Unmarshal([]byte(sess), &stored); code != 0 || err != nil || len(stored.Tools) != results {
		t.Errorf("session: exit %d, %d tool messages, want %d: %v %s", code, len(stored.Tools), results, err, serr)
	}
}

// TestMinFree: the reserve comes from --min-free, else [store] min_free,
// else what the store needs; a reserve no disk holds refuses the first
// turn with exit 4 naming it, 0 turns the check off (and says so), a size
// that does not parse is a usage error, and a reserve below what the store
// needs to flush its memtable is raised to that.
func TestMinFree(t *testing.T) {
	turn := envelope(`"provider":"claude-code","auto_load_schemas":true,"approve":"all"`,
		editCall("e1", "f.txt", "x")) + "\n"
	huge := writeConfig(t, "[store]\nmin_free = \"1EiB\"\n")
	for _, c := range []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{"flag", []string{"--min-free", "1EiB"}, exitNoSpace, []string{"below the reserve of 1 EiB"}},
		{"config", []string{"--config", huge}, exitNoSpace, []string{"below the reserve of 1 EiB"}},
		{"the flag wins", []string{"--config", huge, "--min-free", "1MiB"}, 0,
			[]string{"the free-space reserve is less than what the store needs to flush its memtable"}},
		{"off", []string{"--min-free", "0"}, 0, []string{"the free-space reserve is off"}},
		{"not a size", []string{"--min-free", "lots"}, exitUsage, []string{`"lots" is not a size`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--workspace", t.TempDir(), "--data", t.TempDir(), "--events=false", "--approve", "all"}, c.args...)
			code, stdout, stderr := execute(t, strings.NewReader(turn), args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d:\n%s\n%s", code, c.code, stdout, tail(stderr, 2000))
			}
			for _, want := range c.contains {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, tail(stderr, 2000))
				}
			}
			if ran := strings.Contains(stdout, `"status":"ok"`); ran != (c.code == 0) {
				t.Errorf("the turn ran: %v, want %v: %s", ran, c.code == 0, stdout)
			}
		})
	}
}
