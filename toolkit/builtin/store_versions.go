package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// VersionStore is the durable file-version store behind StoreVersions: the
// three methods of the embedding program's store that file versions need
// (cachestore's Badger, Memory and PostgreSQL stores satisfy it).
// Implementations are safe for concurrent use.
type VersionStore interface {
	// SaveFileVersion keeps content as the next version of the file at path
	// in workspace and returns its number: 1 for the first, one more than
	// the last otherwise. deleted marks a version that records a removal.
	// The version is durable when it returns.
	SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error)
	// FileVersions lists the file's versions, oldest first; none (and no
	// error) for a file without versions.
	FileVersions(ctx context.Context, workspace, path string) ([]VersionInfo, error)
	// FileVersionContent returns one version's bytes and description, or an
	// error matching fs.ErrNotExist when the file has no such version.
	FileVersionContent(ctx context.Context, workspace, path string, version int64) ([]byte, VersionInfo, error)
}

// StoreVersions keeps file versions in a VersionStore (Badger by default),
// so they survive restarts.
func StoreVersions(s VersionStore) Versions { return storeVersions{s} }

type storeVersions struct{ s VersionStore }

func (v storeVersions) SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error) {
	return v.s.SaveFileVersion(ctx, workspace, path, content, deleted, note)
}

func (v storeVersions) ListFileVersions(ctx context.Context, workspace, path string) ([]VersionInfo, error) {
	return v.s.FileVersions(ctx, workspace, path)
}

func (v storeVersions) FileVersionBytes(ctx context.Context, workspace, path string, version int64) ([]byte, error) {
	b, _, err := v.s.FileVersionContent(ctx, workspace, path, version)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s version %d", ErrVersionNotFound, path, version)
	}
	return b, err
}
