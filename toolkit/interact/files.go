package interact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

const (
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
	ws       *builtin.Workspace   // nil: no workspace
	versions builtin.VersionStore // nil: no versions kept
}

// clean checks a path a call will write: inside the workspace, not the
// workspace itself, not one of tooldispatch's own files, not a file with
// more than one hard link. It returns the cleaned,
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
	// tooldispatch's own files by any path, and files with other names
	// (hard links), are refused before a version is kept.
	if err := f.ws.CheckWrite(rel); err != nil {
		return "", err
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
	data, exists, err := f.ws.ReadFile(rel, limit)
	if err == nil && !exists {
		err = fmt.Errorf("%s does not exist: %w", rel, fs.ErrNotExist)
	}
	return data, rel, err
}

// write replaces the content of rel (cleaned by clean), creating it and its
// parent directories when needed. The content it replaces (or its absence)
// is first kept as a version, noted with the tool's name; it returns that
// version's number, 0 when no Versions are set.
func (f *wsFiles) write(ctx context.Context, rel string, data []byte, note string) (int64, error) {
	var version int64
	if f.versions != nil {
		prev, exists, err := f.ws.ReadFile(rel, maxKeptBytes)
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
	return version, f.ws.WriteFile(rel, data)
}
