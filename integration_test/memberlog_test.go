package integration

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"
)

// memberLogs is the folder where the cluster members of one test write
// their whole output, a file for each start of a member (m0.0.log, then
// m0.1.log after its restart, …), beside test.log, the test's own notes
// of what it did and when (a kill, a restart). A member's output is in
// member.log too, for the test's checks, but only since its last start:
// the files keep every start. The folder is removed when the test passes
// and kept, its path logged, when it fails, so that a failure under load
// can be read afterwards; TOOLDISPATCH_KEEP_LOGS=1 keeps it always.
// TOOLDISPATCH_MEMBER_LOG_LEVEL sets the members' --log-level (default
// warn; info adds the membership changes each member sees).
type memberLogs struct {
	dir string

	mu     sync.Mutex
	files  []*os.File     // guarded by mu: closed when the test ends
	starts map[string]int // guarded by mu: member name → starts so far
	notes  *os.File
}

// newMemberLogs makes the folder of t's members' logs.
func newMemberLogs(t *testing.T) *memberLogs {
	t.Helper()
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	dir, err := os.MkdirTemp("", "tooldispatch-logs-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	notes, err := os.Create(filepath.Join(dir, "test.log"))
	if err != nil {
		t.Fatal(err)
	}
	l := &memberLogs{dir: dir, starts: map[string]int{}, notes: notes}
	// Registered before the members are started, so run after they are
	// stopped (cleanups run last first).
	t.Cleanup(func() {
		l.mu.Lock()
		for _, f := range l.files {
			_ = f.Close()
		}
		_ = l.notes.Close()
		l.mu.Unlock()
		if t.Failed() || os.Getenv("TOOLDISPATCH_KEEP_LOGS") == "1" {
			t.Logf("the members' logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return l
}

// memberLogLevel is the members' --log-level.
func memberLogLevel() string {
	if l := os.Getenv("TOOLDISPATCH_MEMBER_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// attach sends the output of m's command (not started yet) to a new file
// of the folder and to a new m.log.
func (l *memberLogs) attach(t *testing.T, m *member) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.starts[m.name]
	l.starts[m.name] = k + 1
	f, err := os.Create(filepath.Join(l.dir, fmt.Sprintf("%s.%d.log", m.name, k)))
	if err != nil {
		t.Fatal(err)
	}
	l.files = append(l.files, f)
	fmt.Fprintf(l.notes, "%s %s start %d: %v\n", time.Now().Format(time.RFC3339Nano), m.name, k, m.cmd.Args)
	m.log = &syncBuffer{}
	w := io.MultiWriter(m.log, f)
	m.cmd.Stdout, m.cmd.Stderr = w, w
}

// note writes a line to test.log with the time.
func (l *memberLogs) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.notes, "%s %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// write writes a file of the folder (a recorded history, say).
func (l *memberLogs) write(name string, data []byte) error {
	return os.WriteFile(filepath.Join(l.dir, name), data, 0o644)
}
