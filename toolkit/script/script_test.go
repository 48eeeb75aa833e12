package script

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// regexp2's match-timeout clock stops itself ~1 s after the last match.
		goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}

// writeFile writes a file (executable when mode says so).
func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// call parses args, validates them against the tool's schema as the
// dispatcher does, and runs the handler under the tool's timeout.
func call(t *testing.T, ctx context.Context, reg *toolkit.Registry, name, args string) (string, error) {
	t.Helper()
	tool, ok := reg.Lookup(name)
	if !ok {
		t.Fatalf("tool %s is not registered", name)
	}
	a, err := toolkit.ParseArgs(args, toolkit.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sch, err := reg.Schemas.Compile(tool.Schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(a.Value); err != nil {
		t.Fatalf("arguments %s: %v", args, err)
	}
	ctx, cancel := context.WithTimeout(ctx, tool.EffectiveTimeout())
	defer cancel()
	res, err := tool.Handler(ctx, &toolkit.Call{ID: "call-7", Name: name, Args: a, Emit: func(string) {}})
	return res.Content, err
}

// toolsManifest is an operator manifest of shell-script tools next to it.
const toolsManifest = `
[[tools]]
name = "echo_args"
description = "Shows the arguments it got on stdin."
command = ["./echo_args.sh"]
concurrent = true
read_only = true
example = { b = 2, a = "x" }
[tools.schema]
type = "object"
properties = { a = { type = "string" }, b = { type = "integer" } }
required = ["a"]
additionalProperties = false

[[tools]]
name = "fail"
description = "Fails with exit code 3."
command = ["./fail.sh"]
schema = '{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}'

[[tools]]
name = "hang"
description = "Starts a background child and sleeps."
command = ["./hang.sh"]
timeout = "300ms"
env = { PIDFILE = "PIDFILE_PLACEHOLDER" }

[[tools]]
name = "env"
description = "Prints its environment."
command = ["/usr/bin/env"]
`

const echoArgs = `#!/bin/sh
input=$(cat)
printf 'args=%s tool=%s call=%s\n' "$input" "$TOOLDISPATCH_TOOL" "$TOOLDISPATCH_CALL_ID"
`

const failScript = `#!/bin/sh
echo "partial output"
echo "bad input: need a name" >&2
exit 3
`

const hangScript = `#!/bin/sh
sleep 30 &
echo $! > "$PIDFILE"
sleep 30
`

// setup writes the tools manifest outside the workspace and registers it
// as trusted.
func setup(t *testing.T) (reg *toolkit.Registry, infos []Registered, pidFile string) {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	toolsDir := filepath.Join(base, "operator-tools")
	pidFile = filepath.Join(base, "child.pid")
	writeFile(t, filepath.Join(ws, "README"), "workspace\n", 0o644)
	writeFile(t, filepath.Join(toolsDir, "tools.toml"), strings.ReplaceAll(toolsManifest, "PIDFILE_PLACEHOLDER", pidFile), 0o644)
	writeFile(t, filepath.Join(toolsDir, "echo_args.sh"), echoArgs, 0o755)
	writeFile(t, filepath.Join(toolsDir, "fail.sh"), failScript, 0o755)
	writeFile(t, filepath.Join(toolsDir, "hang.sh"), hangScript, 0o755)
	reg = toolkit.NewRegistry()
	cfg := Config{Script: ScriptConfig{Manifests: []ManifestRef{{Path: filepath.Join(toolsDir, "tools.toml"), Trusted: true}}}}
	infos, err := Register(reg, cfg, ws, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return reg, infos, pidFile
}

func TestScriptTools(t *testing.T) {
	t.Setenv("TOOLDISPATCH_TEST_SECRET", "do-not-leak")
	reg, infos, pidFile := setup(t)

	t.Run("registered with their flags and origin", func(t *testing.T) {
		if len(infos) != 4 {
			t.Fatalf("registered %d tools, want 4", len(infos))
		}
		echo := infos[0]
		if echo.Name != "script_echo_args" || !echo.ReadOnly || !echo.Concurrent || echo.Source != toolkit.SourceScript ||
			!echo.Origin.Trusted || echo.Origin.InWorkspace || !strings.HasSuffix(echo.Origin.Path, "operator-tools/tools.toml") {
			t.Errorf("echo_args registered as %+v", echo)
		}
		if string(echo.Example) != `{"a":"x","b":2}` {
			t.Errorf("example %s, want the canonical form", echo.Example)
		}
		fail, _ := reg.Lookup("script_fail")
		if fail.Concurrent || fail.ReadOnly {
			t.Errorf("script_fail concurrent %v read-only %v; want false, false", fail.Concurrent, fail.ReadOnly)
		}
	})

	t.Run("canonical arguments on stdin, stdout is the result", func(t *testing.T) {
		got, err := call(t, context.Background(), reg, "script_echo_args", `{ "b": 2, "a": "x" }`)
		want := "args={\"a\":\"x\",\"b\":2} tool=script_echo_args call=call-7\n"
		if err != nil || got != want {
			t.Errorf("echo_args = %q, %v; want %q", got, err, want)
		}
	})

	t.Run("minimal environment", func(t *testing.T) {
		got, err := call(t, context.Background(), reg, "script_env", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, "do-not-leak") {
			t.Errorf("the parent's environment leaked into the script:\n%s", got)
		}
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
			names = append(names, strings.SplitN(line, "=", 2)[0])
		}
		want := []string{"HOME", "LANG", "PATH", "TOOLDISPATCH_CALL_ID", "TOOLDISPATCH_TOOL", "TOOLDISPATCH_WORKSPACE"}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("environment variables (-want +got):\n%s", diff)
		}
	})

	t.Run("non-zero exit is an error with the stderr tail", func(t *testing.T) {
		_, err := call(t, context.Background(), reg, "script_fail", `{}`)
		if err == nil || !strings.Contains(err.Error(), "script_fail failed with exit code 3") ||
			!strings.Contains(err.Error(), "bad input: need a name") {
			t.Errorf("fail: %v", err)
		}
	})

	t.Run("timeout kills the process group", func(t *testing.T) {
		began := time.Now()
		_, err := call(t, context.Background(), reg, "script_hang", `{}`)
		elapsed := time.Since(began)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "process group was killed") {
			t.Fatalf("hang: %v; want a deadline error saying the group was killed", err)
		}
		if elapsed > 3*time.Second {
			t.Errorf("the timed-out call returned after %s", elapsed)
		}
		data, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		child, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		if processAlive(child) {
			t.Errorf("the script's background child %d survived the timeout", child)
		}
	})

	t.Run("cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := call(t, ctx, reg, "script_echo_args", `{"a":"x"}`); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call: %v", err)
		}
	})

	t.Run("concurrent calls", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				got, err := call(t, context.Background(), reg, "script_echo_args", `{"a":"`+strconv.Itoa(i)+`"}`)
				if err == nil && !strings.Contains(got, `{"a":"`+strconv.Itoa(i)+`"}`) {
					err = errors.New("wrong output: " + got)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
	})
}

