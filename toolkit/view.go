package toolkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Tools-array policies: which tools a turn's tools array holds and how the
// model reaches the others. A turn's provider names one (ArrayPolicy).
const (
	// ArrayLazy: the array holds the core tools (ArrayTools), the run's
	// client tools and tools marked AlwaysInArray, with their schemas. Every
	// other tool is named with a one-line description in the turn-context
	// text; the model fetches its schema with find_tools and calls it
	// through run_tool, and a direct call of it comes back deferred.
	ArrayLazy = "lazy"
	// ArrayAll: the array holds every tool but run_tool. Only find_tools
	// and client tools start with their schemas fetched; the first call of
	// any other tool returns its schema (schema_returned) instead of running,
	// unless the turn's AutoLoadSchemas lets arguments that already validate
	// run at once.
	ArrayAll = "all"
)

// Provider names kept as documented aliases of the policies; any other
// provider name, and none, means ArrayLazy.
const (
	// ProviderClaudeCode is ArrayAll.
	ProviderClaudeCode = "claude-code"
	// ProviderOpenAI is ArrayLazy, the default.
	ProviderOpenAI = "openai"
)

// ArrayPolicy returns the tools-array policy a turn's provider selects:
// ArrayAll for "all" and "claude-code", ArrayLazy for anything else.
func ArrayPolicy(provider string) string {
	switch provider {
	case ArrayAll, ProviderClaudeCode:
		return ArrayAll
	}
	return ArrayLazy
}

// Names of the meta tools.
const (
	FindToolsName = "find_tools"
	RunToolName   = "run_tool"
)

// ErrToolCollision: a client tool and a registered tool of the same name would
// both be in the provider's tools array.
var ErrToolCollision = errors.New("toolkit: client tool name collides")

// ArrayTools are the core tools the ArrayLazy tools array holds (when
// registered), besides client tools and tools marked AlwaysInArray.
var ArrayTools = []string{FindToolsName, RunToolName, "reasoning_guide", "write_todo", "chat_history", "ask_user", "write_result"}

// FunctionTool is one entry of a tools array in the OpenAI function-tool shape.
type FunctionTool struct {
	Type     string       `json:"type"`
	Function FunctionSpec `json:"function"`
}

// FunctionSpec is the function part of a FunctionTool. Strict is set in
// ToolsOpenAIStrict only.
type FunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}

// View is the set of tools one run can see: the registry less the tools the
// run excludes, plus the run's client tools, as one provider gets them, in
// one tools format (WithFormat). Immutable after NewView; safe for
// concurrent use.
type View struct {
	Registry *Registry
	Provider string
	policy   string
	client   map[string]*Tool
	exclude  map[string]bool
	format   ToolsFormat
}

// NewView builds a run's view. A client tool may take the name of a
// registered tool that the provider's tools array does not carry (the
// client's wins for the run); where both would be in the array NewView
// fails with ErrToolCollision. Client tools must have a valid name; one whose schema does not compile is kept
// with its SchemaError set.
func NewView(reg *Registry, provider string, client []*Tool, exclude []string) (*View, error) {
	v := &View{Registry: reg, Provider: provider, policy: ArrayPolicy(provider)}
	for _, n := range exclude {
		if v.exclude == nil {
			v.exclude = map[string]bool{}
		}
		v.exclude[n] = true
	}
	for _, t := range client {
		if !validName.MatchString(t.Name) {
			return nil, fmt.Errorf("client tool name %q is not valid (letters, digits, _ and -, at most 64)", t.Name)
		}
		if rt, ok := reg.Lookup(t.Name); ok && !v.exclude[t.Name] && registeredInArray(v.policy, rt) {
			return nil, fmt.Errorf("%w: client tool %q has the name of a built-in tool in the tools array of provider %q; rename the client tool or exclude the built-in", ErrToolCollision, t.Name, provider)
		}
		if v.client == nil {
			v.client = map[string]*Tool{}
		}
		if _, dup := v.client[t.Name]; dup {
			return nil, fmt.Errorf("client tool %q declared twice", t.Name)
		}
		if len(t.Schema) == 0 {
			t.Schema = []byte(`{"type":"object"}`)
		}
		if _, err := reg.Schemas.Compile(t.Schema); err != nil {
			// Kept, with the reason: its calls end in error and the rest of
			// the turn runs.
			t.SchemaError = SchemaErrorText(err)
		}
		t.Source = SourceClient
		v.client[t.Name] = t
	}
	return v, nil
}

// ClientToolFromSpec makes a client tool from its declared name, description
// and parameters (JSON text).
func ClientToolFromSpec(name, description, parameters string) *Tool {
	t := &Tool{Name: name, Description: description, Source: SourceClient}
	if strings.TrimSpace(parameters) != "" {
		t.Schema = json.RawMessage(parameters)
	}
	return t
}

