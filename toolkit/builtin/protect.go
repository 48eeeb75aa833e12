package builtin

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// maxLinkDepth bounds how many symlinks resolving one path follows.
const maxLinkDepth = 40

// OwnMarker is the file by which a directory says it is tooldispatch's
// own as a whole ("tooldispatch cluster certs" writes it beside the
// certificates and keys it makes): no file tool reads, lists or changes
// the directory or anything in it, by any path, wherever it lies.
const OwnMarker = ".tooldispatch-own"

// markerScanDepth is how deep below the workspace's root OpenWorkspace
// looks for marked directories (root/a/b), so that commands, which the
// sandbox keeps from ProtectedPaths, are kept from them too; a marked
// directory deeper, or made later, is refused to the file tools when they
// meet it.
const markerScanDepth = 3

// WorkspaceOption configures OpenWorkspace.
type WorkspaceOption func(*Workspace)

// WithProtected names tooldispatch's own files and directories: the data
// directory, the secret key, the configuration file. No file tool reads,
// lists or changes them or anything below them, by any path: relative,
// absolute, through "..", a symlink or a hard link. They may lie inside or
// outside the workspace and need not exist yet (the data directory and the
// key are often created after the workspace is opened). Empty paths are
// ignored.
func WithProtected(paths ...string) WorkspaceOption {
	return func(w *Workspace) {
		for _, p := range paths {
			if p == "" {
				continue
			}
			abs, err := filepath.Abs(p)
			if err != nil {
				abs = filepath.Clean(p)
			}
			w.protect.add(abs, true)
		}
	}
}

// fileID identifies a file on its device, whatever its names.
type fileID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) (id fileID, nlink uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, 0, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, uint64(st.Nlink), true
}

// protectedSet is the list of tooldispatch's own paths. Safe for
// concurrent use.
type protectedSet struct {
	mu      sync.Mutex
	entries []*protectedEntry // guarded by mu once OpenWorkspace returns; marked directories met are added
}

type protectedEntry struct {
	given   string // absolute, cleaned
	resolve bool   // follow symlinks in given; false for the lexical .tooldispatch
	real    string // given with symlinks resolved, once it exists; guarded by protectedSet.mu
}

func (s *protectedSet) add(abs string, resolve bool) {
	for _, e := range s.entries {
		if e.given == abs {
			return
		}
	}
	s.entries = append(s.entries, &protectedEntry{given: abs, resolve: resolve})
}

// paths returns every name under which a protected path is known: as given
// and, where it differs, with symlinks resolved.
func (s *protectedSet) paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, 2*len(s.entries))
	for _, e := range s.entries {
		out = append(out, e.given)
		if !e.resolve {
			continue
		}
		real := e.real
		if real == "" {
			// Kept only once the path exists, so a symlink created later
			// in its place cannot redirect the protection; until then its
			// existing part is resolved at each check.
			if r, err := filepath.EvalSymlinks(e.given); err == nil {
				e.real, real = r, r
			} else {
				real = resolvePath(e.given, 0)
			}
		}
		if real != e.given {
			out = append(out, real)
		}
	}
	return out
}

// covers reports whether the absolute, resolved path p is a protected path
// or lies below one.
func (s *protectedSet) covers(p string) bool { return coveredBy(s.paths(), p) }

// coveredBy reports whether p is one of own or lies below one.
func coveredBy(own []string, p string) bool {
	for _, q := range own {
		if p == q || strings.HasPrefix(p, q+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// hasID reports whether id is one of the protected files or directories,
// or, when deep, one of the files directly inside a protected directory
// (another name of a file of the data directory is a hard link to it).
func (s *protectedSet) hasID(id fileID, deep bool) bool {
	for _, p := range s.paths() {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if pid, _, ok := idOf(fi); ok && pid == id {
			return true
		}
		if !deep || !fi.IsDir() {
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if info, err := e.Info(); err == nil {
				if cid, _, ok := idOf(info); ok && cid == id {
					return true
				}
			}
		}
	}
	return false
}

// marked reports whether the absolute path p, or a directory above it,
// holds OwnMarker; a marked directory found is added to the protected
// paths, so that other names of its files (hard links) are known.
func (w *Workspace) marked(p string) bool {
	for dir, n := p, 0; n <= maxLinkDepth*4; n++ {
		if fi, err := os.Lstat(filepath.Join(dir, OwnMarker)); err == nil && fi.Mode().IsRegular() {
			w.protect.mu.Lock()
			w.protect.add(dir, true)
			w.protect.mu.Unlock()
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
	return false
}

// scanMarked adds the marked directories down to markerScanDepth below
// the workspace's root to the protected paths.
func (w *Workspace) scanMarked() {
	var scan func(dir string, depth int)
	scan = func(dir string, depth int) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Name() == OwnMarker && e.Type().IsRegular() {
				w.protect.add(dir, true)
				w.markedDirs = append(w.markedDirs, dir)
				return
			}
		}
		if depth >= markerScanDepth {
			return
		}
		for _, e := range entries {
			if e.IsDir() && e.Name() != ".git" && e.Name() != "node_modules" {
				scan(filepath.Join(dir, e.Name()), depth+1)
			}
		}
	}
	scan(w.dir, 0)
}

// MarkedDirs returns the directories marked as tooldispatch's own
// (OwnMarker) that OpenWorkspace found in the workspace.
func (w *Workspace) MarkedDirs() []string { return slices.Clone(w.markedDirs) }

// ProtectedPaths returns tooldispatch's own paths the workspace keeps its
// tools away from (see WithProtected), as given and with symlinks resolved,
// for a sandbox that must keep commands from them too. Some may not exist
// yet; some may lie inside the workspace (an old data directory in
// .tooldispatch is always among them).
func (w *Workspace) ProtectedPaths() []string { return w.protect.paths() }

// realPath returns the absolute path the workspace-relative rel stands
// for, symlinks resolved as far as the path exists, and a dangling
// symlink's target followed.
func (w *Workspace) realPath(rel string) string {
	return resolvePath(filepath.Join(w.dir, filepath.FromSlash(rel)), 0)
}

func resolvePath(p string, depth int) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	parent, base := filepath.Dir(p), filepath.Base(p)
	if parent == p || depth > maxLinkDepth {
		return p
	}
	full := filepath.Join(resolvePath(parent, depth+1), base)
	if target, err := os.Readlink(full); err == nil {
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(full), target)
		}
		return resolvePath(target, depth+1)
	}
	return full
}

