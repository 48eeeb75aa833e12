package interact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

const (
	newFileMode fs.FileMode = 0o644
	newDirMode  fs.FileMode = 0o755
	// dataDir is tooldispatch's default data directory inside the
	// workspace; tools do not write into it.
	dataDir = ".tooldispatch"
	// maxKeptBytes is the largest previous content kept as a version; a
	// bigger file is refused rather than overwritten without a way back.
	maxKeptBytes = 16 << 20
)

// errNoWorkspace: a tool was asked to touch a file but the host gave it no
// workspace.
var errNoWorkspace = errors.New("this host has no workspace, so no file can be read or written")

// wsFiles reads and writes workspace files. Every access goes through an
// os.Root opened on the workspace directory, so ".." escapes, absolute paths
// elsewhere and symlinks that point outside are refused when the file is
// opened. Safe for concurrent use.
type wsFiles struct {
	// immutable after Tools
	ws       *builtin.Workspace // nil: no workspace
	versions builtin.Versions   // nil: no versions kept
}

// clean checks a path a call will write: inside the workspace, not the
// workspace itself, not in the data directory. It returns the cleaned,
// workspace-relative path.
func (f *wsFiles) clean(p string) (string, error) {
	if f.ws == nil {
		return "", errNoWorkspace
	}
	rel, err := f.ws.Clean(p)
	if err != nil {
		return "", err
	}
	switch {
	case rel == ".":
		return "", fmt.Errorf("%q is the workspace directory, not a file", p)
	case rel == dataDir || strings.HasPrefix(rel, dataDir+"/"):
		return "", fmt.Errorf("%s is inside %s, tooldispatch's data directory; tools do not write there", rel, dataDir)
	}
	return rel, nil
}

// paths is a Tool.Paths helper: the cleaned form of the path argument, or
// none when it is absent or invalid.
func (f *wsFiles) paths(p string) []string {
	if p == "" || f.ws == nil {
		return nil
	}
	rel, err := f.ws.Clean(p)
	if err != nil {
		return nil
	}
	return []string{rel}
}

func (f *wsFiles) root() (*os.Root, error) {
	r, err := os.OpenRoot(f.ws.Dir())
	if err != nil {
		return nil, fmt.Errorf("opening the workspace: %w", err)
	}
	return r, nil
}

// read returns the content of a regular workspace file of at most limit
// bytes.
func (f *wsFiles) read(p string, limit int64) ([]byte, string, error) {
	if f.ws == nil {
		return nil, "", errNoWorkspace
	}
	rel, err := f.ws.Clean(p)
	if err != nil {
		return nil, "", err
	}
	root, err := f.root()
	if err != nil {
		return nil, rel, err
	}
	defer root.Close()
	data, exists, err := readLimited(root, rel, limit)
	if err == nil && !exists {
		err = &fileError{path: rel, what: "does not exist", err: fs.ErrNotExist}
	}
	return data, rel, err
}

// write replaces the content of rel (cleaned by clean), creating it and its
// parent directories when needed. The content it replaces (or its absence)
// is first kept as a version, noted with the tool's name; it returns that
// version's number, 0 when no Versions are set.
func (f *wsFiles) write(ctx context.Context, rel string, data []byte, note string) (int64, error) {
	root, err := f.root()
	if err != nil {
		return 0, err
	}
	defer root.Close()
	var version int64
	if f.versions != nil {
		prev, exists, err := readLimited(root, rel, maxKeptBytes)
		if err != nil {
			return 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		version, err = f.versions.SaveFileVersion(ctx, f.ws.Dir(), rel, prev, !exists, note)
		if err != nil {
			return 0, fmt.Errorf("keeping the previous version of %s failed, so nothing was written: %w", rel, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, newDirMode); err != nil {
			return 0, fileErr(dir, err)
		}
	}
	file, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, newFileMode)
	if err != nil {
		return 0, fileErr(rel, err)
	}
	if _, err := file.Write(data); err != nil {
		file.Close()
		return 0, fileErr(rel, err)
	}
	return version, fileErr(rel, file.Close())
}

// readLimited reads a whole regular file of at most limit bytes; exists is
// false (and err nil) when there is no such file.
func readLimited(root *os.Root, rel string, limit int64) (data []byte, exists bool, err error) {
	file, err := root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fileErr(rel, err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, true, fileErr(rel, err)
	}
	if fi.IsDir() {
		return nil, true, &fileError{path: rel, what: "is a directory", err: syscall.EISDIR}
	}
	if !fi.Mode().IsRegular() {
		return nil, true, &fileError{path: rel, what: "is not a regular file"}
	}
	if fi.Size() > limit {
		return nil, true, &fileError{path: rel, what: fmt.Sprintf("is %d bytes, more than the %d this tool handles", fi.Size(), limit)}
	}
	data, err = io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, true, fileErr(rel, err)
	}
	if int64(len(data)) > limit {
		return nil, true, &fileError{path: rel, what: fmt.Sprintf("grew beyond %d bytes while being read", limit)}
	}
	return data, true, nil
}

// fileErr turns an os.Root error into one that names the workspace path
// and says what went wrong in plain words.
func fileErr(rel string, err error) error {
	if err == nil {
		return nil
	}
	var fe *fileError
	if errors.As(err, &fe) {
		return err
	}
	// os.Root does not export its refusal of a path that leaves the root,
	// only its text.
	if strings.Contains(err.Error(), "path escapes from parent") {
		return &outsideError{path: rel}
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
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fileError{path: rel, what: pe.Err.Error(), err: err}
	}
	return &fileError{path: rel, what: err.Error(), err: err}
}

// outsideError is a path that a symlink leads out of the workspace; it
// matches builtin.ErrOutsideWorkspace.
type outsideError struct{ path string }

func (e *outsideError) Error() string {
	return fmt.Sprintf("path %q leads outside the workspace", e.path)
}

func (e *outsideError) Is(target error) bool { return target == builtin.ErrOutsideWorkspace }

// fileError names a workspace path and what is wrong with it.
type fileError struct {
	path string
	what string
	err  error
}

func (e *fileError) Error() string { return e.path + " " + e.what }

func (e *fileError) Unwrap() error { return e.err }

// humanSize formats a byte count for people: 512 B, 3.4 KiB, 2.0 MiB.
func humanSize(n int) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := unit, 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGT"[exp])
}
