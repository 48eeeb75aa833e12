package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Limits and timeouts of the file tools.
const (
	readTimeout    = 60 * time.Second
	findTimeout    = 60 * time.Second
	historyTimeout = 30 * time.Second
	editTimeout    = 30 * time.Second

	maxReadPaths   = 50
	readCapPerFile = 256 << 10 // bytes of numbered output per file
	maxLineBytes   = 8 << 10   // a longer line is shown cut
	sniffBytes     = 8 << 10   // looked at to tell text from binary
	maxEditBytes   = 8 << 20   // largest file edit_file, remove_file and restore_file handle

	defaultFindResults = 200
	maxFindResults     = 1000
	maxFindVisits      = 200_000 // entries find_files looks at before it stops

	// dataDir is tooldispatch's default data directory inside the
	// workspace: find_files skips it and the file tools do not change it.
	dataDir = ".tooldispatch"
)

// fileTools holds what the file tools share.
type fileTools struct {
	// immutable after Tools
	ws       *Workspace
	versions VersionStore
	log      zerolog.Logger
}

// cleanPaths returns the cleaned form of every path that stays inside the
// workspace, for Tool.Paths.
func (f *fileTools) cleanPaths(ps ...string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if rel, err := f.ws.Clean(p); err == nil && !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	return out
}

func (f *fileTools) readFilesTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "read_files",
		Description: "Read one or more text files of the workspace. Each file comes with a header and numbered lines " +
			"(like cat -n). Use offset and limit to page through long files; output is cut at 256 KiB per file. " +
			"Binary files are not shown. Read every file you need in one call rather than one call per file.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"paths": {
					"type": "array",
					"description": "Files to read, relative to the workspace root (absolute paths inside the workspace also work).",
					"items": {"type": "string", "minLength": 1, "description": "A file path."},
					"minItems": 1,
					"maxItems": 50
				},
				"offset": {
					"type": "integer",
					"description": "First line to show, counting from 1 (default 1). Applies to every file.",
					"minimum": 1
				},
				"limit": {
					"type": "integer",
					"description": "Most lines to show per file (default: all, within the 256 KiB cap).",
					"minimum": 1
				}
			},
			"required": ["paths"],
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    readTimeout,
		Handler:    f.readFiles,
		Paths:      func(a toolkit.Args) []string { return f.cleanPaths(a.Strings("paths")...) },
		Stamp:      f.stampPaths(func(a toolkit.Args) []string { return f.cleanPaths(a.Strings("paths")...) }),
	}
}

func (f *fileTools) readFiles(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	paths := c.Args.Strings("paths")
	if len(paths) == 0 {
		return toolkit.Result{}, errors.New("paths is empty: name at least one file")
	}
	if len(paths) > maxReadPaths {
		return toolkit.Result{}, fmt.Errorf("%d paths given; read at most %d files per call", len(paths), maxReadPaths)
	}
	offset := max(c.Args.Int("offset", 1), 1)
	limit := max(c.Args.Int("limit", 0), 0)

	var out strings.Builder
	var failures []error
	for i, p := range paths {
		if err := ctx.Err(); err != nil {
			return toolkit.Result{}, err
		}
		if i > 0 {
			out.WriteString("\n")
		}
		rel, err := f.ws.Clean(p)
		if err == nil {
			err = f.readOne(ctx, &out, rel, offset, limit)
		}
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return toolkit.Result{}, ctxErr
			}
			name := p
			if rel != "" {
				name = rel
			}
			fmt.Fprintf(&out, "==> %s <==\nerror: %v\n", name, err)
			failures = append(failures, err)
		}
	}
	f.log.Debug().Str("tool", "read_files").Int("files", len(paths)).Int("failed", len(failures)).Msg("read")
	if len(failures) == len(paths) {
		return toolkit.Result{}, joinedError(failures)
	}
	return toolkit.Result{Content: out.String()}, nil
}

