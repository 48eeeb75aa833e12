package builtin

import (
	"context"
	"errors"
	"fmt"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// StoreVersions keeps file versions in a cachestore.Store (Badger by
// default), so they survive restarts.
func StoreVersions(s cachestore.Store) Versions { return storeVersions{s} }

type storeVersions struct{ s cachestore.Store }

func (v storeVersions) SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error) {
	return v.s.SaveFileVersion(ctx, workspace, path, content, deleted, note)
}

func (v storeVersions) ListFileVersions(ctx context.Context, workspace, path string) ([]VersionInfo, error) {
	vs, err := v.s.FileVersions(ctx, workspace, path)
	if err != nil {
		return nil, err
	}
	out := make([]VersionInfo, len(vs))
	for i, x := range vs {
		out[i] = VersionInfo{Version: x.Version, Time: x.Time, Size: x.Size, Deleted: x.Deleted, Note: x.Note}
	}
	return out, nil
}

func (v storeVersions) FileVersionBytes(ctx context.Context, workspace, path string, version int64) ([]byte, error) {
	b, _, err := v.s.FileVersionContent(ctx, workspace, path, version)
	if errors.Is(err, cachestore.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s version %d", ErrVersionNotFound, path, version)
	}
	return b, err
}
