package builtin

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// VersionStore keeps earlier versions of workspace files, so that
// edit_file, remove_file and restore_file can be undone: the three methods
// of the embedding program's store that file versions need (cachestore's
// Badger, Memory and PostgreSQL stores satisfy it; MemoryVersions keeps
// them in memory). workspace is the workspace's directory (Workspace.Dir)
// and path the cleaned workspace-relative path. Implementations are safe
// for concurrent use.
type VersionStore interface {
	// SaveFileVersion keeps content as the next version of the file at path
	// in workspace and returns its number: 1 for the first, one more than
	// the last otherwise. deleted marks a version that records a removal
	// (the file did not exist before the change). The version is durable
	// when it returns.
	SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error)
	// FileVersions lists the file's versions, oldest first; none (and no
	// error) for a file without versions.
	FileVersions(ctx context.Context, workspace, path string) ([]VersionInfo, error)
	// FileVersionContent returns one version's bytes and description, or an
	// error matching fs.ErrNotExist when the file has no such version.
	FileVersionContent(ctx context.Context, workspace, path string, version int64) ([]byte, VersionInfo, error)
}

// VersionInfo describes one kept version of a file: Deleted records that
// the file did not exist, Note names the tool that kept it ("edit_file").
// It is an alias of an unnamed struct type, so a store declaring the same
// struct (cachestore.FileVersion) satisfies VersionStore without builtin
// importing it.
type VersionInfo = struct {
	Version int64
	Time    time.Time
	Size    int64
	Deleted bool
	Note    string
}

// MemoryVersions is a VersionStore kept in memory, for tests and for programs
// without a store. Safe for concurrent use.
type MemoryVersions struct {
	mu    sync.Mutex
	files map[string][]memVersion // guarded by mu; by workspace and path
}

type memVersion struct {
	info    VersionInfo
	content []byte
}

// NewMemoryVersions returns an empty in-memory version store.
func NewMemoryVersions() *MemoryVersions {
	return &MemoryVersions{files: map[string][]memVersion{}}
}

func versionKey(workspace, path string) string { return workspace + "\x00" + path }

// SaveFileVersion implements VersionStore.
func (m *MemoryVersions) SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := versionKey(workspace, path)
	vs := m.files[k]
	v := memVersion{
		info: VersionInfo{
			Version: int64(len(vs)) + 1,
			Time:    time.Now(),
			Size:    int64(len(content)),
			Deleted: deleted,
			Note:    note,
		},
		content: slices.Clone(content),
	}
	m.files[k] = append(vs, v)
	return v.info.Version, nil
}

// FileVersions implements VersionStore.
func (m *MemoryVersions) FileVersions(ctx context.Context, workspace, path string) ([]VersionInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.files[versionKey(workspace, path)]
	out := make([]VersionInfo, len(vs))
	for i, v := range vs {
		out[i] = v.info
	}
	return out, nil
}

// FileVersionContent implements VersionStore.
func (m *MemoryVersions) FileVersionContent(ctx context.Context, workspace, path string, version int64) ([]byte, VersionInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, VersionInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.files[versionKey(workspace, path)]
	if version < 1 || version > int64(len(vs)) {
		return nil, VersionInfo{}, fmt.Errorf("%s version %d: %w", path, version, ErrVersionNotFound)
	}
	return slices.Clone(vs[version-1].content), vs[version-1].info, nil
}
