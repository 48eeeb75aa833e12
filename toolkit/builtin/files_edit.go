package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

func (f *fileTools) editFileTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "edit_file",
		Description: "Write or patch a workspace file. Give content to write the whole file (parent directories are " +
			"created), or old_string and new_string to replace an exact piece of text: old_string must appear exactly " +
			"once unless replace_all is true. Read the file first and copy old_string exactly, whitespace included. " +
			"The previous content is kept as a version (see file_history, restore_file).",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"path": {
					"type": "string",
					"description": "The file to write, relative to the workspace root.",
					"minLength": 1
				},
				"content": {
					"type": "string",
					"description": "The whole new content of the file. Do not combine with old_string/new_string."
				},
				"old_string": {
					"type": "string",
					"description": "Exact text to replace (patch mode); must appear exactly once unless replace_all is true.",
					"minLength": 1
				},
				"new_string": {
					"type": "string",
					"description": "Text that replaces old_string (patch mode); may be empty to delete it."
				},
				"replace_all": {
					"type": "boolean",
					"description": "Patch mode: replace every occurrence of old_string instead of requiring exactly one (default false)."
				}
			},
			"required": ["path"],
			"additionalProperties": false
		}`),
		Timeout: editTimeout,
		Handler: f.editFile,
		Paths:   func(a toolkit.Args) []string { return f.cleanPaths(a.String("path")) },
		// The approval is bound to the file as the preview showed it.
		Preview:   f.editPreview,
		FileState: f.pathState,
	}
}

func (f *fileTools) editFile(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	rel, err := f.ws.Clean(c.Args.String("path"))
	if err != nil {
		return toolkit.Result{}, err
	}
	if err := f.ws.CheckWrite(rel); err != nil {
		return toolkit.Result{}, err
	}
	mode, err := editModeOf(c.Args)
	if err != nil {
		return toolkit.Result{}, err
	}
	if mode == editWhole {
		return f.writeWhole(ctx, rel, []byte(c.Args.String("content")))
	}
	return f.patch(ctx, rel, c.Args)
}

// editMode is what an edit_file call does: write the whole file or patch it.
type editMode int

const (
	editWhole editMode = iota
	editPatch
)

// editModeOf tells the mode of edit_file arguments, or why they are wrong.
func editModeOf(a toolkit.Args) (editMode, error) {
	_, hasContent := a.Value["content"]
	_, hasOld := a.Value["old_string"]
	_, hasNew := a.Value["new_string"]
	_, hasAll := a.Value["replace_all"]
	switch {
	case hasContent && (hasOld || hasNew || hasAll):
		return 0, errors.New("give either content (whole file) or old_string and new_string (patch), not both")
	case hasContent:
		return editWhole, nil
	case hasOld && hasNew:
		return editPatch, nil
	case hasOld || hasNew:
		return 0, errors.New("a patch needs both old_string and new_string")
	default:
		return 0, errors.New("give content to write the whole file, or old_string and new_string to patch it")
	}
}

func (f *fileTools) writeWhole(ctx context.Context, rel string, content []byte) (toolkit.Result, error) {
	old, exists, err := f.ws.readAll(rel, maxEditBytes)
	if err != nil {
		return toolkit.Result{}, err
	}
	if exists && bytes.Equal(old, content) {
		return toolkit.Result{Content: fmt.Sprintf("%s already has this content (%s); nothing changed\n", rel, toolkit.HumanSize(int64(len(content))))}, nil
	}
	v, err := f.keep(ctx, rel, old, !exists, "edit_file")
	if err != nil {
		return toolkit.Result{}, err
	}
	if err := f.ws.writeFile(rel, content); err != nil {
		return toolkit.Result{}, err
	}
	f.log.Debug().Str("tool", "edit_file").Str("path", rel).Bool("created", !exists).Msg("wrote file")
	lines := bytes.Count(content, []byte("\n"))
	if len(content) > 0 && content[len(content)-1] != '\n' {
		lines++
	}
	if !exists {
		return toolkit.Result{Content: fmt.Sprintf("created %s (%s, %s); version %d records that it did not exist\n",
			rel, plural(lines, "line"), toolkit.HumanSize(int64(len(content))), v)}, nil
	}
	return toolkit.Result{Content: fmt.Sprintf("wrote %s (%s, %s); the previous content is kept as version %d\n",
		rel, plural(lines, "line"), toolkit.HumanSize(int64(len(content))), v)}, nil
}

// patched is what a patch's arguments make of a file's text: the new text
// and how many occurrences were replaced, or why the patch fails (the
// handler's and the preview's reason alike).
func patched(rel, text string, exists bool, a toolkit.Args) (updated string, n int, err error) {
	oldString, newString, replaceAll := a.String("old_string"), a.String("new_string"), a.Bool("replace_all")
	switch {
	case oldString == "":
		return "", 0, errors.New("old_string is empty; give the exact text to replace, or use content to write the whole file")
	case oldString == newString:
		return "", 0, errors.New("old_string and new_string are the same; nothing would change")
	case !exists:
		return "", 0, fmt.Errorf("%s does not exist; to create it, give content instead of old_string/new_string", rel)
	}
	n = strings.Count(text, oldString)
	switch {
	case n == 0:
		return "", 0, fmt.Errorf("old_string was not found in %s (no change made); read the file and copy the text exactly, whitespace and indentation included", rel)
	case n > 1 && !replaceAll:
		return "", 0, fmt.Errorf("old_string appears %d times in %s (lines %s; no change made); add surrounding text to make it unique, or set replace_all to replace all %d",
			n, rel, occurrenceLines(text, oldString, 10), n)
	}
	count := 1
	if replaceAll {
		count = -1
	}
	return strings.Replace(text, oldString, newString, count), n, nil
}

func (f *fileTools) patch(ctx context.Context, rel string, a toolkit.Args) (toolkit.Result, error) {
	if a.String("old_string") == "" || a.String("old_string") == a.String("new_string") {
		_, _, err := patched(rel, "", true, a)
		return toolkit.Result{}, err
	}
	data, exists, err := f.ws.readAll(rel, maxEditBytes)
	if err != nil {
		return toolkit.Result{}, err
	}
	text := string(data)
	updated, n, err := patched(rel, text, exists, a)
	if err != nil {
		return toolkit.Result{}, err
	}
	lines := occurrenceLines(text, a.String("old_string"), 10)
	v, err := f.keep(ctx, rel, data, false, "edit_file")
	if err != nil {
		return toolkit.Result{}, err
	}
	if err := f.ws.writeFile(rel, []byte(updated)); err != nil {
		return toolkit.Result{}, err
	}
	f.log.Debug().Str("tool", "edit_file").Str("path", rel).Int("replaced", n).Msg("patched file")
	where := "line"
	if n > 1 {
		where = "lines"
	}
	return toolkit.Result{Content: fmt.Sprintf("replaced %s in %s (%s %s); the previous content is kept as version %d\n",
		plural(n, "occurrence"), rel, where, lines, v)}, nil
}

// occurrenceLines lists the line numbers where sub starts in text, at most
// limit of them.
func occurrenceLines(text, sub string, limit int) string {
	var nums []string
	line, from := 1, 0
	for len(nums) < limit {
		i := strings.Index(text[from:], sub)
		if i < 0 {
			break
		}
		line += strings.Count(text[from:from+i], "\n")
		nums = append(nums, fmt.Sprint(line))
		line += strings.Count(sub, "\n")
		from += i + len(sub)
	}
	if strings.Contains(text[from:], sub) {
		nums = append(nums, "…")
	}
	return strings.Join(nums, ", ")
}

// keep saves the content a change is about to replace as a new version.
func (f *fileTools) keep(ctx context.Context, rel string, content []byte, deleted bool, note string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	v, err := f.versions.SaveFileVersion(ctx, f.ws.Dir(), rel, content, deleted, note)
	if err != nil {
		return 0, fmt.Errorf("keeping the previous version of %s failed, so nothing was changed: %w", rel, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return v, nil
}

func (f *fileTools) removeFileTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "remove_file",
		Description: "Remove one file of the workspace (never a directory). Its content is kept as a version first, " +
			"so restore_file can bring it back.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"path": {
					"type": "string",
					"description": "The file to remove, relative to the workspace root.",
					"minLength": 1
				}
			},
			"required": ["path"],
			"additionalProperties": false
		}`),
		Timeout: editTimeout,
		Handler: f.removeFile,
		Paths:   func(a toolkit.Args) []string { return f.cleanPaths(a.String("path")) },
		// The approval is bound to the file as the preview showed it.
		Preview:   f.removePreview,
		FileState: f.pathState,
	}
}

