package script

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// Manifest is a loaded manifest file: a TOML file of script tools.
//
//	# tools.toml
//	[[tools]]
//	name        = "wordcount"
//	description = "Count the words of a text."
//	command     = ["./wordcount.sh"]        # relative to this file's directory
//	timeout     = "5s"
//	concurrent  = true
//	read_only   = true                      # honoured only when trusted
//	example     = { text = "one two three" }
//	[tools.schema]
//	type = "object"
//	required = ["text"]
//	properties = { text = { type = "string" } }
//
// A top-level `trusted = true` may be written but is never honoured: trust
// comes from the operator's configuration only.
type Manifest struct {
	// Path is the file's absolute path.
	Path string
	// Trusted tells whether the read_only flags of its tools are honoured.
	Trusted bool
	// Tools are the declared tools; ReadOnly is already cleared when the
	// manifest is not trusted.
	Tools []ToolSpec
	// Ignored lists the claims that were ignored because the manifest is
	// not trusted (for example `tools[0].read_only`), and a top-level
	// `trusted` key.
	Ignored []string
}

// manifestFile is the layout of a manifest file.
type manifestFile struct {
	// Trusted is a claim the file makes about itself; never honoured.
	Trusted bool       `toml:"trusted"`
	Tools   []ToolSpec `toml:"tools"`
}

// LoadManifest reads and checks the manifest at path. trusted is the
// caller's decision (the operator's configuration, for a manifest outside
// the workspace): when false, every read_only the manifest declares is
// ignored. Unknown keys are errors, so a misspelt field does not pass
// silently. A mistake is a *ConfigError naming the file and the field.
func LoadManifest(path string, trusted bool) (*Manifest, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("script: manifest %s: %w", path, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("script: manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("script: manifest: %w", err)
	}
	if len(data) > maxManifestSize {
		return nil, &ConfigError{File: abs, Field: "(file)", Problem: fmt.Sprintf("larger than %d bytes", maxManifestSize)}
	}

	var mf manifestFile
	md, err := toml.Decode(string(data), &mf)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ConfigError{File: abs, Field: fmt.Sprintf("line %d", pe.Position.Line), Problem: pe.Message}
		}
		return nil, &ConfigError{File: abs, Field: "(file)", Problem: err.Error()}
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, &ConfigError{File: abs, Field: und[0].String(), Problem: "unknown key"}
	}
	if len(mf.Tools) == 0 {
		return nil, &ConfigError{File: abs, Field: "tools", Problem: "the manifest declares no [[tools]]"}
	}

	m := &Manifest{Path: abs, Trusted: trusted, Tools: mf.Tools}
	if mf.Trusted {
		m.Ignored = append(m.Ignored, "trusted")
	}
	seen := map[string]int{}
	for i := range m.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		if err := m.Tools[i].validate(field); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				ce.File = abs
			}
			return nil, err
		}
		if j, dup := seen[m.Tools[i].Name]; dup {
			return nil, &ConfigError{File: abs, Field: field + ".name", Problem: fmt.Sprintf("%q is already declared by tools[%d]", m.Tools[i].Name, j)}
		}
		seen[m.Tools[i].Name] = i
		if !trusted && m.Tools[i].ReadOnly {
			m.Tools[i].ReadOnly = false
			m.Ignored = append(m.Ignored, field+".read_only")
		}
	}
	return m, nil
}

// insideDir reports whether path lies in dir, comparing both as written
// (made absolute) and with symbolic links resolved: a link in the workspace
// pointing out of it, or a link outside pointing in, counts as inside.
func insideDir(path, dir string) bool {
	if dir == "" {
		return false
	}
	paths := variants(path)
	dirs := variants(dir)
	for _, p := range paths {
		for _, d := range dirs {
			rel, err := filepath.Rel(d, p)
			if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return true
			}
		}
	}
	return false
}

// variants returns p made absolute and, when it resolves, with symbolic
// links evaluated.
func variants(p string) []string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil
	}
	out := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		out = append(out, real)
	}
	return out
}
