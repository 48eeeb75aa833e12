package builtin

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadFiles(t *testing.T) {
	e := newTestEnv(t)
	e.write("a.txt", "alpha\nbeta\ngamma\n")
	e.write("crlf.txt", "one\r\ntwo\r\n")
	e.write("nonl.txt", "last line without newline")
	e.write("empty.txt", "")
	e.write("dir/inner.txt", "x\n")
	e.write("bin.dat", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	var long strings.Builder
	for i := 1; i <= 30000; i++ {
		fmt.Fprintf(&long, "line %d of a long file\n", i)
	}
	e.write("long.txt", long.String())
	e.write("wide.txt", strings.Repeat("w", 20000)+"\nshort\n")

	tests := []struct {
		name    string
		args    string
		want    []string // parts of the content
		notWant []string
		err     []string // parts of the error; nil means success
	}{
		{name: "numbered lines", args: `{"paths":["a.txt"]}`,
			want: []string{"==> a.txt <== (17 B, lines 1-3 of 3)\n", "     1\talpha\n", "     2\tbeta\n", "     3\tgamma\n"}},
		{name: "offset and limit", args: `{"paths":["a.txt"],"offset":2,"limit":1}`,
			want: []string{"lines 2-2)", "     2\tbeta\n", "read on with offset=3"}, notWant: []string{"alpha", "gamma"}},
		{name: "offset past the end", args: `{"paths":["a.txt"],"offset":10}`, want: []string{"3 lines; offset 10 is past the end"}},
		{name: "CRLF line endings", args: `{"paths":["crlf.txt"]}`, want: []string{"     1\tone\n", "     2\ttwo\n"}, notWant: []string{"\r"}},
		{name: "no final newline", args: `{"paths":["nonl.txt"]}`, want: []string{"     1\tlast line without newline\n", "lines 1-1 of 1"}},
		{name: "empty file", args: `{"paths":["empty.txt"]}`, want: []string{"empty file"}},
		{name: "several files with headers", args: `{"paths":["a.txt","dir/inner.txt","./a.txt"]}`,
			want: []string{"==> a.txt <==", "==> dir/inner.txt <==", "     1\tx\n"}},
		{name: "absolute path inside", args: fmt.Sprintf(`{"paths":[%q]}`, e.path("a.txt")), want: []string{"==> a.txt <=="}},
		{name: "missing file among good ones", args: `{"paths":["a.txt","nope.txt"]}`,
			want: []string{"alpha", "==> nope.txt <==\nerror: nope.txt does not exist"}},
		{name: "every file missing", args: `{"paths":["nope.txt","gone/x"]}`, err: []string{"nope.txt does not exist", "gone/x does not exist"}},
		{name: "binary refused", args: `{"paths":["bin.dat"]}`, err: []string{"bin.dat looks like a binary file", "image/png", "not shown"}},
		{name: "directory refused", args: `{"paths":["dir"]}`, err: []string{"dir is a directory"}},
		{name: "size cap", args: `{"paths":["long.txt"]}`,
			want: []string{"     1\tline 1 of a long file\n", "output cut at 256.0 KiB", "read on with offset="}, notWant: []string{"line 30000 of"}},
		{name: "long line cut", args: `{"paths":["wide.txt"]}`, want: []string{"line cut: 19.5 KiB long", "     2\tshort\n"}},
		{name: "paging past the cap", args: `{"paths":["long.txt"],"offset":29999}`,
			want: []string{"line 29999 of a long file", "line 30000 of a long file", "lines 29999-30000 of 30000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.call("read_files", tt.args)
			if tt.err != nil {
				wantErr(t, err, tt.err...)
				return
			}
			wantContent(t, out, err, tt.want...)
			for _, n := range tt.notWant {
				if strings.Contains(out, n) {
					t.Fatalf("content contains %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestReadFilesHonoursContext(t *testing.T) {
	e := newTestEnv(t)
	e.write("a.txt", "alpha\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.callCtx(ctx, "read_files", `{"paths":["a.txt"]}`, func(string) {})
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestEditFile(t *testing.T) {
	tests := []struct {
		name    string
		before  *string // nil: the file does not exist
		args    string
		after   *string // nil: unchanged (or still absent)
		content []string
		err     []string
		version *VersionInfo // the version the call must keep (Time ignored)
	}{
		{name: "create with parent dirs", args: `{"path":"new/dir/f.txt","content":"hello\n"}`,
			after: ptr("hello\n"), content: []string{"created new/dir/f.txt (1 line, 6 B)", "version 1 records that it did not exist"},
			version: &VersionInfo{Version: 1, Deleted: true, Note: "edit_file"}},
		{name: "overwrite", before: ptr("old\n"), args: `{"path":"new/dir/f.txt","content":"new\n"}`,
			after: ptr("new\n"), content: []string{"wrote new/dir/f.txt", "previous content is kept as version 1"},
			version: &VersionInfo{Version: 1, Size: 4, Note: "edit_file"}},
		{name: "same content", before: ptr("same\n"), args: `{"path":"new/dir/f.txt","content":"same\n"}`,
			content: []string{"already has this content (5 B); nothing changed"}},
		{name: "patch once", before: ptr("a\nfoo\nb\n"), args: `{"path":"new/dir/f.txt","old_string":"foo","new_string":"bar"}`,
			after: ptr("a\nbar\nb\n"), content: []string{"replaced 1 occurrence in new/dir/f.txt (line 2)"},
			version: &VersionInfo{Version: 1, Size: 8, Note: "edit_file"}},
		{name: "patch deletes text", before: ptr("keep drop keep"), args: `{"path":"new/dir/f.txt","old_string":" drop","new_string":""}`,
			after: ptr("keep keep"), content: []string{"replaced 1 occurrence"},
			version: &VersionInfo{Version: 1, Size: 14, Note: "edit_file"}},
		{name: "ambiguous patch", before: ptr("x = 1\ny = 1\nx = 1\n"), args: `{"path":"new/dir/f.txt","old_string":"x = 1","new_string":"x = 2"}`,
			err: []string{"appears 2 times", "lines 1, 3", "no change made", "replace_all"}},
		{name: "replace all", before: ptr("x = 1\ny = 1\nx = 1\n"), args: `{"path":"new/dir/f.txt","old_string":"x = 1","new_string":"x = 2","replace_all":true}`,
			after: ptr("x = 2\ny = 1\nx = 2\n"), content: []string{"replaced 2 occurrences", "(lines 1, 3)"},
			version: &VersionInfo{Version: 1, Size: 18, Note: "edit_file"}},
		{name: "old_string absent", before: ptr("abc\n"), args: `{"path":"new/dir/f.txt","old_string":"xyz","new_string":"q"}`,
			err: []string{"old_string was not found in new/dir/f.txt", "no change made"}},
		{name: "patch of a missing file", args: `{"path":"new/dir/f.txt","old_string":"a","new_string":"b"}`,
			err: []string{"does not exist", "give content"}},
		{name: "identical strings", before: ptr("abc\n"), args: `{"path":"new/dir/f.txt","old_string":"abc","new_string":"abc"}`,
			err: []string{"the same"}},
		{name: "both modes", before: ptr("abc\n"), args: `{"path":"new/dir/f.txt","content":"x","old_string":"abc","new_string":"d"}`,
			err: []string{"not both"}},
		{name: "half a patch", before: ptr("abc\n"), args: `{"path":"new/dir/f.txt","old_string":"abc"}`,
			err: []string{"needs both old_string and new_string"}},
		{name: "nothing to do", before: ptr("abc\n"), args: `{"path":"new/dir/f.txt"}`, err: []string{"give content"}},
		{name: "directory", args: `{"path":"new/dir","content":"x"}`, err: []string{"new/dir is a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t)
			must(t, os.MkdirAll(e.path("new/dir"), 0o755))
			if tt.before != nil {
				e.write("new/dir/f.txt", *tt.before)
			}
			pv := e.preview("edit_file", tt.args)
			out, err := e.call("edit_file", tt.args)
			if tt.err != nil {
				wantErr(t, err, tt.err...)
			} else {
				wantContent(t, out, err, tt.content...)
			}
			want, wantExists := tt.after, true
			if want == nil {
				want, wantExists = tt.before, tt.before != nil
			}
			got, exists := e.read("new/dir/f.txt")
			if exists != wantExists || (exists && got != *want) {
				t.Fatalf("file = %q (exists %v), want %v (exists %v)", got, exists, want, wantExists)
			}
			e.previewPredicted(pv, "edit_file", tt.args, "new/dir/f.txt", tt.before, err)
			vs, err := e.versions.FileVersions(context.Background(), e.ws.Dir(), "new/dir/f.txt")
			must(t, err)
			if tt.version == nil {
				if len(vs) != 0 {
					t.Fatalf("versions kept on a call that changed nothing: %+v", vs)
				}
				return
			}
			if len(vs) != 1 {
				t.Fatalf("got %d versions, want 1", len(vs))
			}
			vs[0].Time = tt.version.Time
			if diff := cmp.Diff(*tt.version, vs[0]); diff != "" {
				t.Fatalf("kept version (-want +got):\n%s", diff)
			}
			b, _, err := e.versions.FileVersionContent(context.Background(), e.ws.Dir(), "new/dir/f.txt", 1)
			must(t, err)
			if tt.before != nil && string(b) != *tt.before {
				t.Fatalf("version content = %q, want %q", b, *tt.before)
			}
		})
	}
}

func TestRemoveRestoreRoundTrip(t *testing.T) {
	e := newTestEnv(t)
	step := func(tool, args string, want ...string) {
		t.Helper()
		out, err := e.call(tool, args)
		wantContent(t, out, err, want...)
	}
	fileIs := func(want string, wantExists bool) {
		t.Helper()
		got, exists := e.read("src/app.go")
		if exists != wantExists || got != want {
			t.Fatalf("src/app.go = %q (exists %v), want %q (exists %v)", got, exists, want, wantExists)
		}
	}

	step("edit_file", `{"path":"src/app.go","content":"v1\n"}`, "created src/app.go")                                    // keeps #1 (absent)
	step("edit_file", `{"path":"src/app.go","old_string":"v1","new_string":"v2"}`, "version 2")                          // keeps #2 = v1
	step("remove_file", `{"path":"src/app.go"}`, "removed src/app.go (3 B)", "kept as version 3", "restore_file brings") // keeps #3 = v2
	fileIs("", false)

	step("restore_file", `{"path":"src/app.go"}`, "restored src/app.go to version 3", "kept as version 4") // keeps #4 (absent)
	fileIs("v2\n", true)
	step("restore_file", `{"path":"src/app.go","version":2}`, "restored src/app.go to version 2", "kept as version 5") // keeps #5 = v2
	fileIs("v1\n", true)
	step("restore_file", `{"path":"src/app.go","version":2}`, "already matches version 2 (", "; nothing changed")
	step("restore_file", `{"path":"src/app.go","version":1}`, "removed src/app.go: version 1", "did not exist", "kept as version 6") // keeps #6 = v1
	fileIs("", false)
	step("restore_file", `{"path":"src/app.go","version":4}`, "does not exist, as in version 4 (", "; nothing changed")

	out, err := e.call("file_history", `{"path":"src/app.go"}`)
	wantContent(t, out, err,
		"src/app.go: 6 versions, oldest first (does not exist now)",
		"#1  ", "did not exist  edit_file\n",
		"#2  ", "3 B  edit_file\n",
		"#3  ", "3 B  remove_file\n",
		"#4  ", "did not exist  restore_file\n",
		"#5  ", "#6  ",
		`restore_file {"path": "src/app.go", "version": N}`)

	_, err = e.call("restore_file", `{"path":"src/app.go","version":99}`)
	wantErr(t, err, "has no version 99", "kept: 1 to 6")
	_, err = e.call("restore_file", `{"path":"other.go"}`)
	wantErr(t, err, "no versions are kept for other.go")
}

func TestRemoveFile(t *testing.T) {
	e := newTestEnv(t)
	e.write("d/f.txt", "x")
	tests := []struct {
		name, args string
		err        []string
	}{
		{"directory refused", `{"path":"d"}`, []string{"d is a directory", "files only"}},
		{"workspace refused", `{"path":"."}`, []string{"workspace directory itself"}},
		{"missing file", `{"path":"d/none.txt"}`, []string{"d/none.txt does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.call("remove_file", tt.args)
			wantErr(t, err, tt.err...)
		})
	}
	if _, ok := e.read("d/f.txt"); !ok {
		t.Fatal("d/f.txt was removed")
	}
}

func TestDataDirIsNotChanged(t *testing.T) {
	e := newTestEnv(t)
	e.write(".tooldispatch/MANIFEST", "db")
	_, err := e.versions.SaveFileVersion(context.Background(), e.ws.Dir(), ".tooldispatch/MANIFEST", []byte("old"), false, "test")
	must(t, err)
	for _, tc := range []struct{ tool, args string }{
		{"edit_file", `{"path":".tooldispatch/MANIFEST","content":"x"}`},
		{"edit_file", `{"path":"./.tooldispatch/new","content":"x"}`},
		{"remove_file", `{"path":".tooldispatch/MANIFEST"}`},
		{"restore_file", `{"path":".tooldispatch/MANIFEST"}`},
	} {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			_, err := e.call(tc.tool, tc.args)
			wantErr(t, err, "tooldispatch's data directory")
		})
	}
	if got, _ := e.read(".tooldispatch/MANIFEST"); got != "db" {
		t.Fatalf("data file changed: %q", got)
	}
	// Reading it is refused too: an old data directory holds a store and a
	// secret key.
	out, err := e.call("read_files", `{"paths":[".tooldispatch/MANIFEST"]}`)
	wantErr(t, err, "tooldispatch's own files")
	if strings.Contains(out, "db") {
		t.Fatalf("read_files shows the data file: %q", out)
	}
}

func TestFileHistory(t *testing.T) {
	e := newTestEnv(t)
	out, err := e.call("file_history", `{"path":"a.txt"}`)
	wantContent(t, out, err, "no versions kept for a.txt (does not exist now)")

	_, err = e.call("edit_file", `{"path":"a.txt","content":"12345"}`)
	must(t, err)
	out, err = e.call("file_history", fmt.Sprintf(`{"path":%q}`, e.path("a.txt")))
	wantContent(t, out, err, "a.txt: 1 version, oldest first (now 5 B)", "#1  ", "did not exist  edit_file")

	e.write("d/x", "")
	_, err = e.call("file_history", `{"path":"d"}`)
	wantErr(t, err, "d is a directory")
}

func TestFindFiles(t *testing.T) {
	e := newTestEnv(t)
	for _, f := range []string{
		"main.go", "README.md", "src/a.go", "src/a_test.go", "src/b.txt", "src/deep/c.go", "src/deep/deeper/d.go",
		"docs/x.md", "docs/sub/y.md", ".git/config", ".git/objects/z.go", ".tooldispatch/db.go", "sub/.git/q.go",
		"src/.hidden.go",
	} {
		e.write(f, "x")
	}
	must(t, os.Symlink(e.outside, e.path("outlink")))

	tests := []struct {
		name string
		args string
		want []string // result lines in order
		err  []string
	}{
		{name: "name at any depth", args: `{"pattern":"*.go"}`,
			want: []string{"main.go", "src/.hidden.go", "src/a.go", "src/a_test.go", "src/deep/c.go", "src/deep/deeper/d.go"}},
		{name: "one directory", args: `{"pattern":"src/*.go"}`, want: []string{"src/.hidden.go", "src/a.go", "src/a_test.go"}},
		{name: "double star", args: `{"pattern":"src/**/*.go"}`,
			want: []string{"src/.hidden.go", "src/a.go", "src/a_test.go", "src/deep/c.go", "src/deep/deeper/d.go"}},
		{name: "double star in the middle", args: `{"pattern":"src/**/deeper/*.go"}`, want: []string{"src/deep/deeper/d.go"}},
		{name: "under a path", args: `{"pattern":"*.md","path":"docs"}`, want: []string{"docs/sub/y.md", "docs/x.md"}},
		{name: "path-relative pattern", args: `{"pattern":"sub/*.md","path":"docs"}`, want: []string{"docs/sub/y.md"}},
		{name: "character class", args: `{"pattern":"src/[ab].*"}`, want: []string{"src/a.go", "src/b.txt"}},
		{name: "exact name", args: `{"pattern":"**/c.go"}`, want: []string{"src/deep/c.go"}},
		{name: "max results", args: `{"pattern":"*.go","max_results":2}`,
			want: []string{"main.go", "src/.hidden.go", "[showing 2 of 6 matches"}},
		{name: "no match is not an error", args: `{"pattern":"*.rs"}`, want: []string{`no files match "*.rs" in the workspace`}},
		{name: "bad glob", args: `{"pattern":"src/[a"}`, err: []string{"not a valid glob"}},
		{name: "dotdot in pattern", args: `{"pattern":"../*"}`, err: []string{"must not contain .."}},
		{name: "absolute pattern", args: `{"pattern":"/etc/*"}`, err: []string{"must be relative"}},
		{name: "path is a file", args: `{"pattern":"*","path":"main.go"}`, err: []string{"main.go is not a directory"}},
		{name: "missing path", args: `{"pattern":"*","path":"nope"}`, err: []string{"nope does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.call("find_files", tt.args)
			if tt.err != nil {
				wantErr(t, err, tt.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, "[") || strings.HasPrefix(l, "[showing") {
					got = append(got, l)
				}
			}
			if strings.HasPrefix(tt.want[len(tt.want)-1], "[showing") {
				last := got[len(got)-1]
				if !strings.HasPrefix(last, tt.want[len(tt.want)-1]) {
					t.Fatalf("last line %q, want prefix %q", last, tt.want[len(tt.want)-1])
				}
				got, tt.want = got[:len(got)-1], tt.want[:len(tt.want)-1]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("results (-want +got):\n%s\nfull output:\n%s", diff, out)
			}
		})
	}
}

func TestMatchSegments(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"**/*.go", "a.go", true},
		{"**/*.go", "x/y/a.go", true},
		{"a/**", "a/b/c", true},
		{"a/**", "a", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/*/b", "a/x/y/b", false},
		{"*.go", "a/b.go", false},
		{"**/**/**/**/**/**/**/**/x", strings.Repeat("a/", 200) + "y", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.name, func(t *testing.T) {
			if got := matchSegments(strings.Split(tt.pattern, "/"), strings.Split(tt.name, "/")); got != tt.want {
				t.Fatalf("match = %v, want %v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
