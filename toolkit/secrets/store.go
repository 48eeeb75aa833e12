package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Namespace is the KV namespace that holds the encrypted secrets.
const Namespace = "secrets"

// Limits on names and values.
const (
	// MinValueLen is the shortest value accepted: shorter ones would make
	// redaction replace ordinary words.
	MinValueLen = 4
	// MaxValueLen is the longest value accepted.
	MaxValueLen = 16 << 10
	// MaxDescriptionLen is the longest description kept with a secret.
	MaxDescriptionLen = 500
)

// Sentinel errors of the package; match them with errors.Is. None of them,
// nor any error this package returns, carries a secret value.
var (
	// ErrNotFound: no secret is stored under the name.
	ErrNotFound = errors.New("secrets: not found")
	// ErrInvalidName: the name is not a valid secret name.
	ErrInvalidName = errors.New("secrets: invalid name")
	// ErrInvalidValue: the value is empty, too short, too long or not UTF-8.
	ErrInvalidValue = errors.New("secrets: invalid value")
	// ErrNoKey: neither TOOLDISPATCH_SECRET_KEY nor a key file was given.
	ErrNoKey = errors.New("secrets: no encryption key")
	// ErrBadKey: the key is not the base64 of 32 bytes.
	ErrBadKey = errors.New("secrets: malformed encryption key")
	// ErrWrongKey: the key does not decrypt what the store holds (another
	// key was used to write it).
	ErrWrongKey = errors.New("secrets: wrong encryption key")
	// ErrCorrupt: a stored record cannot be decrypted or decoded.
	ErrCorrupt = errors.New("secrets: damaged record")
	// ErrKeyFileLinks: the key file has another name (a hard link), which
	// may lie where tools or commands can read it.
	ErrKeyFileLinks = errors.New("secrets: the key file has more than one link")
)

// validName is what a secret name may look like: a letter or underscore,
// then letters, digits, '_', '.', '-'; at most 64 characters.
var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

// ValidName reports whether name can name a secret.
func ValidName(name string) bool { return validName.MatchString(name) }

// checkKey is the KV key of the record that proves the key is right. Secret
// names cannot start with '!', so it never clashes with one.
const checkKey = "!keycheck"

// checkPlain is what the check record decrypts to.
const checkPlain = "tooldispatch secrets key check v1"

// recordVersion is the first byte of every stored record.
const recordVersion = 1

// Info describes a stored secret without its value.
type Info struct {
	Name        string
	Description string
	Created     time.Time
	// Origins are the origins the secret may be sent to: those stored with
	// it and those the operator bound (Bind), normalised and sorted.
	Origins []string
}

// record is the plaintext of one stored secret.
type record struct {
	Value       string `json:"v"`
	Description string `json:"d,omitempty"`
	Created     int64  `json:"t"` // unix nanoseconds
	// Origins the human confirmed; a record written before origins
	// existed has none, and its secret is sent nowhere until bound.
	Origins []string `json:"o,omitempty"`
}

// KV is where Store keeps its sealed records: one namespace (Namespace) of
// the embedding program's key-value store (cachestore's Badger, Memory and
// PostgreSQL stores satisfy it). Implementations are safe for concurrent
// use, and a write is durable when it returns.
type KV interface {
	// KVGet returns the value of key in namespace ns, or an error matching
	// fs.ErrNotExist when there is none.
	KVGet(ctx context.Context, ns, key string) ([]byte, error)
	// KVPut stores value under key, replacing any earlier value.
	KVPut(ctx context.Context, ns, key string, value []byte) error
	// KVDelete removes key; removing a missing key is not an error.
	KVDelete(ctx context.Context, ns, key string) error
	// KVList returns the records of ns whose keys start with keyPrefix, in
	// key order.
	KVList(ctx context.Context, ns, keyPrefix string) ([]toolkit.KVRecord, error)
}

// Store keeps secrets encrypted in a KV. All methods are safe for
// concurrent use.
type Store struct {
	// immutable after Open
	kv       KV
	aead     cipher.AEAD
	log      zerolog.Logger
	now      func() time.Time
	shared   bool // Options.Shared
	redactor *Redactor

	// writeMu serialises Put and Delete, so that the store and the values
	// in memory change in the same order.
	writeMu sync.Mutex

	mu     sync.Mutex
	values map[string]string // name → value of every known secret; guarded by mu
	// origins: name → origins stored with the secret; guarded by mu
	origins map[string][]string
	// bound: name → origins the operator bound (Bind); guarded by mu
	bound map[string][]string
	// retired holds values of deleted or replaced secrets, which stay
	// redacted for the life of the process; guarded by mu
	retired map[string]string
}

