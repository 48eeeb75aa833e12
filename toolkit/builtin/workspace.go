package builtin

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

const (
	newFileMode fs.FileMode = 0o644
	newDirMode  fs.FileMode = 0o755
)

// Workspace is the directory every file tool and run_command works in. All
// file access goes through an os.Root, so a path cannot lead out of it: ".."
// escapes, absolute paths elsewhere and symlinks that point outside are
// refused when the file is opened, which also defeats a symlink swapped in
// between a check and the use.
//
// tooldispatch's own files (WithProtected, and an old data directory in
// .tooldispatch) are refused by any path: every path is resolved and
// checked before use, and what was opened is checked again (device and
// inode, and where /proc says it is). A file with more than one hard link
// is never written, since the write would change it under its other names.
//
// A Workspace is safe for concurrent use.
type Workspace struct {
	// immutable after OpenWorkspace
	dir   string   // absolute, symlinks resolved
	given string   // absolute as given; may reach dir through symlinks
	root  *os.Root // every file operation goes through it

	protect    protectedSet // tooldispatch's own paths; grows only by marked directories met (OwnMarker)
	markedDirs []string     // the marked directories OpenWorkspace found
}

// OpenWorkspace opens the directory dir as a workspace. Close it when done.
func OpenWorkspace(dir string, opts ...WorkspaceOption) (*Workspace, error) {
	given, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("builtin: workspace %s: %w", dir, err)
	}
	resolved, err := filepath.EvalSymlinks(given)
	if err != nil {
		return nil, fmt.Errorf("builtin: workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("builtin: workspace %s: %w", dir, err)
	}
	w := &Workspace{dir: resolved, given: given, root: root}
	w.protect.add(filepath.Join(resolved, dataDir), false)
	for _, o := range opts {
		o(w)
	}
	w.scanMarked()
	return w, nil
}

// Close releases the workspace's directory handle.
func (w *Workspace) Close() error { return w.root.Close() }

// Dir returns the workspace's absolute directory, symlinks resolved.
func (w *Workspace) Dir() string { return w.dir }

// Clean turns p into a cleaned, slash-separated path relative to the
// workspace ("." for the workspace itself). Absolute paths inside the
// workspace are accepted and made relative; a path that leads outside gives
// an error matching ErrOutsideWorkspace. Clean is lexical: symlinks are
// checked when the path is used.
func (w *Workspace) Clean(p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	if filepath.IsAbs(p) {
		abs := filepath.Clean(p)
		for _, base := range []string{w.dir, w.given} {
			if rel, ok := within(base, abs); ok {
				return rel, nil
			}
		}
		return "", &outsideError{path: p}
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", &outsideError{path: p}
	}
	return c, nil
}

// within returns abs relative to base when abs is base or below it.
func within(base, abs string) (string, bool) {
	if abs == base {
		return ".", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if rest, ok := strings.CutPrefix(abs, prefix); ok {
		return filepath.ToSlash(rest), true
	}
	return "", false
}

// abs returns the absolute form of a cleaned relative path, for processes
// that need a directory name (run_command's working directory).
func (w *Workspace) abs(rel string) string {
	return filepath.Join(w.dir, filepath.FromSlash(rel))
}

// stat follows symlinks (inside the workspace only). tooldispatch's own
// files are refused.
func (w *Workspace) stat(rel string) (fs.FileInfo, error) {
	if err := w.guard(rel); err != nil {
		return nil, err
	}
	fi, err := w.root.Stat(rel)
	return fi, w.fileErr(rel, err)
}

func (w *Workspace) lstat(rel string) (fs.FileInfo, error) {
	fi, err := w.root.Lstat(rel)
	return fi, w.fileErr(rel, err)
}

// open opens rel for reading; tooldispatch's own files are refused, before
// and after opening. It never waits for a writer: a FIFO opens at once
// (O_NONBLOCK, which changes nothing for a regular file), and the callers
// refuse it as not a regular file.
func (w *Workspace) open(rel string) (*os.File, error) {
	if err := w.guard(rel); err != nil {
		return nil, err
	}
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, w.fileErr(rel, err)
	}
	if err := w.guardOpened(rel, f, false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// fsys is the workspace as an fs.FS, for walking.
func (w *Workspace) fsys() fs.FS { return w.root.FS() }

// readAll reads a whole regular file of at most limit bytes. exists is false
// (and err nil) when the file does not exist.
func (w *Workspace) readAll(rel string, limit int64) (data []byte, exists bool, err error) {
	f, err := w.open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, true, w.fileErr(rel, err)
	}
	if fi.IsDir() {
		return nil, true, &fileError{path: rel, what: "is a directory", err: syscall.EISDIR}
	}
	if !fi.Mode().IsRegular() {
		return nil, true, &fileError{path: rel, what: "is not a regular file"}
	}
	if fi.Size() > limit {
		return nil, true, &fileError{path: rel, what: fmt.Sprintf("is %s, more than the %s this tool handles", toolkit.HumanSize(fi.Size()), toolkit.HumanSize(limit))}
	}
	data, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, true, w.fileErr(rel, err)
	}
	if int64(len(data)) > limit {
		return nil, true, &fileError{path: rel, what: fmt.Sprintf("grew beyond %s while being read", toolkit.HumanSize(limit))}
	}
	return data, true, nil
}