// processAlive reports whether pid runs (zombies do not count).
func processAlive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// claimingManifest claims everything a manifest cannot grant itself.
const claimingManifest = `
trusted = true

[[tools]]
name = "lint"
description = "Lints the repository."
command = ["./lint.sh"]
read_only = true
concurrent = true
`

func TestWorkspaceManifestIsNeverTrusted(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "repo")
	outside := filepath.Join(base, "operator")
	writeFile(t, filepath.Join(ws, "tools", "lint.toml"), claimingManifest, 0o644)
	writeFile(t, filepath.Join(ws, "tools", "lint.sh"), "#!/bin/sh\necho lint ok\n", 0o755)
	writeFile(t, filepath.Join(outside, "lint.toml"), claimingManifest, 0o644)
	writeFile(t, filepath.Join(outside, "lint.sh"), "#!/bin/sh\necho lint ok\n", 0o755)
	// A link in the workspace to an operator manifest is still the
	// repository's say.
	if err := os.Symlink(filepath.Join(outside, "lint.toml"), filepath.Join(ws, "linked.toml")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		ref         ManifestRef
		wantRO      bool
		wantTrusted bool
		wantInWS    bool
	}{
		{"repository manifest claiming trust", ManifestRef{Path: "tools/*.toml", Trusted: true}, false, false, true},
		{"link in the workspace", ManifestRef{Path: "linked.toml", Trusted: true}, false, false, true},
		{"operator manifest not marked trusted", ManifestRef{Path: filepath.Join(outside, "lint.toml")}, false, false, false},
		{"operator manifest marked trusted", ManifestRef{Path: filepath.Join(outside, "lint.toml"), Trusted: true}, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &strings.Builder{}
			reg := toolkit.NewRegistry()
			infos, err := Register(reg, Config{Script: ScriptConfig{Manifests: []ManifestRef{tt.ref}}}, ws, zerolog.New(logs))
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != 1 {
				t.Fatalf("registered %+v", infos)
			}
			info := infos[0]
			tool, _ := reg.Lookup("script_lint")
			if tool.IsReadOnly(toolkit.Args{}) != tt.wantRO || info.ReadOnly != tt.wantRO {
				t.Errorf("read-only %v, want %v", tool.IsReadOnly(toolkit.Args{}), tt.wantRO)
			}
			if info.Origin.Trusted != tt.wantTrusted || info.Origin.InWorkspace != tt.wantInWS || info.Origin.Path == "" {
				t.Errorf("origin %+v; want trusted %v, in workspace %v, with its path", info.Origin, tt.wantTrusted, tt.wantInWS)
			}
			if !tool.Concurrent {
				t.Error("the concurrent flag is the manifest's to set, even untrusted")
			}
			if !strings.Contains(logs.String(), `"claim":"trusted"`) {
				t.Errorf("the ignored trusted claim was not logged:\n%s", logs.String())
			}
			if !tt.wantRO && !strings.Contains(logs.String(), `"claim":"tools[0].read_only"`) {
				t.Errorf("the ignored read_only claim was not logged:\n%s", logs.String())
			}
			if got, err := call(t, context.Background(), reg, "script_lint", `{}`); err != nil || got != "lint ok\n" {
				t.Errorf("lint = %q, %v", got, err)
			}
		})
	}
}

