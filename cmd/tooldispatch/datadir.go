package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// stateDirName is the directory under the user's state directory that
// holds one data directory per workspace.
const stateDirName = "tooldispatch"

// defaultDataDir is where the data of the workspace lives when --data is
// not given: $XDG_STATE_HOME (or ~/.local/state)/tooldispatch/NAME-HASH,
// where NAME is the workspace directory's base name, for people, and HASH
// the start of the SHA-256 of its absolute path with symlinks resolved, so
// every spelling of one workspace finds the same data and two workspaces
// of one name do not share it. Outside the workspace, no file tool or
// command working there stumbles on the store or the secret key. run,
// session, serve, tools and chaos report all find their data by this rule.
func defaultDataDir(workspace string) (string, error) {
	state, err := userStateDir()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(state, stateDirName, safeName(filepath.Base(abs))+"-"+hex.EncodeToString(sum[:6])), nil
}

// userStateDir returns $XDG_STATE_HOME when it is an absolute path, else
// ~/.local/state (the XDG Base Directory default).
func userStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("neither $XDG_STATE_HOME nor $HOME is set, so there is no default data directory; give --data DIR")
	}
	if !filepath.IsAbs(home) {
		return "", fmt.Errorf("$HOME %q is not an absolute path; give --data DIR", home)
	}
	return filepath.Join(home, ".local", "state"), nil
}

// safeName keeps letters, digits, '.', '_' and '-' of a directory's base
// name (at most 40 bytes of them) and replaces the rest with '_'.
func safeName(base string) string {
	var b strings.Builder
	for _, r := range base {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := strings.TrimLeft(b.String(), ".")
	if name == "" {
		name = "root"
	}
	return name
}