// readOne writes one file's header and numbered lines to out. It writes
// nothing when it returns an error.
func (f *fileTools) readOne(ctx context.Context, out *strings.Builder, rel string, offset, limit int64) error {
	file, err := f.ws.open(rel)
	if err != nil {
		return err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return f.ws.fileErr(rel, err)
	}
	if fi.IsDir() {
		return &fileError{path: rel, what: "is a directory; list it with find_files"}
	}
	if !fi.Mode().IsRegular() {
		return &fileError{path: rel, what: "is not a regular file"}
	}

	r := bufio.NewReaderSize(file, 64<<10)
	sniff, err := r.Peek(sniffBytes)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return f.ws.fileErr(rel, err)
	}
	if looksBinary(sniff, len(sniff) < sniffBytes) {
		return &fileError{path: rel, what: fmt.Sprintf("looks like a binary file (%s, %s); it is not shown",
			strings.TrimSuffix(http.DetectContentType(sniff), "; charset=utf-8"), toolkit.HumanSize(fi.Size()))}
	}

	var body strings.Builder
	var lineNo, first, last int64
	var cut, more, lineCut bool
	for {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, full, err := readLine(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return f.ws.fileErr(rel, err)
		}
		lineNo++
		if lineNo < offset {
			continue
		}
		if limit > 0 && lineNo >= offset+limit {
			more = true
			break
		}
		if body.Len() >= readCapPerFile {
			cut, more = true, true
			break
		}
		text := strings.ToValidUTF8(string(line), "\uFFFD")
		if full > 0 {
			text += fmt.Sprintf(" …[line cut: %s long]", toolkit.HumanSize(int64(full)))
			lineCut = true
		}
		if first == 0 {
			first = lineNo
		}
		last = lineNo
		fmt.Fprintf(&body, "%6d\t%s\n", lineNo, text)
	}

	fmt.Fprintf(out, "==> %s <== (%s", rel, toolkit.HumanSize(fi.Size()))
	switch {
	case fi.Size() == 0:
		out.WriteString(", empty file)\n")
		return nil
	case first == 0:
		fmt.Fprintf(out, ", %d lines; offset %d is past the end)\n", lineNo, offset)
		return nil
	case !more:
		fmt.Fprintf(out, ", lines %d-%d of %d)\n", first, last, lineNo)
	default:
		fmt.Fprintf(out, ", lines %d-%d)\n", first, last)
	}
	out.WriteString(body.String())
	switch {
	case cut:
		fmt.Fprintf(out, "[output cut at %s; the file continues — read on with offset=%d]\n", toolkit.HumanSize(readCapPerFile), last+1)
	case more:
		fmt.Fprintf(out, "[more lines follow — read on with offset=%d]\n", last+1)
	}
	if lineCut {
		fmt.Fprintf(out, "[lines longer than %s are shown cut]\n", toolkit.HumanSize(maxLineBytes))
	}
	return nil
}

// readLine returns the next line without its line ending, at most
// maxLineBytes of it; cut is the line's full length when it was longer. It
// returns io.EOF only when no bytes are left.
func readLine(r *bufio.Reader) (line []byte, cut int, err error) {
	full := 0
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case err == nil:
			chunk = bytes.TrimSuffix(bytes.TrimSuffix(chunk, []byte("\n")), []byte("\r"))
		case errors.Is(err, bufio.ErrBufferFull), errors.Is(err, io.EOF):
		default:
			return nil, 0, err
		}
		full += len(chunk)
		if room := maxLineBytes - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && full == 0:
			return nil, 0, io.EOF
		}
		if full > len(line) {
			cut = full
		}
		return line, cut, nil
	}
}

// looksBinary tells binary content from text by its first bytes: a NUL byte,
// or bytes that are not UTF-8 (a rune cut by the end of the sample is fine
// unless the sample is the whole file).
func looksBinary(sample []byte, whole bool) bool {
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	if !whole {
		for i := 0; i < utf8.UTFMax && len(sample) > 0; i++ {
			if r, _ := utf8.DecodeLastRune(sample); r != utf8.RuneError {
				break
			}
			sample = sample[:len(sample)-1]
		}
	}
	return !utf8.Valid(sample)
}

