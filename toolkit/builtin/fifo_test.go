package builtin

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fifoWaitLimit is how long a file tool may take on a FIFO before the test
// takes it for blocked, opens the other end to release it, and fails.
const fifoWaitLimit = 20 * time.Second

// TestFIFOInTheWorkspaceNeverBlocks: a named pipe in the workspace (a
// command made it, or it came with the repository) is not a file. Opening
// it blocks until someone opens its other end, in a system call no context
// stops: every file tool, a preview and the state an approval is bound to
// answer at once that it is not a regular file instead of waiting there
// past the call's timeout and the confirmation's, a thread held for ever.
func TestFIFOInTheWorkspaceNeverBlocks(t *testing.T) {
	e := newTestEnv(t)
	fifo := e.path("pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	steps := []struct {
		name string
		run  func() string // what the tool said
	}{
		{"read_files", func() string { return result(e.call("read_files", `{"paths":["pipe"]}`)) }},
		{"edit_file preview", func() string {
			return e.tools["edit_file"].Preview(context.Background(), mustArgs(t, `{"path":"pipe","content":"x"}`)).Note
		}},
		{"edit_file state", func() string {
			return e.tools["edit_file"].FileState(context.Background(), mustArgs(t, `{"path":"pipe","content":"x"}`))
		}},
		{"remove_file preview", func() string {
			return e.tools["remove_file"].Preview(context.Background(), mustArgs(t, `{"path":"pipe"}`)).Note
		}},
		{"edit_file whole", func() string { return result(e.call("edit_file", `{"path":"pipe","content":"x"}`)) }},
		{"edit_file patch", func() string {
			return result(e.call("edit_file", `{"path":"pipe","old_string":"a","new_string":"b"}`))
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			said := unblocked(t, fifo, s.name, s.run)
			if !strings.Contains(said, "not a regular file") && !strings.Contains(said, "not a file") {
				t.Fatalf("%s on a FIFO said %q; want it to say the path is not a regular file", s.name, said)
			}
		})
	}
	t.Run("edit_file with a reader on the other end", func(t *testing.T) {
		reader, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Close()
		said := unblocked(t, fifo, "edit_file", func() string {
			return result(e.call("edit_file", `{"path":"pipe","content":"written into the pipe"}`))
		})
		if !strings.Contains(said, "not a regular file") {
			t.Fatalf("edit_file on a FIFO with a reader said %q; want it to say the path is not a regular file", said)
		}
		buf := make([]byte, 64)
		if n, _ := syscall.Read(int(reader.Fd()), buf); n > 0 {
			t.Fatalf("edit_file wrote %q into the FIFO", buf[:n])
		}
	})
}

// unblocked runs step and returns what it said; a step still blocked after
// fifoWaitLimit is released (O_RDWR on a FIFO never blocks, and gives a
// blocked open its other end) and fails the test.
func unblocked(t *testing.T, fifo, name string, step func() string) string {
	t.Helper()
	done := make(chan string, 1)
	go func() { done <- step() }()
	select {
	case said := <-done:
		return said
	case <-time.After(fifoWaitLimit):
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			<-done
			f.Close()
		}
		t.Fatalf("%s blocked opening a FIFO in the workspace for %v", name, fifoWaitLimit)
		return ""
	}
}

// result is a tool's content, or its error's text.
func result(content string, err error) string {
	if err != nil {
		return err.Error()
	}
	return content
}