// writeFile replaces the content of rel, creating it and its parent
// directories when needed. An existing file keeps its mode; a symlink inside
// the workspace is written through. tooldispatch's own files and files with
// more than one hard link are refused; the file is truncated only after
// the opened file passed those checks.
func (w *Workspace) writeFile(rel string, data []byte) error {
	if rel == "." {
		return &fileError{path: rel, what: "is the workspace directory", err: syscall.EISDIR}
	}
	if err := w.guard(rel); err != nil {
		return err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, newDirMode); err != nil {
			return w.fileErr(dir, err)
		}
	}
	// O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of
	// waiting for one; with a reader it opens, and is refused below.
	f, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, newFileMode)
	if errors.Is(err, syscall.ENXIO) {
		return &fileError{path: rel, what: "is not a regular file"}
	}
	if err != nil {
		return w.fileErr(rel, err)
	}
	if err := w.guardOpened(rel, f, true); err != nil {
		f.Close()
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return w.fileErr(rel, err)
		}
		return &fileError{path: rel, what: "is not a regular file"}
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return w.fileErr(rel, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return w.fileErr(rel, err)
	}
	return w.fileErr(rel, f.Close())
}

// remove deletes a file (never a directory). tooldispatch's own files and
// files with more than one hard link are refused. The name is removed
// from its directory as opened and checked, so a symlink swapped in for a
// parent directory after the checks cannot redirect it.
func (w *Workspace) remove(rel string) error {
	if err := w.guard(rel); err != nil {
		return err
	}
	if rel == "." {
		return &fileError{path: rel, what: "is the workspace directory", err: syscall.EISDIR}
	}
	dir, base := path.Split(rel)
	if dir == "" {
		dir = "."
	}
	d, err := w.root.Open(dir)
	if err != nil {
		return w.fileErr(rel, err)
	}
	defer d.Close()
	if p, ok := fdPath(d); ok && w.protect.covers(p) {
		return &protectedError{path: rel}
	}
	fd := int(d.Fd())
	var st unix.Stat_t
	if err := unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return w.fileErr(rel, &fs.PathError{Op: "remove", Path: rel, Err: err})
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return &fileError{path: rel, what: "is a directory; remove_file removes files only", err: syscall.EISDIR}
	case unix.S_IFREG:
		id := fileID{dev: uint64(st.Dev), ino: st.Ino}
		if w.protect.hasID(id, st.Nlink > 1) {
			return &protectedError{path: rel}
		}
		if st.Nlink > 1 {
			return hardLinkError(rel, uint64(st.Nlink))
		}
	}
	if err := unix.Unlinkat(fd, base, 0); err != nil {
		return w.fileErr(rel, &fs.PathError{Op: "remove", Path: rel, Err: err})
	}
	return nil
}

// fileErr turns an error of an os.Root operation into one that names the
// workspace path and says what went wrong in plain words.
func (w *Workspace) fileErr(rel string, err error) error {
	if err == nil {
		return nil
	}
	var oe *outsideError
	if errors.As(err, &oe) {
		return err
	}
	var pre *protectedError
	if errors.As(err, &pre) {
		return err
	}
	if escapes(err) {
		return &outsideError{path: rel}
	}
	var fe *fileError
	if errors.As(err, &fe) {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &fileError{path: rel, what: "does not exist", err: err}
	case errors.Is(err, fs.ErrPermission):
		return &fileError{path: rel, what: "permission denied", err: err}
	case errors.Is(err, syscall.EISDIR):
		return &fileError{path: rel, what: "is a directory", err: err}
	case errors.Is(err, syscall.ENOTDIR):
		return &fileError{path: rel, what: "has a parent that is not a directory", err: err}
	case errors.Is(err, syscall.ELOOP):
		return &fileError{path: rel, what: "has too many levels of symbolic links", err: err}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fileError{path: rel, what: pe.Err.Error(), err: err}
	}
	return &fileError{path: rel, what: err.Error(), err: err}
}

// escapes reports whether err is os.Root's refusal of a path that leaves the
// root. The os package does not export that error, only its text.
func escapes(err error) bool {
	return strings.Contains(err.Error(), "path escapes from parent")
}

// outsideError is the error for a path that leads out of the workspace.
type outsideError struct{ path string }

func (e *outsideError) Error() string {
	return fmt.Sprintf("path %q is outside the workspace", e.path)
}

func (e *outsideError) Is(target error) bool { return target == ErrOutsideWorkspace }

// fileError names a workspace path and what is wrong with it.
type fileError struct {
	path string
	what string
	err  error
}

func (e *fileError) Error() string { return e.path + " " + e.what }

func (e *fileError) Unwrap() error { return e.err }

// ReadFile reads the regular file at the cleaned workspace-relative path rel
// (see Clean), of at most limit bytes, through the workspace's os.Root.
// exists is false (and err nil) when there is no such file. Errors name the
// path and say what went wrong; a path leading out matches
// ErrOutsideWorkspace.
func (w *Workspace) ReadFile(rel string, limit int64) (data []byte, exists bool, err error) {
	return w.readAll(rel, limit)
}

// WriteFile replaces the content of the cleaned workspace-relative path
// rel, creating it and its parent directories, through the workspace's
// os.Root. An existing file keeps its mode.
func (w *Workspace) WriteFile(rel string, data []byte) error {
	return w.writeFile(rel, data)
}
