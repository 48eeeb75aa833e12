package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// SaveFileVersion keeps a version of a workspace file and returns its
// number: 1 for the file's first version, then 2, 3… The workspace is an
// absolute directory (a relative one is made absolute against the current
// directory); path is kept as given, so callers pass it cleaned and
// workspace-relative.
func (b *Store) SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error) {
	if err := b.enter(); err != nil {
		return 0, fmt.Errorf("saving a version of %q: %w", path, err)
	}
	defer b.leave()
	prefix := fileVersionPrefix(workspace, path)
	mu := &b.fileLocks[stripe(prefix)]
	mu.Lock()
	defer mu.Unlock()
	var last int64
	err := b.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix, Reverse: true})
		defer it.Close()
		it.Seek(append(bytes.Clone(prefix), 0xff))
		if !it.Valid() {
			return nil
		}
		var err error
		last, err = parseNum(it.Item().Key()[len(prefix):])
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("saving a version of %q: %w", path, err)
	}
	v := cachestore.FileVersion{
		Version: last + 1,
		Time:    time.Unix(0, b.now().UnixNano()),
		Size:    int64(len(content)),
		Deleted: deleted,
		Note:    note,
	}
	if content == nil {
		content = []byte{}
	}
	op := &writeOp{main: []kv{
		{key: fileContentKey(workspace, path, v.Version), value: content},
		{key: fileVersionKey(workspace, path, v.Version), value: encodeFileVersion(v)},
	}}
	if err := b.submit(ctx, op); err != nil {
		return 0, fmt.Errorf("saving version %d of %q: %w", v.Version, path, err)
	}
	return v.Version, nil
}

// fileLockStripes is the number of locks SaveFileVersion spreads files over.
const fileLockStripes = 64

func stripe(key []byte) int {
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % fileLockStripes)
}

// FileVersions lists a file's versions, oldest first (empty when it has
// none).
func (b *Store) FileVersions(ctx context.Context, workspace, path string) ([]cachestore.FileVersion, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("listing versions of %q: %w", path, err)
	}
	defer b.leave()
	out := []cachestore.FileVersion{}
	err := b.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: fileVersionPrefix(workspace, path), PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := readFileVersion(it.Item())
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing versions of %q: %w", path, err)
	}
	return out, nil
}

func readFileVersion(item *badgerdb.Item) (cachestore.FileVersion, error) {
	var v cachestore.FileVersion
	err := item.Value(func(raw []byte) error {
		var err error
		v, err = decodeFileVersion(raw)
		return err
	})
	if err != nil {
		return cachestore.FileVersion{}, fmt.Errorf("key %q: %w", item.Key(), err)
	}
	return v, nil
}

// FileVersionContent returns one version's bytes and description, or
// ErrNotFound.
func (b *Store) FileVersionContent(ctx context.Context, workspace, path string, version int64) ([]byte, cachestore.FileVersion, error) {
	if err := b.enter(); err != nil {
		return nil, cachestore.FileVersion{}, fmt.Errorf("reading version %d of %q: %w", version, path, err)
	}
	defer b.leave()
	if err := ctx.Err(); err != nil {
		return nil, cachestore.FileVersion{}, fmt.Errorf("reading version %d of %q: %w", version, path, err)
	}
	var (
		content []byte
		v       cachestore.FileVersion
	)
	err := b.db.View(func(txn *badgerdb.Txn) error {
		item, err := txn.Get(fileVersionKey(workspace, path, version))
		if err != nil {
			return err
		}
		if v, err = readFileVersion(item); err != nil {
			return err
		}
		if item, err = txn.Get(fileContentKey(workspace, path, version)); err != nil {
			return err
		}
		content, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		err = cachestore.ErrNotFound
	}
	if err != nil {
		return nil, cachestore.FileVersion{}, fmt.Errorf("reading version %d of %q: %w", version, path, err)
	}
	if content == nil {
		content = []byte{}
	}
	return content, v, nil
}
