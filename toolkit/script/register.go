package script

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Registered describes one tool that Register added.
type Registered struct {
	// Name is the registered name (script_…, ext_…).
	Name   string
	Source toolkit.Source
	// Origin is where the tool was declared.
	Origin Origin
	// ReadOnly is the confirm policy it got (false unless its origin is
	// trusted and it declared read_only).
	ReadOnly   bool
	Concurrent bool
	// Example is the canonical example arguments declared for test_tool,
	// or nil.
	Example json.RawMessage
}

// Register adds cfg's script and extension tools to reg and returns what it
// added, in registration order. cfg must come from the operator's
// configuration file, outside the workspace: inline tools and extension
// tools are as trusted as that file. Manifest paths are relative to
// workspaceDir; a manifest inside workspaceDir is never trusted, whatever
// its [[script.manifests]] entry or the manifest itself says, and each
// claim ignored that way is logged.
//
// Nothing is registered when any declaration is wrong: the error names the
// file and field. A name already in reg is an error too.
func Register(reg *toolkit.Registry, cfg Config, workspaceDir string, logger zerolog.Logger) ([]Registered, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := logger.With().Str("component", "script").Logger()
	var tools []toolkit.Tool
	var infos []Registered
	add := func(t toolkit.Tool, origin Origin, example JSONText) {
		ex, _ := exampleArgs(example, t.Schema)
		tools = append(tools, t)
		infos = append(infos, Registered{
			Name: t.Name, Source: t.Source, Origin: origin, ReadOnly: t.ReadOnly, Concurrent: t.Concurrent, Example: ex,
		})
	}

	for _, spec := range cfg.Script.Tools {
		origin := Origin{Trusted: true}
		t, err := NewScriptTool(spec, origin, workspaceDir, cfg.Sandbox, log)
		if err != nil {
			return nil, err
		}
		add(t, origin, spec.Example)
	}

	loaded := map[string]bool{}
	for i, ref := range cfg.Script.Manifests {
		files, err := manifestFiles(ref.Path, workspaceDir)
		if err != nil {
			return nil, &ConfigError{Field: fmt.Sprintf("script.manifests[%d].path", i), Problem: err.Error()}
		}
		for _, file := range files {
			if loaded[file] {
				continue
			}
			loaded[file] = true
			inWS := insideDir(file, workspaceDir)
			if ref.Trusted && inWS {
				log.Warn().Str("manifest", file).
					Msg("script manifest lies in the workspace: trusted is ignored, its tools always need approval")
			}
			m, err := LoadManifest(file, ref.Trusted && !inWS)
			if err != nil {
				return nil, err
			}
			for _, claim := range m.Ignored {
				log.Warn().Str("manifest", m.Path).Str("claim", claim).
					Msg("script manifest is not trusted: its claim is ignored, its tools need approval")
			}
			origin := Origin{Path: m.Path, Trusted: m.Trusted, InWorkspace: inWS}
			for _, spec := range m.Tools {
				t, err := NewScriptTool(spec, origin, workspaceDir, cfg.Sandbox, log)
				if err != nil {
					return nil, err
				}
				add(t, origin, spec.Example)
			}
		}
	}

	for _, spec := range cfg.Ext.Tools {
		t, err := NewExtTool(spec, log)
		if err != nil {
			return nil, err
		}
		add(t, Origin{Trusted: true}, spec.Example)
	}

	seen := map[string]Origin{}
	for i, t := range tools {
		if prev, dup := seen[t.Name]; dup {
			return nil, fmt.Errorf("script: tool %s is declared twice: in %s and in %s", t.Name, prev, infos[i].Origin)
		}
		seen[t.Name] = infos[i].Origin
		if _, exists := reg.Lookup(t.Name); exists {
			return nil, fmt.Errorf("script: tool %s (from %s) is already registered", t.Name, infos[i].Origin)
		}
	}
	for i, t := range tools {
		if err := reg.Replace(t); err != nil {
			for _, done := range tools[:i] {
				reg.Remove(done.Name)
			}
			return nil, fmt.Errorf("script: registering %s from %s: %w", t.Name, infos[i].Origin, err)
		}
		info := infos[i]
		log.Info().Str("tool", info.Name).Str("origin", info.Origin.String()).Bool("read_only", info.ReadOnly).
			Bool("concurrent", info.Concurrent).Msg("tool registered")
	}
	return infos, nil
}

// manifestFiles expands a [[script.manifests]] path: relative to the
// workspace, a glob matches any number of files (sorted), a plain path must
// exist.
func manifestFiles(pattern, workspaceDir string) ([]string, error) {
	if !filepath.IsAbs(pattern) && workspaceDir != "" {
		pattern = filepath.Join(workspaceDir, pattern)
	}
	abs, err := filepath.Abs(pattern)
	if err != nil {
		return nil, err
	}
	if !hasMeta(abs) {
		if _, err := os.Stat(abs); err != nil {
			return nil, err
		}
		return []string{abs}, nil
	}
	files, err := filepath.Glob(abs)
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	return files, nil
}

// hasMeta reports whether path holds a glob metacharacter.
func hasMeta(path string) bool {
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}
