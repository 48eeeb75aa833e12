package secrets

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// TestSharedKey: the processes sharing a store agree on one key, drawn by
// the first of them, and the key never reaches the logs.
func TestSharedKey(t *testing.T) {
	ctx := context.Background()
	store := cachestore.NewMemory()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := zerolog.New(zerolog.SyncWriter(&lockedBuffer{b: &logs, mu: &mu}))
	const n = 6
	keys := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, err := SharedKey(ctx, store, logger)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for i := range n {
		if len(keys[i]) != KeySize || !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("key %d = %x, key 0 = %x: want one key of %d bytes", i, keys[i], keys[0], KeySize)
		}
	}
	mu.Lock()
	if c := strings.Count(logs.String(), "drew the secrets key"); c != 1 {
		t.Errorf("%d processes say they drew the key, want 1:\n%s", c, logs.String())
	}
	stored, err := store.KVGet(ctx, KeyNamespace, keyRecord)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(logs.Bytes(), bytes.TrimSpace(stored)) {
		t.Error("the logs hold the key")
	}
	mu.Unlock()

	// A damaged key record is refused, not replaced.
	if err := store.KVPut(ctx, KeyNamespace, keyRecord, []byte("short")); err != nil {
		t.Fatal(err)
	}
	if _, err := SharedKey(ctx, store, zerolog.Nop()); !errors.Is(err, ErrBadKey) {
		t.Errorf("SharedKey over a damaged record = %v, want ErrBadKey", err)
	}
}

// TestOpenWithKey: a key given to OpenWith seals and opens records; one of
// the wrong size is refused; another key over the same store is
// ErrWrongKey.
func TestOpenWithKey(t *testing.T) {
	ctx := context.Background()
	store := cachestore.NewMemory()
	key := bytes.Repeat([]byte{7}, KeySize)
	s, err := OpenWith(store, Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "K", secretValue, ""); err != nil {
		t.Fatal(err)
	}
	again, err := OpenWith(store, Options{Key: bytes.Clone(key)})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := again.Get(ctx, "K"); err != nil || v != secretValue {
		t.Errorf("Get under the same key = %q, %v", v, err)
	}
	if _, err := OpenWith(store, Options{Key: key[:16]}); !errors.Is(err, ErrBadKey) {
		t.Errorf("a 16-byte key = %v, want ErrBadKey", err)
	}
	if _, err := OpenWith(store, Options{Key: bytes.Repeat([]byte{8}, KeySize)}); !errors.Is(err, ErrWrongKey) {
		t.Errorf("another key = %v, want ErrWrongKey", err)
	}
}

