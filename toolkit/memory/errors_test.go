package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// seed records a fixed set of errors and returns their ids in order.
func seed(t *testing.T, m *Memory) []string {
	t.Helper()
	var ids []string
	for _, args := range []string{
		`{"tool":"read_files","symptom":"permission denied opening config.yaml","cause":"file mode 000","action":"run chmod 644 via run_command first","outcome":"resolved","tags":["permissions"]}`,
		`{"tool":"read_files","symptom":"permission denied on secrets dir","action":"asked the user to change the owner","outcome":"failed"}`,
		`{"tool":"run_command","symptom":"go: module lookup disabled by GOFLAGS=-mod=vendor","action":"run go mod vendor before go build","outcome":"resolved","tags":["go-build"]}`,
		`{"tool":"http_request","symptom":"connection refused to localhost:8080","cause":"the dev server was not running","action":"start it with run_command make serve","outcome":"resolved","tags":["network"]}`,
		`{"tool":"run_command","symptom":"npm ERR! code EACCES permission denied","action":"gave up on the global install","outcome":"abandoned"}`,
	} {
		out := mustRun(t, m, "write_error", args)
		id, _, ok := strings.Cut(strings.TrimPrefix(out, "Recorded "), " ")
		if !ok {
			t.Fatalf("write_error answer %q carries no id", out)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestWriteErrorAndHistoryRoundTrip(t *testing.T) {
	m := New(openBadger(t), t.TempDir())
	ids := seed(t, m)
	if diff := cmp.Diff([]string{"E1", "E2", "E3", "E4", "E5"}, ids); diff != "" {
		t.Fatalf("ids (-want +got):\n%s", diff)
	}

	out := mustRun(t, m, "error_history", `{"id":"e4"}`)
	for _, want := range []string{"E4 [resolved] http_request", "symptom: connection refused to localhost:8080",
		"cause: the dev server was not running", "action: start it with run_command make serve", "tags: network"} {
		if !strings.Contains(out, want) {
			t.Errorf("error_history by id lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, m, "error_history", `{"id":"E99"}`); err == nil || !strings.Contains(err.Error(), "no record E99") {
		t.Errorf("unknown id: got %v", err)
	}
}

func TestErrorHistorySearch(t *testing.T) {
	m := New(openBadger(t), t.TempDir())
	seed(t, m)
	tests := []struct {
		name string
		args string
		want []string // record ids in the order shown
	}{
		{"all, resolved first then newest", `{}`, []string{"E4", "E3", "E1", "E5", "E2"}},
		{"by tool", `{"tool":"read_files"}`, []string{"E1", "E2"}},
		{"tool is case-insensitive", `{"tool":"READ_FILES"}`, []string{"E1", "E2"}},
		{"keywords, resolved first", `{"query":"permission denied"}`, []string{"E1", "E5", "E2"}},
		{"keywords and tool", `{"tool":"run_command","query":"permission"}`, []string{"E5"}},
		{"prefix of a keyword", `{"query":"perm"}`, []string{"E1", "E5", "E2"}},
		{"tag", `{"query":"network"}`, []string{"E4"}},
		{"cause and action count", `{"query":"vendor"}`, []string{"E3"}},
		{"limit", `{"limit":2}`, []string{"E4", "E3"}},
		{"no match", `{"query":"kubernetes"}`, nil},
		{"unknown tool", `{"tool":"edit_file"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := mustRun(t, m, "error_history", tt.args)
			if diff := cmp.Diff(tt.want, shownIDs(out)); diff != "" {
				t.Errorf("records (-want +got):\n%s\noutput:\n%s", diff, out)
			}
		})
	}
}

// shownIDs returns the ids of the records an error_history answer lists.
func shownIDs(out string) []string {
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if id, rest, ok := strings.Cut(line, " ["); ok && strings.HasPrefix(id, "E") && strings.Contains(rest, "] ") {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestWriteErrorRefusesBadArguments(t *testing.T) {
	m := New(openBadger(t), t.TempDir())
	tests := []struct {
		name, args, want string
	}{
		{"missing action", `{"tool":"x","symptom":"y","outcome":"resolved"}`, `"action"`},
		{"bad outcome", `{"tool":"x","symptom":"y","action":"z","outcome":"fixed"}`, "outcome"},
		{"unknown field", `{"tool":"x","symptom":"y","action":"z","outcome":"failed","severity":"high"}`, "severity"},
		{"blank symptom", `{"tool":"x","symptom":"   ","action":"z","outcome":"failed"}`, "symptom is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := run(t, m, "write_error", tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error mentioning %s", err, tt.want)
			}
		})
	}
	if out := mustRun(t, m, "error_history", `{}`); !strings.Contains(out, "No recorded errors") {
		t.Errorf("refused records were stored:\n%s", out)
	}
}

func TestWorkspacesAreIsolated(t *testing.T) {
	store := openBadger(t)
	a := New(store, t.TempDir())
	b := New(store, t.TempDir())
	if a.ns == b.ns {
		t.Fatalf("two workspaces share namespace %s", a.ns)
	}
	seed(t, a)
	if out := mustRun(t, b, "error_history", `{}`); !strings.Contains(out, "No recorded errors") {
		t.Errorf("workspace b sees a's records:\n%s", out)
	}
	if got := b.PastFixes(context.Background(), "s1", "read_files", "open config.yaml: permission denied"); got != nil {
		t.Errorf("workspace b gets a's fixes: %q", got)
	}
	out := mustRun(t, b, "write_error", `{"tool":"calculate","symptom":"division by zero","action":"checked the divisor","outcome":"resolved"}`)
	if !strings.HasPrefix(out, "Recorded E1 ") {
		t.Errorf("b's first record: %q, want E1", out)
	}
	if ids := shownIDs(mustRun(t, a, "error_history", `{"tool":"calculate"}`)); ids != nil {
		t.Errorf("workspace a sees b's record %v", ids)
	}
}

func TestSameDirectoryUnderAnotherName(t *testing.T) {
	store := openBadger(t)
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if a, b := New(store, dir), New(store, link+"/."); a.ns != b.ns {
		t.Errorf("%s and %s are one workspace but got namespaces %s and %s", dir, link, a.ns, b.ns)
	}
}

func TestRecordsSurviveReopen(t *testing.T) {
	dbDir, ws := t.TempDir(), t.TempDir()
	store := openBadgerAt(t, dbDir)
	seed(t, New(store, ws))
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	m := New(openBadgerAt(t, dbDir), ws)
	if got := m.PastFixes(context.Background(), "s1", "http_request", "dial tcp: connection refused"); len(got) != 1 || !strings.HasPrefix(got[0], "E4 ") {
		t.Errorf("after reopening: PastFixes = %q, want E4", got)
	}
	out := mustRun(t, m, "write_error", `{"tool":"x","symptom":"y","action":"z","outcome":"failed"}`)
	if !strings.HasPrefix(out, "Recorded E6 ") {
		t.Errorf("ids must continue after a reopen: %q", out)
	}
}

func TestIDsAreMonotonicUnderConcurrentWrites(t *testing.T) {
	store := openBadger(t)
	ws := t.TempDir()
	m := New(store, ws)
	const n = 40
	tool := m.writeErrorTool()
	var wg sync.WaitGroup
	outs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		args := mustArgs(t, fmt.Sprintf(`{"tool":"run_command","symptom":"failure %d permission denied","action":"retry","outcome":"resolved"}`, i))
		wg.Go(func() {
			// Readers run alongside the writers.
			m.PastFixes(context.Background(), "s1", "run_command", "exit status 1: permission denied")
			var res toolkit.Result
			res, errs[i] = tool.Handler(context.Background(), &toolkit.Call{Session: "s1", Name: tool.Name, Args: args, Emit: func(string) {}})
			outs[i] = res.Content
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(outs[i], "Recorded "), " ")
		if seen[id] {
			t.Fatalf("id %s handed out twice", id)
		}
		seen[id] = true
	}
	for i := 1; i <= n; i++ {
		if !seen[fmt.Sprintf("E%d", i)] {
			t.Errorf("id E%d missing: %v", i, seen)
		}
	}
	// A second Memory over the same workspace continues the sequence, and
	// the first notices its write when it writes next.
	other := New(store, ws)
	if out := mustRun(t, other, "write_error", `{"tool":"x","symptom":"y","action":"z","outcome":"failed"}`); !strings.HasPrefix(out, fmt.Sprintf("Recorded E%d ", n+1)) {
		t.Errorf("second memory: %q", out)
	}
	if out := mustRun(t, m, "write_error", `{"tool":"x","symptom":"y","action":"z","outcome":"failed"}`); !strings.HasPrefix(out, fmt.Sprintf("Recorded E%d ", n+2)) {
		t.Errorf("first memory after the second wrote: %q", out)
	}
}

func TestPastFixes(t *testing.T) {
	m := New(openBadger(t), t.TempDir())
	for _, args := range []string{
		`{"tool":"read_files","symptom":"permission denied","action":"run chmod via run_command first","outcome":"resolved"}`,
		`{"tool":"read_files","symptom":"permission denied reading /etc/shadow","action":"asked for sudo","outcome":"failed"}`,
		`{"tool":"read_files","symptom":"file is not valid UTF-8","action":"read it with run_command xxd","outcome":"resolved"}`,
		`{"tool":"run_command","symptom":"permission denied: ./build.sh","action":"run chmod +x build.sh","outcome":"resolved"}`,
		`{"tool":"read_files","symptom":"config.yaml permission denied again","action":"fix the mode with chmod 644","outcome":"resolved"}`,
		`{"tool":"read_files","symptom":"permission denied under vendor/","action":"read from the module cache instead","outcome":"resolved"}`,
		`{"tool":"read_files","symptom":"permission denied in .git/objects","action":"used git show instead","outcome":"resolved"}`,
	} {
		mustRun(t, m, "write_error", args)
	}
	tests := []struct {
		name, tool, errText string
		want                []string // ids, best first
	}{
		{"at most three, resolved, same tool", "read_files", "open config.yaml: permission denied", []string{"E5", "E1", "E7"}},
		{"other tool's fixes stay out", "run_command", "exit status 126: permission denied", []string{"E4"}},
		{"tool is case-insensitive", "READ_FILES", "invalid UTF-8 in file", []string{"E3"}},
		{"nothing in common", "read_files", "no such file or directory", nil},
		{"only stopwords in common", "read_files", "the call failed with an error", nil},
		{"unknown tool", "fetch_page", "permission denied", nil},
		{"empty text", "read_files", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := m.PastFixes(context.Background(), "s1", tt.tool, tt.errText)
			var ids []string
			for _, line := range got {
				id, _, _ := strings.Cut(line, " ")
				ids = append(ids, id)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("fixes (-want +got):\n%s\nlines: %q", diff, got)
			}
		})
	}
	got := m.PastFixes(context.Background(), "s1", "read_files", "permission denied")
	if len(got) == 0 || got[0] != `E1 (read_files): "permission denied" → "run chmod via run_command first"` {
		t.Errorf("line format: %q", got)
	}
}

func TestPastFixesWhenStoreFails(t *testing.T) {
	store := openBadgerAt(t, t.TempDir())
	m := New(store, t.TempDir())
	store.Close()
	if got := m.PastFixes(context.Background(), "s1", "read_files", "permission denied"); got != nil {
		t.Errorf("PastFixes over a closed store = %q, want nil", got)
	}
	if _, err := run(t, m, "write_error", `{"tool":"x","symptom":"y","action":"z","outcome":"failed"}`); err == nil {
		t.Error("write_error over a closed store succeeded")
	}
}

func TestToolFlags(t *testing.T) {
	m := New(openBadger(t), t.TempDir())
	reg := toolkit.NewRegistry()
	m.Register(reg)
	for _, name := range []string{"write_error", "error_history", "chat_history"} {
		tool, ok := reg.Lookup(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		if !tool.Concurrent || !tool.IsReadOnly(toolkit.Args{}) || tool.Timeout <= 0 || tool.Source != toolkit.SourceBuiltin {
			t.Errorf("%s: concurrent %v, read-only %v, timeout %v, source %s; want concurrent, read-only, a timeout, builtin",
				name, tool.Concurrent, tool.IsReadOnly(toolkit.Args{}), tool.Timeout, tool.Source)
		}
	}
}

func BenchmarkPastFixes(b *testing.B) {
	m := New(openBadgerAt(b, b.TempDir()), b.TempDir())
	ctx := context.Background()
	for i := range 500 {
		r := &record{Tool: "run_command", Symptom: fmt.Sprintf("symptom %d: exit status 1 module lookup disabled %d", i, i), Action: "x", Outcome: OutcomeResolved}
		if _, err := m.add(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	errText := strings.Repeat("go: module lookup disabled by GOFLAGS=-mod=vendor\n", 200)
	b.ReportAllocs()
	for b.Loop() {
		m.PastFixes(ctx, "s1", "run_command", errText)
	}
}
