package interact

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

func TestWriteResult(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name     string
		args     string
		want     []string // parts of the answer
		wantErr  string
		file     string // path that must then hold content
		content  string
		readOnly bool
	}{
		{
			name:     "without path: recorded and returned",
			args:     `{"title":"Summary","content":"# Done\nAll tests pass.","format":"markdown"}`,
			want:     []string{"Final result recorded (markdown: Summary).", "# Done\nAll tests pass."},
			readOnly: true,
		},
		{
			name:     "json is checked",
			args:     `{"content":"{\"ok\":true}","format":"json"}`,
			want:     []string{`{"ok":true}`},
			readOnly: true,
		},
		{
			name:     "invalid json",
			args:     `{"content":"{ok:true}","format":"json"}`,
			wantErr:  "not valid JSON",
			readOnly: true,
		},
		{
			name:    "with path: written",
			args:    `{"title":"Report","content":"All good.\n","format":"text","path":"reports/summary.txt"}`,
			want:    []string{"written to reports/summary.txt", "version 1"},
			file:    "reports/summary.txt",
			content: "All good.\n",
		},
		{
			name:    "absolute path inside the workspace",
			args:    `{"content":"abs","format":"text","path":"` + filepath.Join(e.dir, "abs.txt") + `"}`,
			want:    []string{"written to abs.txt"},
			file:    "abs.txt",
			content: "abs",
		},
		{
			name:    "outside the workspace",
			args:    `{"content":"x","format":"text","path":"../outside/pwned.txt"}`,
			wantErr: "outside the workspace",
		},
		{
			name:    "data directory",
			args:    `{"content":"x","format":"text","path":".tooldispatch/x"}`,
			wantErr: "data directory",
		},
		{
			name:     "unknown format",
			args:     `{"content":"x","format":"html"}`,
			wantErr:  "format",
			readOnly: true,
		},
	}
	tool, _ := e.reg.Lookup("write_result")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tool.IsReadOnly(mustArgs(t, tt.args)); got != tt.readOnly {
				t.Errorf("read-only = %v, want %v", got, tt.readOnly)
			}
			out, err := e.call(t, "write_result", tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error with %q", out, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("answer lacks %q:\n%s", w, out)
				}
			}
			if tt.file != "" {
				if got, _ := e.read(t, tt.file); got != tt.content {
					t.Errorf("%s holds %q, want %q", tt.file, got, tt.content)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(e.outside, "pwned.txt")); !os.IsNotExist(err) {
		t.Errorf("a file was written outside the workspace: %v", err)
	}
}

func TestWriteResultKeepsPreviousVersion(t *testing.T) {
	e := newEnv(t)
	e.write(t, "out.md", "old")
	if _, err := e.call(t, "write_result", `{"content":"new","format":"markdown","path":"out.md"}`); err != nil {
		t.Fatal(err)
	}
	old, _, err := e.versions.FileVersionContent(context.Background(), e.dir, "out.md", 1)
	if err != nil || string(old) != "old" {
		t.Errorf("version 1 = %q, %v; want the previous content", old, err)
	}
}

func TestWriteResultWithoutWorkspace(t *testing.T) {
	reg := toolkit.NewRegistry()
	Register(reg, Deps{})
	if _, ok := reg.Lookup("html_template"); ok {
		t.Error("html_template is registered without a workspace")
	}
	if out, err := callTool(t, reg, context.Background(), "write_result", `{"content":"x","format":"text"}`, nil); err != nil || !strings.Contains(out, "x") {
		t.Errorf("without path: %q, %v", out, err)
	}
	if _, err := callTool(t, reg, context.Background(), "write_result", `{"content":"x","format":"text","path":"a.txt"}`, nil); !errors.Is(err, errNoWorkspace) {
		t.Errorf("with path and no workspace: %v", err)
	}
}