func (f *fileTools) findFilesTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "find_files",
		Description: "Find files in the workspace by glob pattern. `*`, `?` and `[...]` match within one path segment, " +
			"`**` matches any number of directories; a pattern without a slash matches file names at any depth " +
			"(`*.go` finds every Go file). Results are workspace-relative paths in sorted order; .git and " +
			".tooldispatch are skipped.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"pattern": {
					"type": "string",
					"description": "Glob pattern relative to path, e.g. \"*.go\", \"src/**/*_test.go\", \"docs/*.md\".",
					"minLength": 1,
					"maxLength": 500
				},
				"path": {
					"type": "string",
					"description": "Directory to search, relative to the workspace root (default: the whole workspace)."
				},
				"max_results": {
					"type": "integer",
					"description": "Most paths to return (default 200, at most 1000).",
					"minimum": 1,
					"maximum": 1000
				}
			},
			"required": ["pattern"],
			"additionalProperties": false
		}`),
		Concurrent:      true,
		ReadOnly:        true,
		Timeout:         findTimeout,
		Handler:         f.findFiles,
		StaleOnMutation: true,
	}
}

func (f *fileTools) findFiles(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	base := "."
	if p := c.Args.String("path"); p != "" {
		var err error
		if base, err = f.ws.Clean(p); err != nil {
			return toolkit.Result{}, err
		}
	}
	pattern := c.Args.String("pattern")
	segs, err := parsePattern(pattern)
	if err != nil {
		return toolkit.Result{}, err
	}
	maxResults := int(min(max(c.Args.Int("max_results", defaultFindResults), 1), maxFindResults))

	fi, err := f.ws.stat(base)
	if err != nil {
		return toolkit.Result{}, err
	}
	if !fi.IsDir() {
		return toolkit.Result{}, &fileError{path: base, what: "is not a directory"}
	}

	// Entries are checked against tooldispatch's own files by where they
	// really are: below the resolved base, the walk follows no symlinks.
	realBase, own := f.ws.realPath(base), f.ws.ProtectedPaths()
	var matches []string
	total, visited, unreadable := 0, 0, 0
	stopped := false
	walkErr := fs.WalkDir(f.ws.fsys(), base, func(p string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			if p == base {
				return f.ws.fileErr(base, err)
			}
			unreadable++
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		visited++
		if visited > maxFindVisits {
			stopped = true
			return fs.SkipAll
		}
		rel := p
		if base != "." {
			rel = strings.TrimPrefix(p, base+"/")
		}
		if d.IsDir() {
			if p != base && (d.Name() == ".git" || d.Name() == dataDir || f.ws.ownPath(own, realBase, rel, d)) {
				return fs.SkipDir
			}
			return nil
		}
		if matchSegments(segs, strings.Split(rel, "/")) && !f.ws.ownPath(own, realBase, rel, d) {
			total++
			if len(matches) < maxResults {
				matches = append(matches, p)
			}
		}
		return nil
	})
	if walkErr != nil {
		return toolkit.Result{}, walkErr
	}
	slices.Sort(matches)
	f.log.Debug().Str("tool", "find_files").Str("path", base).Int("matches", total).Msg("walked")

	var out strings.Builder
	where := "the workspace"
	if base != "." {
		where = base
	}
	if total == 0 {
		fmt.Fprintf(&out, "no files match %q in %s\n", pattern, where)
	} else {
		for _, m := range matches {
			out.WriteString(m)
			out.WriteByte('\n')
		}
		if total > len(matches) {
			fmt.Fprintf(&out, "[showing %d of %d matches; narrow the pattern or the path, or raise max_results]\n", len(matches), total)
		} else {
			fmt.Fprintf(&out, "[%d files match %q in %s]\n", total, pattern, where)
		}
	}
	if stopped {
		fmt.Fprintf(&out, "[the search stopped after looking at %d entries; narrow the path]\n", maxFindVisits)
	}
	if unreadable > 0 {
		fmt.Fprintf(&out, "[%d entries could not be read and were skipped]\n", unreadable)
	}
	return toolkit.Result{Content: out.String()}, nil
}

// parsePattern splits a glob into path segments. A pattern without a slash
// matches names at any depth.
func parsePattern(pattern string) ([]string, error) {
	if pattern == "" {
		return nil, errors.New("pattern is empty")
	}
	if strings.HasPrefix(pattern, "/") {
		return nil, fmt.Errorf("pattern %q must be relative; put the directory in path instead", pattern)
	}
	if !strings.Contains(pattern, "/") {
		pattern = "**/" + pattern
	}
	var segs []string
	for _, s := range strings.Split(pattern, "/") {
		switch s {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("pattern %q must not contain ..; files outside the workspace cannot be searched", pattern)
		case "**":
			if len(segs) > 0 && segs[len(segs)-1] == "**" {
				continue
			}
		default:
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("pattern %q: segment %q is not a valid glob (check [ ] and \\ escapes)", pattern, s)
			}
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("pattern %q matches nothing; try \"**/*\"", pattern)
	}
	return segs, nil
}

// matchSegments matches path segments against glob segments, where "**"
// stands for any number of segments. Dynamic programming keeps it linear in
// the product of both lengths.
func matchSegments(pat, name []string) bool {
	// ok[j] reports whether pat[:i] matches name[:j] for the current i.
	ok := make([]bool, len(name)+1)
	ok[0] = true
	for _, p := range pat {
		next := make([]bool, len(name)+1)
		if p == "**" {
			seen := false
			for j := range ok {
				seen = seen || ok[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(name); j++ {
				if ok[j-1] {
					m, _ := path.Match(p, name[j-1])
					next[j] = m
				}
			}
		}
		ok = next
	}
	return ok[len(name)]
}

func (f *fileTools) fileHistoryTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "file_history",
		Description: "List the kept versions of a workspace file, oldest first: version number, time, size and the tool " +
			"that kept it. edit_file, remove_file and restore_file keep the previous content before every change; " +
			"bring one back with restore_file.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"path": {
					"type": "string",
					"description": "The file, relative to the workspace root.",
					"minLength": 1
				}
			},
			"required": ["path"],
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    historyTimeout,
		Handler:    f.fileHistory,
		Paths:      func(a toolkit.Args) []string { return f.cleanPaths(a.String("path")) },
		Stamp:      f.stampPaths(func(a toolkit.Args) []string { return f.cleanPaths(a.String("path")) }),
	}
}

func (f *fileTools) fileHistory(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	rel, err := f.ws.Clean(c.Args.String("path"))
	if err != nil {
		return toolkit.Result{}, err
	}
	current := "does not exist now"
	fi, err := f.ws.stat(rel)
	switch {
	case err == nil && fi.IsDir():
		return toolkit.Result{}, &fileError{path: rel, what: "is a directory; file_history lists versions of files"}
	case err == nil:
		current = "now " + toolkit.HumanSize(fi.Size())
	case !errors.Is(err, fs.ErrNotExist):
		return toolkit.Result{}, err
	}
	vs, err := f.versions.FileVersions(ctx, f.ws.Dir(), rel)
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("listing versions of %s: %w", rel, err)
	}
	if len(vs) == 0 {
		return toolkit.Result{Content: fmt.Sprintf("no versions kept for %s (%s)\n", rel, current)}, nil
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%s: %s, oldest first (%s)\n", rel, plural(len(vs), "version"), current)
	for _, v := range vs {
		size := toolkit.HumanSize(v.Size)
		if v.Deleted {
			size = "did not exist"
		}
		fmt.Fprintf(&out, "  #%d  %s  %s  %s\n", v.Version, v.Time.UTC().Format(time.RFC3339), size, v.Note)
	}
	fmt.Fprintf(&out, "restore one with restore_file {\"path\": %q, \"version\": N}\n", rel)
	return toolkit.Result{Content: out.String()}, nil
}

// joinedError reports several failures on one line and matches each of them
// with errors.Is and errors.As.
type joinedError []error

func (e joinedError) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e joinedError) Unwrap() []error { return e }