// TestSharedStoreSeesChanges: two processes over one store (Shared), as
// cluster members: a secret stored on one is used on the other with the
// origins stored with it; replaced there with other origins, the old
// origin is refused at once; deleted, it is gone at once while its value
// stays redacted. Without Shared, the second keeps what it read.
func TestSharedStoreSeesChanges(t *testing.T) {
	ctx := context.Background()
	store := cachestore.NewMemory()
	key := bytes.Repeat([]byte{3}, KeySize)
	open := func(shared bool) *Store {
		s, err := OpenWith(store, Options{Key: key, Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, unshared := open(true), open(true), open(false)
	if err := a.Put(ctx, "TOKEN", secretValue, "", "https://one.example"); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"shared": b, "unshared": unshared} {
		if err := s.CheckOrigin(ctx, "https://one.example:443", "TOKEN"); err != nil {
			t.Errorf("%s: the stored origin: %v", name, err)
		}
		if err := s.CheckOrigin(ctx, "https://two.example:443", "TOKEN"); !errors.Is(err, ErrOrigin) {
			t.Errorf("%s: another origin = %v, want ErrOrigin", name, err)
		}
	}

	const newValue = "sk-live-REPLACED-5t6y7u8i9o"
	if err := a.Put(ctx, "TOKEN", newValue, "", "https://two.example"); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckOrigin(ctx, "https://one.example:443", "TOKEN"); !errors.Is(err, ErrOrigin) {
		t.Errorf("the replaced secret's old origin on the other process = %v, want ErrOrigin", err)
	}
	if v, err := b.Get(ctx, "TOKEN"); err != nil || v != newValue {
		t.Errorf("the replaced value on the other process: %v", err)
	}
	if got := b.Redactor().Redact(secretValue + " " + newValue); got != "[secret:TOKEN] [secret:TOKEN]" {
		t.Errorf("the other process redacts %q", got)
	}
	if err := unshared.CheckOrigin(ctx, "https://one.example:443", "TOKEN"); err != nil {
		t.Errorf("an unshared store keeps what it read: %v", err)
	}

	if err := a.Delete(ctx, "TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "TOKEN"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the deleted secret on the other process = %v, want ErrNotFound", err)
	}
	if got := b.Redactor().Redact(newValue); got != "[secret:TOKEN]" {
		t.Errorf("after the delete the other process redacts %q", got)
	}
}

type lockedBuffer struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestKeyCheckRace: processes opening one empty store at once with
// different keys: the first key check written stands and every other key
// is refused, so no two keys ever seal records side by side.
func TestKeyCheckRace(t *testing.T) {
	const n = 6
	store := &barrierKV{Memory: cachestore.NewMemory()}
	store.arrived.Add(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = OpenWith(store, Options{Key: bytes.Repeat([]byte{byte(i + 1)}, KeySize)})
		})
	}
	wg.Wait()
	opened := 0
	for _, err := range errs {
		switch {
		case err == nil:
			opened++
		case !errors.Is(err, ErrWrongKey):
			t.Errorf("OpenWith: %v", err)
		}
	}
	if opened != 1 {
		t.Errorf("%d different keys opened one store, want 1", opened)
	}
}

// barrierKV holds every first read of the key check until all the
// readers made theirs, so that they all find the store empty.
type barrierKV struct {
	*cachestore.Memory
	arrived sync.WaitGroup
}

func (b *barrierKV) KVGet(ctx context.Context, ns, key string) ([]byte, error) {
	v, err := b.Memory.KVGet(ctx, ns, key)
	if key == checkKey {
		b.arrived.Done()
		b.arrived.Wait()
	}
	return v, err
}

// TestResolveReadsOneRecord: the value a reference resolves to and the
// origins it is checked against come from one read of the record. Another
// member replacing the secret (a new value bound to another origin) right
// after this member's read must not let the old value go to the new
// origin.
func TestResolveReadsOneRecord(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{5}, KeySize)
	kv := &afterReadKV{Memory: cachestore.NewMemory()}
	open := func() *Store {
		s, err := OpenWith(kv, Options{Key: key, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	if err := a.Put(ctx, "TOKEN", secretValue, "", "https://one.example"); err != nil {
		t.Fatal(err)
	}
	const newValue = "sk-live-REPLACED-1q2w3e4r5t"
	kv.after = func() {
		if err := a.Put(ctx, "TOKEN", newValue, "", "https://two.example"); err != nil {
			t.Error(err)
		}
	}
	out, _, err := b.Resolve(ctx, "https://two.example:443", "Bearer ${secret:TOKEN}")
	if err == nil && strings.Contains(out, secretValue) {
		t.Fatalf("the old value, bound to https://one.example, was resolved for https://two.example")
	}
	if err == nil && out != "Bearer "+newValue {
		t.Errorf("resolved %q", out)
	}
}

// afterReadKV runs after once, right after the first read of a secret's
// record (another process writing between two reads of this one).
type afterReadKV struct {
	*cachestore.Memory
	mu    sync.Mutex
	after func()
}

func (k *afterReadKV) KVGet(ctx context.Context, ns, key string) ([]byte, error) {
	v, err := k.Memory.KVGet(ctx, ns, key)
	if ns == Namespace && key != checkKey {
		k.mu.Lock()
		f := k.after
		k.after = nil
		k.mu.Unlock()
		if f != nil {
			f()
		}
	}
	return v, err
}
