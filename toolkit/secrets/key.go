package secrets

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
)

// EnvKey is the environment variable that holds the encryption key: the
// base64 (standard or URL alphabet, padded or not) of 32 random bytes, e.g.
// from `openssl rand -base64 32`. When set, the key file is not used.
const EnvKey = "TOOLDISPATCH_SECRET_KEY"

// KeySize is the size of the AES-256 key in bytes.
const KeySize = 32

// maxKeyFile is the most of a key file read: a key is 44 bytes of base64.
const maxKeyFile = 4 << 10

// File modes of the key file and of the directory created for it.
const (
	keyFileMode fs.FileMode = 0o600
	keyDirMode  fs.FileMode = 0o700
)

// loadKey returns the key from EnvKey, else from keyFile (created when
// missing).
func loadKey(keyFile string, log zerolog.Logger) ([]byte, error) {
	if env := strings.TrimSpace(os.Getenv(EnvKey)); env != "" {
		key, err := decodeKey(env)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadKey, EnvKey, err)
		}
		return key, nil
	}
	if keyFile == "" {
		return nil, fmt.Errorf("%w: set %s or give a key file", ErrNoKey, EnvKey)
	}
	key, err := readKeyFile(keyFile, log)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKeyFile(keyFile, log)
		if errors.Is(err, fs.ErrExist) {
			// Another process created it first.
			key, err = readKeyFile(keyFile, log)
		}
	}
	return key, err
}

// decodeKey decodes a base64 key in any of the usual alphabets.
func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(s); err == nil {
			if len(key) != KeySize {
				return nil, fmt.Errorf("decodes to %d bytes, want %d", len(key), KeySize)
			}
			return key, nil
		}
	}
	return nil, errors.New("is not base64")
}

// readKeyFile reads the key from path. A key file with more than one link
// is refused: its other name may lie where tools or commands can read it
// (made by an earlier command, before the sandbox, or by anyone), and the
// sandbox cannot deny a path inside the trees it allows.
func readKeyFile(path string, log zerolog.Logger) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: reading key file %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secrets: reading key file %s: %w", path, err)
	}
	if n := linkCount(fi); n > 1 {
		return nil, fmt.Errorf("%w: key file %s has %d links: another name of it may lie where tools or commands can read it; "+
			"find it (find / -xdev -samefile %s), remove it, and start again", ErrKeyFileLinks, path, n, path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn().Str("file", path).Str("mode", fi.Mode().Perm().String()).
			Msg("the secrets key file is readable by others; chmod 600 it")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("secrets: reading key file %s: %w", path, err)
	}
	key, err := decodeKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: key file %s: %v", ErrBadKey, path, err)
	}
	return key, nil
}

// createKeyFile writes a fresh random key to path with mode 0600; it fails
// with an error matching fs.ErrExist when the file appeared meanwhile. The
// key is written to a temporary file first and moved into place without
// replacing anything (placeKeyFile), so no reader ever sees a half-written
// key file, nor one with two links.
func createKeyFile(path string, log zerolog.Logger) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, keyDirMode); err != nil {
		return nil, fmt.Errorf("secrets: creating the key file's directory: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("secrets: drawing a key: %w", err)
	}
	f, err := os.CreateTemp(dir, ".secret-key-*")
	if err != nil {
		return nil, fmt.Errorf("secrets: creating key file %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	// CreateTemp already uses 0600; make the mode exact whatever the umask.
	err = f.Chmod(keyFileMode)
	if err == nil {
		_, err = f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: writing key file %s: %w", path, err)
	}
	if err := placeKeyFile(tmp, path); err != nil {
		return nil, fmt.Errorf("secrets: creating key file %s: %w", path, err)
	}
	log.Info().Str("file", path).Msg("created a new secrets key file")
	return key, nil
}

// Where SharedKey keeps the key: a namespace of its own, apart from the
// sealed records (Namespace).
const (
	KeyNamespace = "secrets-key"
	keyRecord    = "aes-256"
)

// KeyKV is where SharedKey keeps the key: a store shared by several
// processes that can write a record only into a free key (cachestore's
// KVCreator).
type KeyKV interface {
	// KVCreate stores value under key when the key holds nothing, and
	// returns the value the key holds afterwards (created: it was value).
	KVCreate(ctx context.Context, ns, key string, value []byte) (stored []byte, created bool, err error)
}

// SharedKey returns the key kept in kv for every process that shares it
// (the members of a cluster), drawing a fresh random key and storing it
// when kv holds none yet: of processes starting together, the first
// writer's key is the one all of them use. Whoever can read kv can read
// the key, so the secrets are protected at rest only as well as the store
// itself; a key file the operator hands out (Options.KeyFile) keeps the
// key apart from the records.
func SharedKey(ctx context.Context, kv KeyKV, logger zerolog.Logger) ([]byte, error) {
	fresh := make([]byte, KeySize)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("secrets: drawing a key: %w", err)
	}
	stored, created, err := kv.KVCreate(ctx, KeyNamespace, keyRecord, []byte(base64.StdEncoding.EncodeToString(fresh)))
	if err != nil {
		return nil, fmt.Errorf("secrets: the shared key: %w", err)
	}
	key, err := decodeKey(strings.TrimSpace(string(stored)))
	if err != nil {
		return nil, fmt.Errorf("%w: the shared key in %s/%s: %v", ErrBadKey, KeyNamespace, keyRecord, err)
	}
	if created {
		logger.Info().Str("component", "secrets").Msg("drew the secrets key and stored it in the shared store")
	}
	return key, nil
}