func (f *fileTools) removeFile(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	rel, err := f.ws.Clean(c.Args.String("path"))
	if err != nil {
		return toolkit.Result{}, err
	}
	if err := f.ws.CheckWrite(rel); err != nil {
		return toolkit.Result{}, err
	}
	if rel == "." {
		return toolkit.Result{}, errors.New("the workspace directory itself cannot be removed")
	}
	fi, err := f.ws.lstat(rel)
	if err != nil {
		return toolkit.Result{}, err
	}
	if fi.IsDir() {
		return toolkit.Result{}, &fileError{path: rel, what: "is a directory; remove_file removes files only"}
	}
	data, exists, err := f.ws.readAll(rel, maxEditBytes)
	if err != nil {
		return toolkit.Result{}, err
	}
	if !exists {
		return toolkit.Result{}, &fileError{path: rel, what: "does not exist"}
	}
	v, err := f.keep(ctx, rel, data, false, "remove_file")
	if err != nil {
		return toolkit.Result{}, err
	}
	if err := f.ws.remove(rel); err != nil {
		return toolkit.Result{}, err
	}
	f.log.Debug().Str("tool", "remove_file").Str("path", rel).Msg("removed file")
	return toolkit.Result{Content: fmt.Sprintf("removed %s (%s); its content is kept as version %d — restore_file brings it back\n",
		rel, toolkit.HumanSize(int64(len(data))), v)}, nil
}

