package builtin

import (
	"context"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// A stored secret reaches a workspace file when its own origin echoes it
// to download_file; the model picks the padding in front of it. read_files
// shows a line longer than 8 KiB cut: the cut must never show the start of
// the value. The dispatcher redacts the tool's message whole afterwards,
// as here, but it sees only what the cut kept.
func TestReadFilesLineCutNeverShowsASecretPrefix(t *testing.T) {
	const secret = "Qz9-tok+EN/abc=DEF-0123"
	red := secrets.NewRedactor(map[string]string{"K": secret})
	e := newTestEnv(t)
	tool := e.tools["read_files"]
	shown := 0
	for k := 1; k < len(secret); k++ {
		line := strings.Repeat("a", maxLineBytes-k) + secret + strings.Repeat("z", 100)
		e.write("echo.txt", "first line\n"+line+"\nlast line\n")
		res, err := tool.Handler(context.Background(), &toolkit.Call{ID: "c1", Name: "read_files",
			Args: mustArgs(t, `{"paths":["echo.txt"]}`), Emit: func(string) {}, Redactor: red})
		if err != nil {
			t.Fatalf("cut after %d characters of the value: %v", k, err)
		}
		out := red.Redact(res.Content)
		if strings.Contains(out, "a"+secret[:k]) {
			shown = k
		}
		if !strings.Contains(out, "line cut") || !strings.Contains(out, "last line") {
			t.Fatalf("cut after %d characters: the line is not shown cut, or the file not whole:\n%s", k, out[len(out)-300:])
		}
	}
	if shown > 0 {
		t.Fatalf("a line cut inside the value shows up to %d of its %d characters (%q)", shown, len(secret), secret[:shown])
	}
	// A value that lies whole inside the kept part is redacted, not cut.
	e.write("echo.txt", strings.Repeat("a", 100)+secret+strings.Repeat("z", maxLineBytes)+"\n")
	res, err := tool.Handler(context.Background(), &toolkit.Call{ID: "c1", Name: "read_files",
		Args: mustArgs(t, `{"paths":["echo.txt"]}`), Emit: func(string) {}, Redactor: red})
	if err != nil {
		t.Fatal(err)
	}
	if out := red.Redact(res.Content); strings.Contains(out, secret[:4]) || !strings.Contains(out, "a[secret:K]z") {
		t.Fatalf("a value inside the kept part: %q", out[:200])
	}
}
