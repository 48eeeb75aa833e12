package sdktypes

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Prelude imports the SDK types the checks name; every file Check writes
// starts with it. Extra<T, E> is a provider's type plus the extra
// properties tooldispatch documents for a default shape: an object
// literal of that type may carry nothing else (excess properties are
// errors), and an extra that clashes with a provider's own property of
// the same name is an error too.
const Prelude = `import type { ChatCompletionToolMessageParam, ChatCompletionFunctionTool } from "openai/resources/chat/completions";
import type { ResponseInputItem, FunctionTool as ResponsesFunctionTool } from "openai/resources/responses/responses";
import type { MessageParam, ToolResultBlockParam, Tool as AnthropicTool } from "@anthropic-ai/sdk/resources/messages";
import { Type, type Content, type Part, type Tool as GeminiTool } from "@google/genai";
type Extra<T, E> = T & E;
`

// tsconfig is the compiler configuration of a check: strict, no output.
const tsconfig = `{"compilerOptions":{"strict":true,"noEmit":true,"skipLibCheck":true,"module":"nodenext",` +
	`"moduleResolution":"nodenext","target":"es2022","types":[],"noUnusedLocals":false},"include":["*.ts"]}`

// packages are the SDKs a check needs installed.
var packages = []string{"openai", "@anthropic-ai/sdk", "@google/genai", "typescript"}

// Dir returns this package's folder with its npm packages installed. When
// node_modules is missing it runs `npm ci` there, under a lock so that
// test binaries running at once install once. It skips t when node is
// not installed, or when npm is not and nothing is installed.
func Dir(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the type checks against the providers' TypeScript SDKs need Node.js and npm")
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the sdktypes package's folder")
	}
	dir := filepath.Dir(file)
	if installed(dir) {
		return dir
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skipf("npm is not installed and %s has no node_modules: run `npm ci` there to enable the SDK type checks", dir)
	}
	unlock, err := lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if !installed(dir) {
		cmd := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil || !installed(dir) {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return dir
}

// installed reports whether every package is in dir's node_modules.
func installed(dir string) bool {
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			return false
		}
	}
	return true
}

// lock takes an exclusive lock for installing into dir, in the temporary
// directory (the source tree stays clean).
func lock(dir string) (func(), error) {
	sum := sha256.Sum256([]byte(dir))
	path := filepath.Join(os.TempDir(), "tooldispatch-sdktypes-"+hex.EncodeToString(sum[:8])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// ErrTypes: tsc found type errors. The error's text holds its output.
var ErrTypes = errors.New("sdktypes: the shapes do not type-check")

// Check type-checks files (name → TypeScript source, each after Prelude)
// with tsc --noEmit --strict in a fresh folder of t's and returns tsc's
// output; the error wraps ErrTypes when tsc reports errors.
func Check(t testing.TB, files map[string]string) (string, error) {
	t.Helper()
	dir := Dir(t)
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tsconfig.json", tsconfig)
	write("package.json", `{"private":true}`)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		write(name, Prelude+files[name])
	}
	cmd := exec.Command("node", filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", work)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), nil
	case errors.As(err, &exit):
		return string(out), fmt.Errorf("%w:\n%s", ErrTypes, out)
	}
	return string(out), fmt.Errorf("running tsc: %w\n%s", err, out)
}

// Literal is v (JSON-encodable) as a TypeScript expression: JSON, which
// is an object or array literal, indented.
func Literal(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("/* %v */ undefined", err)
	}
	return string(b)
}

// GeminiLiteral is Literal for a Gemini shape: a string value of a "type"
// key is written as the SDK's enum member, Type["STRING"], which a literal
// string is not assignable to (and a misspelt member is an error).
func GeminiLiteral(v any) string {
	var b bytes.Buffer
	writeGemini(&b, toPlain(v), "")
	return b.String()
}

// toPlain decodes v's JSON into maps, slices and scalars.
func toPlain(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil
	}
	return out
}

func writeGemini(b *bytes.Buffer, v any, indent string) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			kb, _ := json.Marshal(k)
			b.WriteString("\n" + indent + "  ")
			b.Write(kb)
			b.WriteString(": ")
			if s, ok := t[k].(string); ok && k == "type" {
				sb, _ := json.Marshal(s)
				b.WriteString("Type[" + string(sb) + "]")
				continue
			}
			writeGemini(b, t[k], indent+"  ")
		}
		b.WriteString("\n" + indent + "}")
	case []any:
		b.WriteString("[")
		for i, x := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writeGemini(b, x, indent)
		}
		b.WriteString("]")
	default:
		jb, _ := json.Marshal(t)
		b.Write(jb)
	}
}

// Declare is a TypeScript declaration of a constant name of type typ
// holding the expression lit.
func Declare(name, typ, lit string) string {
	return fmt.Sprintf("export const %s: %s = %s;\n", name, typ, strings.TrimSpace(lit))
}

// The SDK types of the shapes tooldispatch emits, for Declare. The default
// shapes are the provider's type plus exactly the extra properties the
// README documents (Extra).
const (
	ChatToolMessage       = "Extra<ChatCompletionToolMessageParam, {name: string; status: string; injected?: string; parts?: Array<{kind: string; mime_type: string; data: string; uri?: string}>}>"
	ChatToolMessageStrict = "ChatCompletionToolMessageParam"
	ResponsesOutput       = "Extra<ResponseInputItem.FunctionCallOutput, {tooldispatch: {status: string; injected?: string}}>"
	ResponsesOutputStrict = "ResponseInputItem.FunctionCallOutput"
	ResponsesInputItem    = "ResponseInputItem"
	AnthropicUserMessage  = "MessageParam"
	AnthropicToolResult   = "ToolResultBlockParam"
	GeminiContent         = "Content"
	GeminiPart            = "Part"
	ChatToolsArray        = "ChatCompletionFunctionTool[]"
	ResponsesToolsArray   = "ResponsesFunctionTool[]"
	AnthropicToolsArray   = "AnthropicTool[]"
	GeminiToolsArray      = "GeminiTool[]"
)
