package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/belt"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// TestClusterToolsShareSecrets: two members' tool belts as clusterTools
// wires them over one shared store (each with its own local store and data
// directory, no [secrets] key_file) share one key and their secrets, and
// keep their file versions apart; a member given a key file of its own is
// refused with a message naming [secrets] key_file.
func TestClusterToolsShareSecrets(t *testing.T) {
	t.Setenv(secrets.EnvKey, "")
	ctx := context.Background()
	shared := cachestore.NewMemory()
	defer shared.Close()
	member := func(cfg *fileConfig) (*belt.Belt, cachestore.Store, error) {
		t.Helper()
		ws, err := builtin.OpenWorkspace(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		local := cachestore.NewMemory()
		t.Cleanup(func() { local.Close() })
		bc := beltConfig(ws, local, t.TempDir(), &options{}, cfg, nil, zerolog.Nop())
		if err := clusterTools(&bc, shared, local, cfg, zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
		if bc.SecretKey == nil || !bc.Shared {
			t.Fatalf("clusterTools without a key file: SecretKey %v, Shared %v", bc.SecretKey != nil, bc.Shared)
		}
		b, err := belt.Register(toolkit.NewRegistry(), bc)
		if err == nil {
			t.Cleanup(b.Close)
		}
		return b, local, err
	}
	a, aLocal, err := member(&fileConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := member(&fileConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Secrets.Put(ctx, "TOKEN", "value-of-the-token", "", "https://api.example"); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Secrets.Get(ctx, "TOKEN"); err != nil || v != "value-of-the-token" {
		t.Errorf("the other member's Get = %v", err)
	}
	if err := b.Secrets.CheckOrigin(ctx, "https://api.example:443", "TOKEN"); err != nil {
		t.Errorf("the origin stored with the secret, on the other member: %v", err)
	}
	// The secrets are in the shared store, the file versions in the local one.
	if _, err := shared.KVGet(ctx, secrets.Namespace, "TOKEN"); err != nil {
		t.Errorf("the secret is not in the shared store: %v", err)
	}
	if _, err := aLocal.KVGet(ctx, secrets.Namespace, "TOKEN"); err == nil {
		t.Error("the secret is in the member's local store")
	}

	// A member with a key file of its own: refused, naming the key.
	t.Run("key file differs", func(t *testing.T) {
		cfg := &fileConfig{Secrets: secretsConfig{KeyFile: t.TempDir() + "/other.key"}}
		ws, err := builtin.OpenWorkspace(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		local := cachestore.NewMemory()
		defer local.Close()
		bc := beltConfig(ws, local, t.TempDir(), &options{}, cfg, nil, zerolog.Nop())
		if err := clusterTools(&bc, shared, local, cfg, zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
		if bc.SecretKey != nil {
			t.Error("a member with [secrets] key_file got the shared key")
		}
		_, err = belt.Register(toolkit.NewRegistry(), bc)
		err = clusterKeyError(err, cfg)
		if !errors.Is(err, secrets.ErrWrongKey) || !strings.Contains(err.Error(), "[secrets] key_file "+cfg.Secrets.KeyFile) {
			t.Fatalf("a member with another key: %v", err)
		}
	})
	if err := clusterKeyError(errors.New("other"), &fileConfig{}); err.Error() != "other" {
		t.Errorf("clusterKeyError changed an unrelated error: %v", err)
	}
	if v, err := shared.KVGet(ctx, secrets.KeyNamespace, "aes-256"); err != nil || len(v) == 0 {
		t.Errorf("no key record in the shared store: %v", err)
	}
}
