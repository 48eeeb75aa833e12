package script

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
)

// Name prefixes of the tools this package builds.
const (
	ScriptPrefix = "script_"
	ExtPrefix    = "ext_"
)

// Size limits.
const (
	// DefaultMaxOutput is how much of a script's stdout, or of an
	// extension's response body, becomes the result.
	DefaultMaxOutput = 256 << 10
	// minOutput is the smallest accepted max_output.
	minOutput = 256
	// maxManifestSize is the largest manifest file read.
	maxManifestSize = 1 << 20
)

// shortName is what a declared name may look like (before its prefix).
var shortName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Config is the operator's configuration of script and extension tools: the
// [script] and [ext] tables of the configuration file. Embed it in the
// file's top-level struct (its fields carry the table names).
//
//	[[script.manifests]]
//	path    = "/etc/tooldispatch/tools.toml"
//	trusted = true
//
//	[[script.manifests]]
//	path = "tools/*.toml"          # shipped by the repository: never trusted
//
//	[[script.tools]]
//	name        = "wordcount"
//	description = "Count the words of a text."
//	schema      = '{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}'
//	command     = ["/usr/local/bin/wordcount"]
//	timeout     = "10s"
//	concurrent  = true
//	read_only   = true
//
//	[[ext.tools]]
//	name    = "translate"
//	url     = "https://translate.internal/v1/tool"
//	headers = { Authorization = "Bearer …" }
//	schema  = { type = "object", properties = { text = { type = "string" } } }
type Config struct {
	Script ScriptConfig `toml:"script"`
	Ext    ExtConfig    `toml:"ext"`
	// Sandbox confines the programs of script tools (see package
	// sandbox); it is not part of the file. When nil, they run with every
	// right of the embedding process.
	Sandbox *sandbox.Sandbox `toml:"-"`
}

// ScriptConfig is the [script] table.
type ScriptConfig struct {
	// Manifests lists manifest files to load ([[script.manifests]]).
	Manifests []ManifestRef `toml:"manifests"`
	// Tools declares script tools inline ([[script.tools]]); they are as
	// trusted as the configuration file itself.
	Tools []ToolSpec `toml:"tools"`
}

// ManifestRef names manifest files.
type ManifestRef struct {
	// Path is a manifest file, absolute or relative to the workspace, and
	// may be a glob (tools/*.toml). A pattern matching no file is not an
	// error; a plain path that does not exist is.
	Path string `toml:"path"`
	// Trusted honours the read_only flags of the manifest's tools. It has
	// no effect on a manifest inside the workspace: the repository being
	// worked on cannot vouch for itself.
	Trusted bool `toml:"trusted"`
}

// ToolSpec declares one script tool, inline in the configuration or in a
// manifest's [[tools]].
type ToolSpec struct {
	// Name is registered with the prefix script_ (name "wc" gives the tool
	// script_wc); letters, digits, "_" and "-", at most 57 characters.
	Name string `toml:"name"`
	// Description tells the model what the tool does.
	Description string `toml:"description"`
	// Schema is the JSON Schema of the arguments: a JSON string or a TOML
	// table. Without $schema it is 2020-12; draft-07 works too. Default:
	// any object.
	Schema JSONText `toml:"schema"`
	// Command is the program and its arguments, run without a shell, e.g.
	// ["python3", "wc.py"]. A relative program path with a slash
	// ("./wc.sh") is relative to the manifest's directory (that of the
	// file a link points to), or to the workspace for an inline tool;
	// other arguments are passed as written. The program
	// reads the canonical arguments (JSON) on stdin and writes the result
	// on stdout; a non-zero exit is an error, reported with the tail of
	// stderr.
	Command []string `toml:"command"`
	// Dir is the working directory, relative to the manifest's directory
	// (the workspace for an inline tool). Default: the workspace, or the
	// manifest's directory when there is no workspace.
	Dir string `toml:"dir"`
	// Env adds variables to the program's environment, which otherwise
	// holds only PATH, HOME and LANG.
	Env map[string]string `toml:"env"`
	// Timeout of one call, as a duration string ("30s"); zero means the
	// default of 60 s. On timeout or cancellation the whole process group
	// is killed.
	Timeout time.Duration `toml:"timeout"`
	// Concurrent lets calls run in parallel with other concurrent calls;
	// otherwise each call runs alone, in call order.
	Concurrent bool `toml:"concurrent"`
	// ReadOnly spares calls the confirm gate. Honoured only for inline tools
	// and manifests the operator trusts outside the workspace.
	ReadOnly bool `toml:"read_only"`
	// MaxOutput caps the result (stdout) in bytes; zero means
	// DefaultMaxOutput.
	MaxOutput int `toml:"max_output"`
	// Example is an example call's arguments (a JSON string or a TOML
	// table) for test_tool; it must match Schema.
	Example JSONText `toml:"example"`
}