func TestLoadManifestErrors(t *testing.T) {
	tests := []struct {
		name, manifest, want string
	}{
		{"unknown key", "[[tools]]\nname = \"a\"\ncommand = [\"x\"]\nreadonly = true\n", "tools.readonly: unknown key"},
		{"no tools", "trusted = false\n", "tools: the manifest declares no [[tools]]"},
		{"missing command", "[[tools]]\nname = \"a\"\n", "tools[0].command: give the program"},
		{"bad name", "[[tools]]\nname = \"a b\"\ncommand = [\"x\"]\n", "tools[0].name: \"a b\" may hold only"},
		{"schema not JSON", "[[tools]]\nname = \"a\"\ncommand = [\"x\"]\nschema = \"{nope\"\n", "tools[0].schema: not a JSON object"},
		{"schema not an object schema", "[[tools]]\nname = \"a\"\ncommand = [\"x\"]\nschema = '{\"type\":\"string\"}'\n", "tools[0].schema: the arguments schema must have"},
		{"example off schema", "[[tools]]\nname = \"a\"\ncommand = [\"x\"]\nschema = '{\"type\":\"object\",\"required\":[\"q\"]}'\nexample = '{}'\n",
			"tools[0].example: does not match the schema: invalid arguments: missing required field \"q\""},
		{"duplicate", "[[tools]]\nname = \"a\"\ncommand = [\"x\"]\n[[tools]]\nname = \"a\"\ncommand = [\"y\"]\n", "tools[1].name: \"a\" is already declared by tools[0]"},
		{"bad duration", "[[tools]]\nname = \"a\"\ncommand = [\"x\"]\ntimeout = \"soon\"\n", "soon"},
		{"syntax", "[[tools]\n", "line 2"},
		{"schema of wrong TOML type", "[[tools]]\nname = \"a\"\ncommand = [\"x\"]\nschema = 3\n", "give a JSON string or a table, not int64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.toml")
			writeFile(t, path, tt.manifest, 0o644)
			_, err := LoadManifest(path, true)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadManifest: %v; want an error naming %s and %q", err, path, tt.want)
			}
		})
	}
}

func TestConfigFromTOML(t *testing.T) {
	dir := t.TempDir()
	file := `
[[script.manifests]]
path = "tools/*.toml"

[[script.tools]]
name = "wordcount"
description = "Count words."
command = ["wc", "-w"]
timeout = "10s"
concurrent = true
read_only = true

[[ext.tools]]
name = "translate"
url = "https://translate.internal/v1/tool"
headers = { Authorization = "Bearer abc" }
timeout = "5s"
[ext.tools.schema]
type = "object"
properties = { text = { type = "string" } }
`
	// The configuration file's top-level struct embeds Config.
	var top struct {
		Config
		Other string `toml:"other"`
	}
	md, err := toml.Decode(file, &top)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) != 0 {
		t.Fatalf("undecoded keys: %v", und)
	}
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := top.Script.Tools[0]; got.Timeout != 10*time.Second || !got.Concurrent || !got.ReadOnly || got.Command[1] != "-w" {
		t.Errorf("script tool decoded as %+v", got)
	}
	if got := top.Ext.Tools[0]; got.Headers["Authorization"] != "Bearer abc" || got.Timeout != 5*time.Second {
		t.Errorf("ext tool decoded as %+v", got)
	}
	reg := toolkit.NewRegistry()
	infos, err := Register(reg, top.Config, dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range infos {
		names = append(names, in.Name)
	}
	if diff := cmp.Diff([]string{"script_wordcount", "ext_translate"}, names); diff != "" {
		t.Errorf("registered (-want +got):\n%s", diff)
	}
	if got, err := call(t, context.Background(), reg, "script_wordcount", `{"text":"ignored"}`); err != nil || strings.TrimSpace(got) != "1" {
		t.Errorf("wordcount = %q, %v", got, err)
	}
}