// ownPath reports whether the walk entry d, at rel below the directory
// whose real path is realBase, is one of tooldispatch's own files or
// directories (own is ProtectedPaths, taken once per walk): by where it
// is, where a symlink points, or (for a file with other names) its device
// and inode.
func (w *Workspace) ownPath(own []string, realBase, rel string, d fs.DirEntry) bool {
	p := filepath.Join(realBase, filepath.FromSlash(rel))
	if d.Type()&fs.ModeSymlink != 0 {
		p = resolvePath(p, 0)
	}
	if coveredBy(own, p) {
		return true
	}
	if d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
		// Files of a walked directory were checked with it; a directory
		// or a link may lead into a marked one.
		if w.marked(p) {
			return true
		}
	}
	if !d.Type().IsRegular() {
		return false
	}
	info, err := d.Info()
	if err != nil {
		return false
	}
	id, nlink, ok := idOf(info)
	return ok && nlink > 1 && w.protect.hasID(id, true)
}

// guard refuses rel when it names one of tooldispatch's own files or
// directories, or something below one: lexically (the old data directory
// .tooldispatch) or once symlinks are resolved. It is the check before use;
// guardOpened repeats it on what was opened.
func (w *Workspace) guard(rel string) error {
	if rel == dataDir || strings.HasPrefix(rel, dataDir+"/") {
		return &protectedError{path: rel}
	}
	if p := w.realPath(rel); w.protect.covers(p) || w.marked(p) {
		return &protectedError{path: rel}
	}
	return nil
}

// CheckWrite reports whether a file tool may change the cleaned
// workspace-relative path rel: not one of tooldispatch's own files (by any
// path), not in the old data directory .tooldispatch, not a regular file
// with more than one hard link. Writers call it before they keep a version
// or fetch anything; the workspace's own writes check again on what they
// open.
func (w *Workspace) CheckWrite(rel string) error {
	if err := checkWritable(rel); err != nil {
		return err
	}
	if err := w.guard(rel); err != nil {
		return err
	}
	fi, err := w.root.Stat(rel)
	if err != nil {
		return nil // a missing file may be created; other errors show on use
	}
	if _, nlink, ok := idOf(fi); ok && fi.Mode().IsRegular() && nlink > 1 {
		return hardLinkError(rel, nlink)
	}
	return nil
}

// CheckOpened checks a file f just opened for writing at the cleaned
// workspace-relative path rel by a writer that opens files itself (a
// download's temporary file): it must not be, or lie in, one of
// tooldispatch's own files or directories, nor have other names.
func (w *Workspace) CheckOpened(rel string, f *os.File) error {
	return w.guardOpened(rel, f, true)
}

// guardOpened checks a file just opened for rel: it must not be one of
// tooldispatch's own files under another name (a hard link, or a symlink
// swapped in after guard), and a file opened for writing must have no
// other name, since a write would change it there too.
func (w *Workspace) guardOpened(rel string, f *os.File, write bool) error {
	fi, err := f.Stat()
	if err != nil {
		return w.fileErr(rel, err)
	}
	if id, nlink, ok := idOf(fi); ok {
		linked := fi.Mode().IsRegular() && nlink > 1
		if w.protect.hasID(id, linked) {
			return &protectedError{path: rel}
		}
		if write && linked {
			return hardLinkError(rel, nlink)
		}
	}
	if p, ok := fdPath(f); ok && w.protect.covers(p) {
		return &protectedError{path: rel}
	}
	return nil
}

// fdPath returns where the open file f really is, from /proc. ok is false
// where /proc does not say (not Linux, not mounted, or the file was
// removed).
func fdPath(f *os.File) (string, bool) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(f.Fd()), 10))
	if err != nil || !filepath.IsAbs(p) || strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	return p, true
}

func hardLinkError(rel string, nlink uint64) error {
	return &fileError{path: rel, what: fmt.Sprintf("has %d hard links (other names, perhaps outside the workspace); "+
		"changing it would change them too, so the file tools leave it alone", nlink)}
}

// protectedError is the error for a path that leads to one of
// tooldispatch's own files.
type protectedError struct{ path string }

func (e *protectedError) Error() string {
	return fmt.Sprintf("%s is one of tooldispatch's own files (its data directory, secret key, configuration or certificates); "+
		"no tool reads, lists or changes them", e.path)
}

func (e *protectedError) Is(target error) bool { return target == ErrProtected }