// Lookup returns a tool the run can see.
func (v *View) Lookup(name string) (*Tool, bool) {
	if t, ok := v.client[name]; ok {
		return t, true
	}
	if v.exclude[name] {
		return nil, false
	}
	return v.Registry.Lookup(name)
}

// Tools returns every tool the run can see, in name order.
func (v *View) Tools() []*Tool {
	all := v.Registry.All()
	out := make([]*Tool, 0, len(all)+len(v.client))
	for _, t := range all {
		if _, shadowed := v.client[t.Name]; !v.exclude[t.Name] && !shadowed {
			out = append(out, t)
		}
	}
	for _, t := range v.client {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the names of every tool the run can see, in name order.
func (v *View) Names() []string {
	ts := v.Tools()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// IsClient reports whether name is one of the run's client tools.
func (v *View) IsClient(name string) bool { _, ok := v.client[name]; return ok }

// Policy is the view's tools-array policy, ArrayLazy or ArrayAll.
func (v *View) Policy() string { return v.policy }

// InArray reports whether the provider's tools array carries name.
func (v *View) InArray(name string) bool {
	t, ok := v.Lookup(name)
	if !ok || t.SchemaError != "" {
		return false
	}
	if v.IsClient(name) {
		return true
	}
	return registeredInArray(v.policy, t)
}

// registeredInArray reports whether the tools array of a policy carries the
// registered tool t.
func registeredInArray(policy string, t *Tool) bool {
	if policy == ArrayAll {
		return t.Name != RunToolName
	}
	return t.AlwaysInArray || slices.Contains(ArrayTools, t.Name)
}

// StartsFetched reports whether the model has a tool's schema at the start of
// a run: under ArrayAll only find_tools and client tools; under ArrayLazy
// every tool in the tools array.
func (v *View) StartsFetched(name string) bool {
	if v.policy == ArrayAll {
		return name == FindToolsName || v.IsClient(name)
	}
	return v.InArray(name)
}

// Array returns the tools array the provider gets, in name order, in the
// OpenAI function-tool shape with the schemas as they are (ArrayIn gives
// the other formats).
func (v *View) Array() []FunctionTool {
	var out []FunctionTool
	for _, t := range v.Tools() {
		if v.InArray(t.Name) {
			out = append(out, FunctionTool{Type: "function", Function: FunctionSpec{Name: t.Name, Description: t.Description, Parameters: t.Schema}})
		}
	}
	if out == nil {
		out = []FunctionTool{}
	}
	return out
}

// ContextText returns the turn-context text the provider gets with the array.
func (v *View) ContextText() string {
	var b strings.Builder
	if v.policy == ArrayAll {
		b.WriteString("Every tool is in your tools array, but only find_tools and client tools have their schemas loaded. ")
		b.WriteString("The first call of any other tool returns its full schema instead of running; call it again with arguments that match. ")
		b.WriteString("To load several schemas at once, call find_tools with query \"select:name1,name2\".\n")
		return b.String()
	}
	b.WriteString("More tools are available than your tools array shows. To use one, first fetch its schema with ")
	b.WriteString("find_tools (query: keywords, or \"select:name1,name2\"), then call run_tool with {\"name\": ..., \"arguments\": {...}}. ")
	b.WriteString("Tools available this way:\n")
	n := 0
	for _, t := range v.Tools() {
		if v.InArray(t.Name) {
			continue
		}
		if t.SchemaError != "" {
			fmt.Fprintf(&b, "- %s: (cannot be called: its schema does not compile) %s\n", t.Name, firstLine(t.Description))
			n++
			continue
		}
		fmt.Fprintf(&b, "- %s: %s\n", t.Name, firstLine(t.Description))
		n++
	}
	if n == 0 {
		b.WriteString("(none)\n")
	}
	return b.String()
}

// firstLine returns the summary of a tool's description: its first line,
// cut after the first sentence when that ends within 160 bytes, and at most
// 200 bytes.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if i := sentenceEnd(s); i >= 0 && i < 160 {
		s = s[:i+1]
	}
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

// abbreviations end in a dot that does not end a sentence.
var abbreviations = []string{"e.g.", "i.e.", "etc.", "cf.", "vs.", "incl.", "approx.", "resp.", "esp."}

// sentenceEnd returns the index of the dot that ends the first sentence of
// s, or -1: a dot followed by a space, outside parentheses, brackets and
// quotes, that does not end an abbreviation such as "e.g.".
func sentenceEnd(s string) int {
	depth, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth > 0 {
				depth--
			}
		case '"':
			quoted = !quoted
		case '.':
			if depth > 0 || quoted || i+1 >= len(s) || s[i+1] != ' ' {
				continue
			}
			word := s[strings.LastIndexAny(s[:i], " (\"")+1 : i+1]
			if slices.Contains(abbreviations, strings.ToLower(word)) {
				continue
			}
			return i
		}
	}
	return -1
}