func TestConfigValidate(t *testing.T) {
	okTool := ToolSpec{Name: "a", Command: []string{"x"}}
	okExt := ExtSpec{Name: "e", URL: "http://127.0.0.1:1/x"}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty manifest path", Config{Script: ScriptConfig{Manifests: []ManifestRef{{}}}}, "script: script.manifests[0].path: must not be empty"},
		{"bad glob", Config{Script: ScriptConfig{Manifests: []ManifestRef{{Path: "[x"}}}}, "script.manifests[0].path: bad glob"},
		{"tool name", Config{Script: ScriptConfig{Tools: []ToolSpec{okTool, {Name: "b!", Command: []string{"x"}}}}}, "script.tools[1].name"},
		{"tool name too long", Config{Script: ScriptConfig{Tools: []ToolSpec{{Name: strings.Repeat("n", 58), Command: []string{"x"}}}}}, "script.tools[0].name: \"nnn"},
		{"duplicate tool", Config{Script: ScriptConfig{Tools: []ToolSpec{okTool, okTool}}}, "script.tools[1].name: \"a\" is already declared by script.tools[0]"},
		{"negative timeout", Config{Script: ScriptConfig{Tools: []ToolSpec{{Name: "a", Command: []string{"x"}, Timeout: -1}}}}, "script.tools[0].timeout"},
		{"schema not JSON", Config{Script: ScriptConfig{Tools: []ToolSpec{{Name: "a", Command: []string{"x"}, Schema: "[1]"}}}}, "script.tools[0].schema: not a JSON object"},
		{"ext url", Config{Ext: ExtConfig{Tools: []ExtSpec{okExt, {Name: "f", URL: "file:///etc/passwd"}}}}, "ext.tools[1].url"},
		{"ext method", Config{Ext: ExtConfig{Tools: []ExtSpec{{Name: "e", URL: okExt.URL, Method: "GET"}}}}, "ext.tools[0].method: \"GET\" is not supported"},
		{"ext header", Config{Ext: ExtConfig{Tools: []ExtSpec{{Name: "e", URL: okExt.URL, Headers: map[string]string{"X": "a\nb"}}}}}, "ext.tools[0].headers"},
		{"ext max_output", Config{Ext: ExtConfig{Tools: []ExtSpec{{Name: "e", URL: okExt.URL, MaxOutput: 1}}}}, "ext.tools[0].max_output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v; want %q", err, tt.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error type %T, want *ConfigError", err)
			}
		})
	}
}

func TestRegisterRefusesClashes(t *testing.T) {
	reg := toolkit.NewRegistry()
	reg.Register(toolkit.Tool{Name: "script_a", Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) { return toolkit.Result{}, nil }})
	cfg := Config{Script: ScriptConfig{Tools: []ToolSpec{{Name: "a", Command: []string{"true"}}, {Name: "b", Command: []string{"true"}}}}}
	if _, err := Register(reg, cfg, t.TempDir(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "script_a (from the configuration) is already registered") {
		t.Fatalf("Register over an existing name: %v", err)
	}
	if _, ok := reg.Lookup("script_b"); ok {
		t.Error("script_b was registered although Register failed")
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "m.toml"), "[[tools]]\nname = \"c\"\ncommand = [\"true\"]\n", 0o644)
	cfg = Config{Script: ScriptConfig{
		Tools:     []ToolSpec{{Name: "c", Command: []string{"true"}}},
		Manifests: []ManifestRef{{Path: filepath.Join(dir, "m.toml")}},
	}}
	if _, err := Register(toolkit.NewRegistry(), cfg, t.TempDir(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "script_c is declared twice") {
		t.Fatalf("Register of a name declared twice: %v", err)
	}
	cfg = Config{Script: ScriptConfig{Manifests: []ManifestRef{{Path: filepath.Join(dir, "missing.toml")}}}}
	if _, err := Register(toolkit.NewRegistry(), cfg, t.TempDir(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "script.manifests[0].path") {
		t.Fatalf("Register of a missing manifest: %v", err)
	}
}
