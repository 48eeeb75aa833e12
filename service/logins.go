package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// Login sessions of the operator page. A login draws a random id, which
// only the browser's cookie holds; the store keeps, under the id's SHA-256,
// when the login was made and last used and which token it was made under.
// Every member sharing the store accepts it; a logout deletes it; a login
// past its idle or absolute lifetime, or made under another token, is
// refused and deleted.
const (
	// LoginNamespace is the KV namespace of the login records.
	LoginNamespace = "logins"
	// DefaultLoginIdle ends a login unused this long (Options.LoginIdle).
	DefaultLoginIdle = time.Hour
	// DefaultLoginMax ends a login this long after it was made, however
	// used (Options.LoginMax).
	DefaultLoginMax = 12 * time.Hour
	// loginTouchEvery bounds how often a login's last use is written: a
	// login used without pause costs one store write a minute, and its
	// idle lifetime may end up to this much early.
	loginTouchEvery = time.Minute
	// loginIDBytes is the size of a login's random id (256 bits).
	loginIDBytes = 32
	// loginTimeout bounds the store's work for one login check.
	loginTimeout = 5 * time.Second
)

// loginRecord is what the store keeps of a login; never its id.
type loginRecord struct {
	Created time.Time `json:"created"`
	Used    time.Time `json:"used"`
	// Token is the fingerprint of the token the login was made under.
	Token string `json:"token"`
}

// logins makes, checks and ends login sessions. Safe for concurrent use.
type logins struct {
	kv        cachestore.KVStore
	idle, max time.Duration
	token     string // tokenFingerprint of the server's token
	now       func() time.Time
	log       zerolog.Logger
}

// tokenFingerprint names a token in the login records without being
// usable as it: a labelled hash of the token's SHA-256.
func tokenFingerprint(token string) string {
	inner := sha256.Sum256([]byte(token))
	sum := sha256.Sum256(append([]byte("tooldispatch login token\x00"), inner[:]...))
	return hex.EncodeToString(sum[:])
}

// loginKey is the store key of the login whose id is id.
func loginKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// create makes a login and returns its id, for the cookie only.
func (l *logins) create(ctx context.Context) (string, error) {
	l.sweep(ctx)
	b := make([]byte, loginIDBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	now := l.now().UTC()
	if err := l.put(ctx, id, loginRecord{Created: now, Used: now, Token: l.token}); err != nil {
		return "", err
	}
	return id, nil
}

// valid reports whether id names a live login of this token, deleting it
// when it has ended, and records its use at most once a loginTouchEvery.
func (l *logins) valid(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	raw, err := l.kv.KVGet(ctx, LoginNamespace, loginKey(id))
	if err != nil {
		if !errors.Is(err, cachestore.ErrNotFound) {
			l.log.Warn().Err(err).Msg("reading a login: refused")
		}
		return false
	}
	var rec loginRecord
	now := l.now()
	if json.Unmarshal(raw, &rec) != nil || l.ended(rec, now) {
		l.delete(ctx, loginKey(id))
		return false
	}
	if now.Sub(rec.Used) >= loginTouchEvery {
		rec.Used = now.UTC()
		if err := l.put(ctx, id, rec); err != nil {
			l.log.Warn().Err(err).Msg("recording a login's use")
		}
	}
	return true
}

// ended reports whether a login is over at now: idle too long, past its
// absolute lifetime, or made under another token.
func (l *logins) ended(rec loginRecord, now time.Time) bool {
	return rec.Token != l.token || !now.Before(rec.Created.Add(l.max)) || !now.Before(rec.Used.Add(l.idle))
}

// end deletes the login whose id is id (a logout).
func (l *logins) end(ctx context.Context, id string) {
	if id != "" {
		l.delete(ctx, loginKey(id))
	}
}

// sweep deletes every ended login (run at each new login, so the records
// of browsers that never came back do not pile up).
func (l *logins) sweep(ctx context.Context) {
	kvs, err := l.kv.KVList(ctx, LoginNamespace, "")
	if err != nil {
		l.log.Warn().Err(err).Msg("listing the logins")
		return
	}
	now := l.now()
	for _, kv := range kvs {
		var rec loginRecord
		if json.Unmarshal(kv.Value, &rec) != nil || l.ended(rec, now) {
			l.delete(ctx, kv.Key)
		}
	}
}

func (l *logins) put(ctx context.Context, id string, rec loginRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return l.kv.KVPut(ctx, LoginNamespace, loginKey(id), b)
}

func (l *logins) delete(ctx context.Context, key string) {
	if err := l.kv.KVDelete(ctx, LoginNamespace, key); err != nil {
		l.log.Warn().Err(err).Msg("deleting a login")
	}
}

// newLogins keeps the logins of a server with a token in opts.Logins, or
// in opts.Store when it is a KV store.
func newLogins(opts Options, log zerolog.Logger) (*logins, error) {
	kv := opts.Logins
	if kv == nil {
		kv, _ = opts.Store.(cachestore.KVStore)
	}
	if kv == nil {
		return nil, errors.New("service: a Token needs Options.Logins (or a Store that is a cachestore.KVStore) to keep the page's logins")
	}
	l := &logins{kv: kv, idle: opts.LoginIdle, max: opts.LoginMax, token: tokenFingerprint(opts.Token), now: time.Now, log: log}
	if l.idle == 0 {
		l.idle = DefaultLoginIdle
	}
	if l.max == 0 {
		l.max = DefaultLoginMax
	}
	return l, nil
}
