package interact

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// TestOwnFilesOutOfReach: write_result and html_template neither write
// nor read tooldispatch's own files, by a symlink or by name, write no
// file with other names (hard links), and keep no version of a refused
// write.
func TestOwnFilesOutOfReach(t *testing.T) {
	base := t.TempDir()
	dir, data := filepath.Join(base, "ws"), filepath.Join(base, "state")
	for _, d := range []string{dir, data} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key, config := filepath.Join(data, "secret.key"), filepath.Join(dir, "tooldispatch.toml")
	outside := filepath.Join(base, "outside.txt")
	for _, p := range []string{key, config, outside} {
		if err := os.WriteFile(p, []byte("KEEP {{.x}}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(data, filepath.Join(dir, "dd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(dir, "hl.txt")); err != nil {
		t.Skipf("hard links not possible here: %v", err)
	}
	ws, err := builtin.OpenWorkspace(dir, builtin.WithProtected(data, key, config))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	e := &env{dir: ws.Dir(), ws: ws, versions: builtin.NewMemoryVersions(), reg: toolkit.NewRegistry()}
	Register(e.reg, Deps{Workspace: ws, Versions: e.versions})

	for _, tc := range []struct{ name, tool, args, want string }{
		{"write_result into the key", "write_result", `{"content":"x","format":"text","path":"dd/secret.key"}`, "tooldispatch's own files"},
		{"write_result into the config", "write_result", `{"content":"x","format":"text","path":"tooldispatch.toml"}`, "tooldispatch's own files"},
		{"write_result into a hard link", "write_result", `{"content":"x","format":"text","path":"hl.txt"}`, "hard links"},
		{"html_template from the key", "html_template", `{"template_path":"dd/secret.key","data":{"x":1},"output_path":"out.html"}`, "tooldispatch's own files"},
		{"html_template from the config", "html_template", `{"template_path":"tooldispatch.toml","data":{"x":1},"output_path":"out.html"}`, "tooldispatch's own files"},
		{"html_template into the data dir", "html_template", `{"template":"<p>{{.x}}</p>","data":{"x":1},"output_path":"dd/new.html"}`, "tooldispatch's own files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.call(t, tc.tool, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q, %v; want an error with %q", out, err, tc.want)
			}
			if strings.Contains(out, "KEEP") {
				t.Fatalf("the result shows a protected file: %q", out)
			}
		})
	}
	for _, p := range []string{key, config, outside} {
		if b, _ := os.ReadFile(p); string(b) != "KEEP {{.x}}" {
			t.Errorf("%s changed: %q", p, b)
		}
	}
	for _, rel := range []string{"dd/secret.key", "tooldispatch.toml", "hl.txt", "dd/new.html"} {
		if vs, _ := e.versions.FileVersions(context.Background(), ws.Dir(), rel); len(vs) > 0 {
			t.Errorf("a refused write kept %d versions of %s", len(vs), rel)
		}
	}
}