// ExtConfig is the [ext] table.
type ExtConfig struct {
	// Tools declares extension tools ([[ext.tools]]).
	Tools []ExtSpec `toml:"tools"`
}

// ExtSpec declares one extension tool: an HTTP endpoint that receives the
// canonical arguments as a JSON POST body and answers with the result.
type ExtSpec struct {
	// Name is registered with the prefix ext_; letters, digits, "_" and
	// "-", at most 60 characters.
	Name string `toml:"name"`
	// Description tells the model what the tool does.
	Description string `toml:"description"`
	// Schema is the JSON Schema of the arguments (JSON string or TOML table).
	Schema JSONText `toml:"schema"`
	// URL is the http:// or https:// endpoint.
	URL string `toml:"url"`
	// Method is the HTTP method; only POST (the default) is supported.
	Method string `toml:"method"`
	// Headers are sent with every request (for example Authorization);
	// their values are never logged.
	Headers map[string]string `toml:"headers"`
	// Timeout of one call ("30s"); zero means the default of 60 s.
	Timeout time.Duration `toml:"timeout"`
	// Concurrent lets calls run in parallel with other concurrent calls.
	Concurrent bool `toml:"concurrent"`
	// ReadOnly spares calls the confirm gate.
	ReadOnly bool `toml:"read_only"`
	// MaxOutput caps the response body kept as the result, in bytes; zero
	// means DefaultMaxOutput.
	MaxOutput int `toml:"max_output"`
	// Example is an example call's arguments for test_tool.
	Example JSONText `toml:"example"`
}

// ConfigError is a configuration mistake. Field names the bad field as it
// is written in the file (script.tools[1].command, ext.tools[0].url,
// tools[2].schema inside a manifest); File is the manifest, if any.
type ConfigError struct {
	File    string
	Field   string
	Problem string
}

// Error returns "script: [file: ]field: problem".
func (e *ConfigError) Error() string {
	if e.File != "" {
		return "script: " + e.File + ": " + e.Field + ": " + e.Problem
	}
	return "script: " + e.Field + ": " + e.Problem
}

// Validate reports the first bad field, named as in the file.
func (c Config) Validate() error {
	for i, m := range c.Script.Manifests {
		if strings.TrimSpace(m.Path) == "" {
			return &ConfigError{Field: fmt.Sprintf("script.manifests[%d].path", i), Problem: "must not be empty"}
		}
		if _, err := filepath.Match(m.Path, ""); err != nil {
			return &ConfigError{Field: fmt.Sprintf("script.manifests[%d].path", i), Problem: "bad glob pattern: " + err.Error()}
		}
	}
	seen := map[string]string{}
	for i, s := range c.Script.Tools {
		field := fmt.Sprintf("script.tools[%d]", i)
		if err := s.validate(field); err != nil {
			return err
		}
		if prev, dup := seen[ScriptPrefix+s.Name]; dup {
			return &ConfigError{Field: field + ".name", Problem: fmt.Sprintf("%q is already declared by %s", s.Name, prev)}
		}
		seen[ScriptPrefix+s.Name] = field
	}
	for i, e := range c.Ext.Tools {
		field := fmt.Sprintf("ext.tools[%d]", i)
		if err := e.validate(field); err != nil {
			return err
		}
		if prev, dup := seen[ExtPrefix+e.Name]; dup {
			return &ConfigError{Field: field + ".name", Problem: fmt.Sprintf("%q is already declared by %s", e.Name, prev)}
		}
		seen[ExtPrefix+e.Name] = field
	}
	return nil
}

// Validate reports the first bad field of one script tool, named relative
// to the tool (command, schema…).
func (s ToolSpec) Validate() error { return s.validate("") }