func TestHTMLTemplate(t *testing.T) {
	e := newEnv(t)
	e.write(t, "tpl/page.html", `<ul>{{range .items}}<li>{{.}}</li>{{end}}</ul>`)
	tests := []struct {
		name    string
		args    string
		file    string
		want    string
		wantErr string
	}{
		{
			name: "renders and escapes",
			args: `{"template":"<h1>{{.title}}</h1><a href=\"{{.url}}\">x</a>","data":{"title":"<script>alert(1)</script>","url":"javascript:alert(1)"},"output_path":"out/index.html"}`,
			file: "out/index.html",
			want: `<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1><a href="#ZgotmplZ">x</a>`,
		},
		{
			name: "numbers compare and print as written",
			args: `{"template":"{{if gt .n 2}}{{.n}} items, {{.price}} each{{end}}","data":{"n":3,"price":2.5},"output_path":"n.html"}`,
			file: "n.html",
			want: "3 items, 2.5 each",
		},
		{
			name: "template from a workspace file",
			args: `{"template_path":"tpl/page.html","data":{"items":["a","<b>"]},"output_path":"list.html"}`,
			file: "list.html",
			want: "<ul><li>a</li><li>&lt;b&gt;</li></ul>",
		},
		{
			name: "missing data renders empty",
			args: `{"template":"[{{.nothing}}]","output_path":"empty.html"}`,
			file: "empty.html",
			want: "[]",
		},
		{name: "output outside", args: `{"template":"x","output_path":"../outside/x.html"}`, wantErr: "outside the workspace"},
		{name: "absolute output outside", args: `{"template":"x","output_path":"/tmp/x.html"}`, wantErr: "outside the workspace"},
		{name: "template outside", args: `{"template_path":"../outside/secret.txt","output_path":"x.html"}`, wantErr: "outside the workspace"},
		{name: "both template and path", args: `{"template":"x","template_path":"tpl/page.html","output_path":"x.html"}`, wantErr: "must match exactly one"},
		{name: "neither template nor path", args: `{"output_path":"x.html"}`, wantErr: `missing required field "template"`},
		{name: "bad template", args: `{"template":"{{if}}","output_path":"x.html"}`, wantErr: "does not parse"},
		{name: "missing template file", args: `{"template_path":"nope.html","output_path":"x.html"}`, wantErr: "nope.html does not exist"},
		{name: "output is the workspace", args: `{"template":"x","output_path":"."}`, wantErr: "workspace directory"},
		{name: "output too big", args: `{"template":"{{range 2000}}{{$.s}}{{end}}","data":{"s":"` + strings.Repeat("x", 4096) + `"},"output_path":"x.html"}`, wantErr: "larger than 4.0 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.call(t, "html_template", tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error with %q", out, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := e.read(t, tt.file); got != tt.want {
				t.Errorf("%s holds %q, want %q", tt.file, got, tt.want)
			}
			if !strings.Contains(out, "to "+tt.file) {
				t.Errorf("answer does not name the output: %q", out)
			}
		})
	}
	if _, ok := e.read(t, "x.html"); ok {
		t.Error("a failed rendering wrote its output file")
	}
	entries, _ := os.ReadDir(e.outside)
	if len(entries) != 1 {
		t.Errorf("files appeared outside the workspace: %v", entries)
	}
}

func TestHTMLTemplateRefusesSymlinksOut(t *testing.T) {
	e := newEnv(t)
	if err := os.Symlink(e.outside, filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`{"template":"x","output_path":"link/x.html"}`,
		`{"template_path":"link/secret.txt","output_path":"x.html"}`,
	} {
		_, err := e.call(t, "html_template", args)
		if !errors.Is(err, builtin.ErrOutsideWorkspace) {
			t.Errorf("%s: got %v, want ErrOutsideWorkspace", args, err)
		}
	}
	if entries, _ := os.ReadDir(e.outside); len(entries) != 1 {
		t.Errorf("files appeared outside the workspace: %v", entries)
	}
}

// The step counting must not change what a template renders, in any
// escaping context.
func TestRenderMatchesHTMLTemplate(t *testing.T) {
	data := map[string]any{"items": []any{"a<b", `"q"`, "c&d"}, "n": int64(2), "js": "</script><b>"}
	for _, text := range []string{
		`<p>{{range .items}}{{.}},{{end}}</p>`,
		`<script>var xs = [{{range $i, $x := .items}}{{if $i}},{{end}}{{$x}}{{end}}]; var s = {{.js}};</script>`,
		`<a href="/q?x={{range .items}}{{.}}{{end}}" title="{{range .items}}{{.}} {{else}}none{{end}}">x</a>`,
		`<style>p { color: {{range .items}}{{.}}{{end}} }</style>`,
		`{{define "li"}}<li>{{.}}</li>{{end}}<ul>{{range .items}}{{template "li" .}}{{end}}</ul>`,
		`{{with .items}}{{range .}}[{{.}}]{{end}}{{end}}{{range $i := .n}}{{$i}}{{break}}{{end}}`,
	} {
		want := new(bytes.Buffer)
		if err := template.Must(template.New("t").Parse(text)).Execute(want, data); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		got, err := render(context.Background(), "t", text, data, defaultRenderLimits)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if string(got) != want.String() {
			t.Errorf("%s\n got %q\nwant %q", text, got, want)
		}
	}
}

func TestRenderStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A loop that prints nothing still checks the context at every step.
	if _, err := render(ctx, "t", `{{range 1000000}}{{end}}`, nil, defaultRenderLimits); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// Templates that run away end with an error instead of running on.
func TestRenderLimits(t *testing.T) {
	lim := renderLimits{steps: 1000, output: 1 << 10}
	tests := []struct {
		name, text, want string
	}{
		{"loop without output", `{{range 100000000000}}{{end}}`, "more than 1000 loop iterations"},
		{"nested loops", `{{range 100}}{{range 100}}{{end}}{{end}}`, "more than 1000 loop iterations"},
		{"recursion", `{{define "a"}}{{template "a" .}}{{template "a" .}}{{end}}{{template "a" .}}`, "more than 1000 loop iterations"},
		{"output", `{{range 100}}0123456789abcdef{{end}}`, "larger than 1.0 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(context.Background(), "t", tt.text, nil, lim)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}
