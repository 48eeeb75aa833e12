package belt_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/belt"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

func TestRegister(t *testing.T) {
	ws, err := builtin.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	store := cachestore.NewMemory()
	defer store.Close()

	if _, err := belt.Register(toolkit.NewRegistry(), belt.Config{Store: store}); err == nil {
		t.Error("Register without a workspace succeeded")
	}

	reg := toolkit.NewRegistry()
	b, err := belt.Register(reg, belt.Config{Workspace: ws, Store: store,
		KeyFile: filepath.Join(t.TempDir(), "secret.key"), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, name := range []string{"find_tools", "run_tool", "read_files", "edit_file", "run_command",
		"store_secret", "fetch_page", "ask_user", "test_tool"} {
		if _, ok := reg.Lookup(name); !ok {
			t.Errorf("the belt lacks %s", name)
		}
	}
	if b.Secrets == nil || b.Memory == nil || b.Web == nil || b.Sandbox == nil || b.MCP != nil {
		t.Errorf("belt = %+v", b)
	}

	// A failing BindSecrets fails Register, naming it.
	bad := errors.New("no such secret")
	store2 := cachestore.NewMemory()
	defer store2.Close()
	_, err = belt.Register(toolkit.NewRegistry(), belt.Config{Workspace: ws, Store: store2,
		KeyFile: filepath.Join(t.TempDir(), "secret.key"), BindSecrets: func(*secrets.Store) error { return bad }})
	if !errors.Is(err, bad) {
		t.Errorf("Register with a failing BindSecrets: %v", err)
	}
}
