package secrets

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// regexp2's match-timeout clock stops itself ~1 s after the last match.
		goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}

// secretValue is a value no other part of a test produces by accident.
const secretValue = "sk-live-7Qw9Zr2Lx8Vb4Nm6Kp1Ty3"

// openTest opens a Store on a fresh key file; logs go to logs when given.
func openTest(t *testing.T, store cachestore.Store, logs *bytes.Buffer) (*Store, string) {
	t.Helper()
	t.Setenv(EnvKey, "")
	keyFile := filepath.Join(t.TempDir(), "data", "secret.key")
	return openWithKeyFile(t, store, keyFile, logs), keyFile
}

func openWithKeyFile(t *testing.T, store cachestore.Store, keyFile string, logs *bytes.Buffer) *Store {
	t.Helper()
	logger := zerolog.Nop()
	if logs != nil {
		logger = zerolog.New(logs).Level(zerolog.DebugLevel)
	}
	s, err := Open(store, keyFile, logger)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func openBadger(t *testing.T, dir string) *badger.Store {
	t.Helper()
	b, err := badger.Open(badger.TestOptions(dir))
	if err != nil {
		t.Fatalf("badger.Open: %v", err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	s, _ := openTest(t, cachestore.NewMemory(), &logs)

	if err := s.Put(ctx, "GITHUB_TOKEN", secretValue, "GitHub token"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "api.key-2", "another-value", ""); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "GITHUB_TOKEN")
	if err != nil || got != secretValue {
		t.Fatalf("Get = %q, %v; want the stored value", got, err)
	}
	names, err := s.Names(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"GITHUB_TOKEN", "api.key-2"}, names); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	infos, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Description != "GitHub token" || infos[0].Created.IsZero() {
		t.Errorf("List = %+v", infos)
	}

	// Replacing keeps one entry with the new value.
	if err := s.Put(ctx, "GITHUB_TOKEN", secretValue+"-v2", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "GITHUB_TOKEN"); got != secretValue+"-v2" {
		t.Errorf("after replace Get = %q", got)
	}

	if err := s.Delete(ctx, "GITHUB_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "GITHUB_TOKEN"); err != nil {
		t.Errorf("deleting a missing secret: %v", err)
	}
	_, err = s.Get(ctx, "GITHUB_TOKEN")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `secret "GITHUB_TOKEN" not found`) {
		t.Errorf("Get after Delete: %v; want ErrNotFound saying secret \"GITHUB_TOKEN\" not found", err)
	}
	if has, err := s.Has(ctx, "GITHUB_TOKEN"); has || err != nil {
		t.Errorf("Has after Delete = %v, %v", has, err)
	}
	if strings.Contains(logs.String(), secretValue) {
		t.Errorf("logs hold the value:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "GITHUB_TOKEN") {
		t.Errorf("logs do not name the secret:\n%s", logs.String())
	}
}

func TestPutRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, cachestore.NewMemory(), nil)
	tests := []struct {
		name, secret, value string
		want                error
	}{
		{name: "empty name", secret: "", value: secretValue, want: ErrInvalidName},
		{name: "name with space", secret: "my key", value: secretValue, want: ErrInvalidName},
		{name: "name starting with digit", secret: "1KEY", value: secretValue, want: ErrInvalidName},
		{name: "name with brace", secret: "A}", value: secretValue, want: ErrInvalidName},
		{name: "reserved check key", secret: checkKey, value: secretValue, want: ErrInvalidName},
		{name: "empty value", secret: "K", value: "", want: ErrInvalidValue},
		{name: "short value", secret: "K", value: "abc", want: ErrInvalidValue},
		{name: "not UTF-8", secret: "K", value: "ab\xffcd", want: ErrInvalidValue},
		{name: "too long", secret: "K", value: strings.Repeat("x", MaxValueLen+1), want: ErrInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Put(ctx, tt.secret, tt.value, "")
			if !errors.Is(err, tt.want) {
				t.Fatalf("Put = %v, want %v", err, tt.want)
			}
			if tt.value != "" && len(tt.value) < 100 && strings.Contains(err.Error(), tt.value) {
				t.Errorf("error %q holds the value", err)
			}
		})
	}
}

func TestCiphertextOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv(EnvKey, "")
	keyFile := filepath.Join(dir, "secret.key")
	dbDir := filepath.Join(dir, "db")

	db := openBadger(t, dbDir)
	s := openWithKeyFile(t, db, keyFile, nil)
	if err := s.Put(ctx, "TOKEN", secretValue, "a token"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	needles := [][]byte{[]byte(secretValue), []byte(base64.StdEncoding.EncodeToString([]byte(secretValue)))}
	files := 0
	err := filepath.WalkDir(dbDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, n := range needles {
			if bytes.Contains(b, n) {
				t.Errorf("%s holds the secret in clear (%q)", p, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("Badger wrote no files")
	}

	// The same key reads it back after a restart.
	db = openBadger(t, dbDir)
	defer db.Close()
	s = openWithKeyFile(t, db, keyFile, nil)
	if got, err := s.Get(ctx, "TOKEN"); err != nil || got != secretValue {
		t.Fatalf("after reopening Get = %q, %v", got, err)
	}
}

func TestKeyFileCreated0600(t *testing.T) {
	t.Setenv(EnvKey, "")
	dir := filepath.Join(t.TempDir(), "fresh")
	keyFile := filepath.Join(dir, "secret.key")
	openWithKeyFile(t, cachestore.NewMemory(), keyFile, nil)

	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode = %v, want 0600", got)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := di.Mode().Perm(); got != 0o700 {
		t.Errorf("key directory mode = %v, want 0700", got)
	}
	b, _ := os.ReadFile(keyFile)
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != KeySize {
		t.Errorf("key file holds %q: %v", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".secret-key-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// A second Open reads the same key.
	before := string(b)
	openWithKeyFile(t, cachestore.NewMemory(), keyFile, nil)
	if after, _ := os.ReadFile(keyFile); string(after) != before {
		t.Error("a second Open replaced the key file")
	}
}

func TestEnvKey(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{7}, KeySize)
	store := cachestore.NewMemory()

	t.Setenv(EnvKey, base64.StdEncoding.EncodeToString(key))
	s, err := Open(store, "", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "K", secretValue, ""); err != nil {
		t.Fatal(err)
	}
	// The URL alphabet without padding is the same key.
	t.Setenv(EnvKey, base64.RawURLEncoding.EncodeToString(key))
	s, err = Open(store, "", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "K"); err != nil || got != secretValue {
		t.Fatalf("Get = %q, %v", got, err)
	}

	tests := []struct {
		name, env string
		keyFile   string
		want      error
	}{
		{name: "not base64", env: "not base64 at all!", want: ErrBadKey},
		{name: "16 bytes", env: base64.StdEncoding.EncodeToString(key[:16]), want: ErrBadKey},
		{name: "no key at all", env: "", keyFile: "", want: ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvKey, tt.env)
			_, err := Open(cachestore.NewMemory(), tt.keyFile, zerolog.Nop())
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWrongKeyFailsCleanly(t *testing.T) {
	ctx := context.Background()
	t.Setenv(EnvKey, "")
	dir := t.TempDir()
	store := openBadger(t, filepath.Join(dir, "db"))
	defer store.Close()

	s := openWithKeyFile(t, store, filepath.Join(dir, "a.key"), nil)
	if err := s.Put(ctx, "TOKEN", secretValue, ""); err != nil {
		t.Fatal(err)
	}

	_, err := Open(store, filepath.Join(dir, "b.key"), zerolog.Nop())
	if !errors.Is(err, ErrWrongKey) {
		t.Fatalf("Open with another key = %v, want ErrWrongKey", err)
	}
	if strings.Contains(err.Error(), secretValue) {
		t.Errorf("error holds the value: %v", err)
	}

	// A malformed key file is refused before anything is read.
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(store, bad, zerolog.Nop()); !errors.Is(err, ErrBadKey) {
		t.Errorf("Open with a malformed key file = %v, want ErrBadKey", err)
	}
}

func TestDamagedRecords(t *testing.T) {
	ctx := context.Background()
	store := cachestore.NewMemory()
	s, keyFile := openTest(t, store, nil)
	if err := s.Put(ctx, "A", secretValue, ""); err != nil {
		t.Fatal(err)
	}
	raw, err := store.KVGet(ctx, Namespace, "A")
	if err != nil {
		t.Fatal(err)
	}

	// A record copied under another name does not decrypt: the name is
	// bound to the ciphertext.
	if err := store.KVPut(ctx, Namespace, "B", raw); err != nil {
		t.Fatal(err)
	}
	// A flipped byte does not decrypt either.
	flipped := bytes.Clone(raw)
	flipped[len(flipped)-1] ^= 1
	if err := store.KVPut(ctx, Namespace, "C", flipped); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	s = openWithKeyFile(t, store, keyFile, &logs)
	for _, name := range []string{"B", "C"} {
		_, err := s.Get(ctx, name)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("Get(%s) = %v, want ErrCorrupt", name, err)
		} else if strings.Contains(err.Error(), secretValue) {
			t.Errorf("error holds the value: %v", err)
		}
	}
	if got, err := s.Get(ctx, "A"); err != nil || got != secretValue {
		t.Errorf("the intact record: %q, %v", got, err)
	}
	if strings.Contains(logs.String(), secretValue) {
		t.Errorf("logs hold the value:\n%s", logs.String())
	}
}

func TestGetSeesSecretsWrittenByAnotherStore(t *testing.T) {
	ctx := context.Background()
	store := cachestore.NewMemory()
	a, keyFile := openTest(t, store, nil)
	b := openWithKeyFile(t, store, keyFile, nil)
	if err := a.Put(ctx, "LATE", secretValue, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "LATE"); err != nil || got != secretValue {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if got := b.Redactor().Redact("x " + secretValue); got != "x [secret:LATE]" {
		t.Errorf("after Get the redactor gives %q", got)
	}
}