// Open opens the secrets kept in store. The key comes from the environment
// variable TOOLDISPATCH_SECRET_KEY (base64 of 32 bytes) when it is set, else
// from keyFile, which is created with a fresh random key and mode 0600 when
// it does not exist (its directory with mode 0700). Open fails with
// ErrWrongKey when the store holds secrets written under another key, and
// loads every stored value so that the Redactor knows them.
func Open(store KV, keyFile string, logger zerolog.Logger) (*Store, error) {
	return OpenWith(store, Options{KeyFile: keyFile, Logger: logger})
}

// Options are how OpenWith finds the key and treats the store.
type Options struct {
	// Key is the AES-256 key (KeySize bytes), e.g. from SharedKey. When
	// set, neither TOOLDISPATCH_SECRET_KEY nor KeyFile is read.
	Key []byte
	// KeyFile is read as Open reads it when Key is not set.
	KeyFile string
	// Shared says other processes write the same store (the members of a
	// cluster): every Get, and so every origin check, reads the store, so
	// that a secret stored, replaced or deleted elsewhere takes effect at
	// once. Without it, values read once are served from memory.
	Shared bool
	// Logger receives the store's logs (names, never values).
	Logger zerolog.Logger
}

// OpenWith is Open with the key and the store's sharing given in o.
func OpenWith(store KV, o Options) (*Store, error) {
	if store == nil {
		return nil, errors.New("secrets: Open needs a store")
	}
	log := o.Logger.With().Str("component", "secrets").Logger()
	key := o.Key
	if key == nil {
		var err error
		if key, err = loadKey(o.KeyFile, log); err != nil {
			return nil, err
		}
	} else if len(key) != KeySize {
		return nil, fmt.Errorf("%w: the key has %d bytes, want %d", ErrBadKey, len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	s := &Store{
		kv:       store,
		aead:     aead,
		log:      log,
		now:      time.Now,
		shared:   o.Shared,
		redactor: &Redactor{},
		values:   map[string]string{},
		origins:  map[string][]string{},
		bound:    map[string][]string{},
		retired:  map[string]string{},
	}
	ctx := context.Background()
	if err := s.checkKey(ctx); err != nil {
		return nil, err
	}
	if err := s.loadAll(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// checkKey verifies the key against the store's check record, writing one
// when the store has none yet.
func (s *Store) checkKey(ctx context.Context) error {
	raw, err := s.kv.KVGet(ctx, Namespace, checkKey)
	if c, ok := s.kv.(KeyKV); ok && errors.Is(err, fs.ErrNotExist) {
		// Processes starting together with different keys: only the first
		// check record is written, and the others are checked against it.
		sealed, serr := s.seal(checkKey, []byte(checkPlain))
		if serr != nil {
			return serr
		}
		var created bool
		if raw, created, err = c.KVCreate(ctx, Namespace, checkKey, sealed); err == nil && created {
			return nil
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		sealed, err := s.seal(checkKey, []byte(checkPlain))
		if err != nil {
			return err
		}
		if err := s.kv.KVPut(ctx, Namespace, checkKey, sealed); err != nil {
			return fmt.Errorf("secrets: writing the key check: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("secrets: reading the key check: %w", err)
	}
	plain, err := s.open(checkKey, raw)
	if err != nil || string(plain) != checkPlain {
		return fmt.Errorf("%w: the stored secrets were encrypted with another key", ErrWrongKey)
	}
	return nil
}

// loadAll decrypts every stored secret into memory. A record that cannot be
// decrypted is logged (by name) and skipped; Get reports it.
func (s *Store) loadAll(ctx context.Context) error {
	kvs, err := s.kv.KVList(ctx, Namespace, "")
	if err != nil {
		return fmt.Errorf("secrets: listing: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range kvs {
		if e.Key == checkKey {
			continue
		}
		rec, err := s.decode(e.Key, e.Value)
		if err != nil {
			s.log.Warn().Str("secret", e.Key).Err(err).Msg("skipping a secret that cannot be read")
			continue
		}
		s.values[e.Key] = rec.Value
		s.origins[e.Key] = rec.Origins
	}
	s.updateRedactorLocked()
	return nil
}

// Put stores (or replaces) the secret name, bound to origins (see
// ParseOrigin; a secret without origins is sent nowhere unless the
// operator binds it with Bind). The value is never logged.
func (s *Store) Put(ctx context.Context, name, value, description string, origins ...string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: %q (use letters, digits, '_', '.', '-', starting with a letter or '_', at most 64 characters)", ErrInvalidName, name)
	}
	if err := checkValue(value); err != nil {
		return err
	}
	if len(description) > MaxDescriptionLen {
		description = truncateUTF8(description, MaxDescriptionLen)
	}
	norm, err := ParseOrigins(origins)
	if err != nil {
		return err
	}
	plain, err := json.Marshal(record{Value: value, Description: description, Created: s.now().UnixNano(), Origins: norm})
	if err != nil {
		return fmt.Errorf("secrets: encoding %q: %w", name, err)
	}
	sealed, err := s.seal(name, plain)
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.kv.KVPut(ctx, Namespace, name, sealed); err != nil {
		return fmt.Errorf("secrets: storing %q: %w", name, err)
	}
	s.mu.Lock()
	if old, ok := s.values[name]; ok && old != value {
		s.retired[name+"\x00"+old] = old
	}
	s.values[name] = value
	s.origins[name] = norm
	s.updateRedactorLocked()
	s.mu.Unlock()
	s.log.Info().Str("secret", name).Strs("origins", norm).Msg("secret stored")
	return nil
}

func checkValue(value string) error {
	switch {
	case value == "":
		return fmt.Errorf("%w: the value is empty", ErrInvalidValue)
	case !utf8.ValidString(value):
		return fmt.Errorf("%w: the value is not valid UTF-8 text", ErrInvalidValue)
	case utf8.RuneCountInString(value) < MinValueLen:
		return fmt.Errorf("%w: the value is shorter than %d characters", ErrInvalidValue, MinValueLen)
	case len(value) > MaxValueLen:
		return fmt.Errorf("%w: the value is longer than %d bytes", ErrInvalidValue, MaxValueLen)
	}
	return nil
}

// Get returns the value of the secret name. A missing secret gives an error
// matching ErrNotFound whose text says `secret "NAME" not found`.
func (s *Store) Get(ctx context.Context, name string) (string, error) {
	v, _, err := s.lookup(ctx, name)
	return v, err
}

// lookup returns the value of the secret name and the origins it may be
// sent to (stored with it and bound by the operator, sorted), both from
// one read of its record, so a record another process replaces between
// two reads cannot pair one record's value with the other's origins.
func (s *Store) lookup(ctx context.Context, name string) (string, []string, error) {
	if !ValidName(name) {
		return "", nil, fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	s.mu.Lock()
	v, ok := s.values[name]
	origins := unionOrigins(s.origins[name], s.bound[name])
	s.mu.Unlock()
	if ok && !s.shared {
		return v, origins, nil
	}
	// Another process sharing the store may have written it since Open
	// (and, when shared, replaced or deleted it).
	raw, err := s.kv.KVGet(ctx, Namespace, name)
	if errors.Is(err, fs.ErrNotExist) {
		if ok {
			s.forget(name)
		}
		return "", nil, notFound(name)
	}
	if err != nil {
		return "", nil, fmt.Errorf("secrets: reading %q: %w", name, err)
	}
	rec, err := s.decode(name, raw)
	if err != nil {
		return "", nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.values[name]
	if had && old != rec.Value {
		s.retired[name+"\x00"+old] = old
	}
	s.values[name] = rec.Value
	s.origins[name] = rec.Origins
	if !had || old != rec.Value {
		s.updateRedactorLocked()
	}
	return rec.Value, unionOrigins(rec.Origins, s.bound[name]), nil
}

// forget drops a secret another process deleted; its value stays redacted
// for the life of the process.
func (s *Store) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.values[name]; ok {
		s.retired[name+"\x00"+old] = old
		delete(s.values, name)
		delete(s.origins, name)
		s.updateRedactorLocked()
	}
}

func notFound(name string) error {
	return &notFoundError{name: name}
}

// notFoundError is the error of a missing secret.
type notFoundError struct{ name string }

func (e *notFoundError) Error() string {
	return fmt.Sprintf("secret %q not found; ask the user to store it with store_secret", e.name)
}

func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// Has reports whether a secret is stored under name.
func (s *Store) Has(ctx context.Context, name string) (bool, error) {
	_, err := s.Get(ctx, name)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidName) {
		return false, nil
	}
	return err == nil, err
}

// Names returns the names of the stored secrets, sorted.
func (s *Store) Names(ctx context.Context) ([]string, error) {
	kvs, err := s.kv.KVList(ctx, Namespace, "")
	if err != nil {
		return nil, fmt.Errorf("secrets: listing: %w", err)
	}
	names := make([]string, 0, len(kvs))
	for _, e := range kvs {
		if e.Key != checkKey {
			names = append(names, e.Key)
		}
	}
	slices.Sort(names)
	return names, nil
}

// List describes the stored secrets (names, descriptions, creation times),
// sorted by name; values stay hidden.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	kvs, err := s.kv.KVList(ctx, Namespace, "")
	if err != nil {
		return nil, fmt.Errorf("secrets: listing: %w", err)
	}
	var out []Info
	for _, e := range kvs {
		if e.Key == checkKey {
			continue
		}
		info := Info{Name: e.Key}
		var stored []string
		if rec, err := s.decode(e.Key, e.Value); err == nil {
			info.Description = rec.Description
			info.Created = time.Unix(0, rec.Created)
			stored = rec.Origins
		}
		s.mu.Lock()
		info.Origins = unionOrigins(stored, s.bound[e.Key])
		s.mu.Unlock()
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete removes the secret name; deleting a missing secret is not an
// error. Its value stays redacted for the life of the process.
func (s *Store) Delete(ctx context.Context, name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.kv.KVDelete(ctx, Namespace, name); err != nil {
		return fmt.Errorf("secrets: deleting %q: %w", name, err)
	}
	s.mu.Lock()
	if old, ok := s.values[name]; ok {
		s.retired[name+"\x00"+old] = old
		delete(s.values, name)
		delete(s.origins, name)
		s.updateRedactorLocked()
	}
	s.mu.Unlock()
	s.log.Info().Str("secret", name).Msg("secret deleted")
	return nil
}

// Bind lets the secret name be sent to origins besides those stored with
// it: the operator's binding from the configuration. It is kept in memory
// only, applies whether or not the secret is stored yet, and adds to
// earlier bindings. Call it at start-up.
func (s *Store) Bind(name string, origins ...string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	norm, err := ParseOrigins(origins)
	if err != nil {
		return fmt.Errorf("binding the secret %q: %w", name, err)
	}
	s.mu.Lock()
	s.bound[name] = unionOrigins(s.bound[name], norm)
	s.mu.Unlock()
	return nil
}

// Bound returns the origins the operator bound name to (Bind), sorted.
func (s *Store) Bound(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bound[name])
}

// Origins returns the origins the secret name may be sent to: those
// stored with it and those the operator bound, sorted. A missing secret
// gives an error matching ErrNotFound.
func (s *Store) Origins(ctx context.Context, name string) ([]string, error) {
	_, origins, err := s.lookup(ctx, name)
	return origins, err
}

// CheckOrigin returns nil when every secret named may be sent to origin (a
// normalised origin, see OriginOf), else an error matching ErrOrigin that
// names the allowed origins (never a value), or ErrNotFound.
func (s *Store) CheckOrigin(ctx context.Context, origin string, names ...string) error {
	for _, n := range names {
		allowed, err := s.Origins(ctx, n)
		if err != nil {
			return err
		}
		if !slices.Contains(allowed, origin) {
			return originError(n, origin, allowed)
		}
	}
	return nil
}

func unionOrigins(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Redactor returns the redactor of the store's secrets; it follows every
// Put and Delete.
func (s *Store) Redactor() *Redactor { return s.redactor }

// updateRedactorLocked rebuilds the redactor from the known values.
func (s *Store) updateRedactorLocked() {
	named := make([]namedValue, 0, len(s.values)+len(s.retired))
	for n, v := range s.values {
		named = append(named, namedValue{name: n, value: v})
	}
	for k, v := range s.retired {
		n, _, _ := strings.Cut(k, "\x00")
		named = append(named, namedValue{name: n, value: v})
	}
	s.redactor.set(named)
}

// additionalData binds a ciphertext to the name it is stored under, so a
// record copied to another name does not decrypt.
func additionalData(name string) []byte {
	return []byte("tooldispatch/secrets/v1/" + name)
}

// seal encrypts plain for name: version byte, nonce, ciphertext and tag.
func (s *Store) seal(name string, plain []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), 1+s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secrets: drawing a nonce: %w", err)
	}
	out := append([]byte{recordVersion}, nonce...)
	return s.aead.Seal(out, nonce, plain, additionalData(name)), nil
}

// open decrypts a record sealed for name.
func (s *Store) open(name string, raw []byte) ([]byte, error) {
	ns := s.aead.NonceSize()
	if len(raw) < 1+ns+s.aead.Overhead() || raw[0] != recordVersion {
		return nil, fmt.Errorf("%w: secret %q has an unknown format", ErrCorrupt, name)
	}
	plain, err := s.aead.Open(nil, raw[1:1+ns], raw[1+ns:], additionalData(name))
	if err != nil {
		return nil, fmt.Errorf("%w: secret %q cannot be decrypted (wrong key or damaged record)", ErrCorrupt, name)
	}
	return plain, nil
}

func (s *Store) decode(name string, raw []byte) (record, error) {
	plain, err := s.open(name, raw)
	if err != nil {
		return record{}, err
	}
	var rec record
	if err := json.Unmarshal(plain, &rec); err != nil {
		return record{}, fmt.Errorf("%w: secret %q does not decode", ErrCorrupt, name)
	}
	rec.Origins = renormalise(rec.Origins)
	return rec, nil
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