func (s ToolSpec) validate(at string) error {
	bad := func(field, problem string) error { return &ConfigError{Field: join(at, field), Problem: problem} }
	if err := checkName(s.Name, ScriptPrefix); err != nil {
		return bad("name", err.Error())
	}
	if len(s.Command) == 0 || strings.TrimSpace(s.Command[0]) == "" {
		return bad("command", "give the program and its arguments, e.g. [\"python3\", \"tool.py\"]")
	}
	if s.Timeout < 0 {
		return bad("timeout", "must not be negative")
	}
	if s.MaxOutput < 0 || (s.MaxOutput > 0 && s.MaxOutput < minOutput) {
		return bad("max_output", fmt.Sprintf("must be 0 (default) or at least %d", minOutput))
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("env", fmt.Sprintf("invalid variable name %q", k))
		}
	}
	schema, err := schemaJSON(s.Schema)
	if err != nil {
		return bad("schema", err.Error())
	}
	if _, err := exampleArgs(s.Example, schema); err != nil {
		return bad("example", err.Error())
	}
	return nil
}

// Validate reports the first bad field of one extension tool, named
// relative to the tool (url, schema…).
func (e ExtSpec) Validate() error { return e.validate("") }

func (e ExtSpec) validate(at string) error {
	bad := func(field, problem string) error { return &ConfigError{Field: join(at, field), Problem: problem} }
	if err := checkName(e.Name, ExtPrefix); err != nil {
		return bad("name", err.Error())
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("url", fmt.Sprintf("%q is not an http:// or https:// URL", e.URL))
	}
	if e.Method != "" && !strings.EqualFold(e.Method, http.MethodPost) {
		return bad("method", fmt.Sprintf("%q is not supported: extension tools are called with POST", e.Method))
	}
	if e.Timeout < 0 {
		return bad("timeout", "must not be negative")
	}
	if e.MaxOutput < 0 || (e.MaxOutput > 0 && e.MaxOutput < minOutput) {
		return bad("max_output", fmt.Sprintf("must be 0 (default) or at least %d", minOutput))
	}
	for k, v := range e.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n\x00") {
			return bad("headers", fmt.Sprintf("invalid header name %q", k))
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return bad("headers", fmt.Sprintf("the value of %s holds a line break", k))
		}
	}
	schema, err := schemaJSON(e.Schema)
	if err != nil {
		return bad("schema", err.Error())
	}
	if _, err := exampleArgs(e.Example, schema); err != nil {
		return bad("example", err.Error())
	}
	return nil
}

func join(at, field string) string {
	if at == "" {
		return field
	}
	return at + "." + field
}

// checkName checks a declared name and the length of its full name.
func checkName(name, prefix string) error {
	switch {
	case name == "":
		return fmt.Errorf("must not be empty")
	case !shortName.MatchString(name):
		return fmt.Errorf("%q may hold only letters, digits, '_' and '-'", name)
	case len(prefix+name) > 64:
		return fmt.Errorf("%q is too long: %s%s must fit in 64 characters", name, prefix, name)
	}
	return nil
}

// JSONText is a JSON document. In TOML it is written either as a string
// holding JSON or as a table, which is converted to JSON.
type JSONText string

// UnmarshalTOML takes a string as it is and writes a table as JSON.
func (j *JSONText) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*j = JSONText(v)
		return nil
	case map[string]any:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("cannot be written as JSON: %w", err)
		}
		*j = JSONText(b)
		return nil
	}
	return fmt.Errorf("give a JSON string or a table, not %T", v)
}

// schemaJSON checks a declared schema: JSON, an object schema that
// compiles. Empty gives nil (the registry's default, any object).
func schemaJSON(text JSONText) (json.RawMessage, error) {
	if strings.TrimSpace(string(text)) == "" {
		return nil, nil
	}
	raw := []byte(text)
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, fmt.Errorf(`the arguments schema must have "type": "object", got %v`, t)
	}
	if _, err := toolkit.NewSchemaCache().Compile(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// exampleArgs turns a declared example into canonical arguments and
// checks them against schema; empty gives nil.
func exampleArgs(text JSONText, schema json.RawMessage) (json.RawMessage, error) {
	if strings.TrimSpace(string(text)) == "" {
		return nil, nil
	}
	args, err := toolkit.ParseArgs(string(text), toolkit.Limits{})
	if err != nil {
		return nil, err
	}
	if len(schema) > 0 {
		sch, err := toolkit.NewSchemaCache().Compile(schema)
		if err != nil {
			return nil, err
		}
		if err := sch.Validate(args.Value); err != nil {
			return nil, fmt.Errorf("does not match the schema: %w", err)
		}
	}
	return json.RawMessage(args.Canonical), nil
}