func (f *fileTools) restoreFileTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "restore_file",
		Description: "Bring a workspace file back to a kept version (default: the latest one, which undoes the last " +
			"change). The content it replaces is kept as a new version first; restoring a version that records the " +
			"file's absence removes the file. List versions with file_history.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"path": {
					"type": "string",
					"description": "The file to restore, relative to the workspace root.",
					"minLength": 1
				},
				"version": {
					"type": "integer",
					"description": "Version number from file_history (default: the latest version).",
					"minimum": 1
				}
			},
			"required": ["path"],
			"additionalProperties": false
		}`),
		Timeout: editTimeout,
		Handler: f.restoreFile,
		Paths:   func(a toolkit.Args) []string { return f.cleanPaths(a.String("path")) },
		// The approval is bound to the file as the preview showed it.
		Preview:   f.restorePreview,
		FileState: f.restoreState,
	}
}

func (f *fileTools) restoreFile(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	rel, err := f.ws.Clean(c.Args.String("path"))
	if err != nil {
		return toolkit.Result{}, err
	}
	if err := f.ws.CheckWrite(rel); err != nil {
		return toolkit.Result{}, err
	}
	target, _, err := f.restoreTarget(ctx, rel, c.Args)
	if err != nil {
		return toolkit.Result{}, err
	}
	content, _, err := f.versions.FileVersionContent(ctx, f.ws.Dir(), rel, target.Version)
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("reading version %d of %s: %w", target.Version, rel, err)
	}
	current, exists, err := f.ws.readAll(rel, maxEditBytes)
	if err != nil {
		return toolkit.Result{}, err
	}
	desc := fmt.Sprintf("version %d (%s, %s)", target.Version, target.Time.UTC().Format(time.RFC3339), target.Note)
	switch {
	case target.Deleted && !exists:
		return toolkit.Result{Content: fmt.Sprintf("%s does not exist, as in %s; nothing changed\n", rel, desc)}, nil
	case !target.Deleted && exists && bytes.Equal(current, content):
		return toolkit.Result{Content: fmt.Sprintf("%s already matches %s; nothing changed\n", rel, desc)}, nil
	}
	v, err := f.keep(ctx, rel, current, !exists, "restore_file")
	if err != nil {
		return toolkit.Result{}, err
	}
	if target.Deleted {
		err = f.ws.remove(rel)
	} else {
		err = f.ws.writeFile(rel, content)
	}
	if err != nil {
		return toolkit.Result{}, err
	}
	f.log.Debug().Str("tool", "restore_file").Str("path", rel).Int64("version", target.Version).Msg("restored file")
	if target.Deleted {
		return toolkit.Result{Content: fmt.Sprintf("removed %s: %s records that it did not exist; its content is kept as version %d\n", rel, desc, v)}, nil
	}
	return toolkit.Result{Content: fmt.Sprintf("restored %s to %s, %s; the content it replaced is kept as version %d\n",
		rel, desc, toolkit.HumanSize(int64(len(content))), v)}, nil
}

// plural formats a count with its noun: 1 line, 2 lines.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// checkWritable refuses changes inside tooldispatch's default data directory,
// whose store a file edit would corrupt. The check is lexical: it guards
// against mistakes, not against a determined command.
func checkWritable(rel string) error {
	if rel == dataDir || strings.HasPrefix(rel, dataDir+"/") {
		return fmt.Errorf("%s is inside %s, tooldispatch's data directory; the file tools do not change it", rel, dataDir)
	}
	return nil
}
