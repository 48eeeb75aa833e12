package toolkit

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Tools arrays in each provider's shape (ToolsFormat), and the inverse of
// the strict formats' one change of meaning: a null for an optional
// property means the property is absent.

// ResponsesTool is one entry of a Responses API tools array.
type ResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// AnthropicTool is one entry of an Anthropic Messages tools array.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// GeminiTool is a Gemini Tool holding function declarations.
type GeminiTool struct {
	FunctionDeclarations []GeminiDeclaration `json:"functionDeclarations"`
}

// GeminiDeclaration is a Gemini FunctionDeclaration; Parameters is left
// out for a tool that takes no arguments.
type GeminiDeclaration struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// RefusedTool is a tool left out of a tools array because its schema (or
// its name) cannot be given in the array's format.
type RefusedTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// WithFormat returns a copy of v whose tools array, find_tools results
// and strict arguments follow format f.
func (v *View) WithFormat(f ToolsFormat) *View {
	c := *v
	c.format = f
	return &c
}

// Format is the view's tools format (ToolsOpenAI unless WithFormat says
// otherwise).
func (v *View) Format() ToolsFormat {
	if v.format == "" {
		return ToolsOpenAI
	}
	return v.format
}

// ArrayIn returns the tools array in format f, in name order, and the
// tools left out of it because their schema or name cannot be given in f.
// The array is a JSON-encodable slice: []FunctionTool, []ResponsesTool,
// []AnthropicTool, or for Gemini one GeminiTool holding every declaration
// (none when no tool is left).
func (v *View) ArrayIn(f ToolsFormat) (any, []RefusedTool) {
	refused := []RefusedTool{}
	var (
		openai    = []FunctionTool{}
		responses = []ResponsesTool{}
		anthropic = []AnthropicTool{}
		decls     []GeminiDeclaration
	)
	for _, t := range v.Tools() {
		if !v.InArray(t.Name) {
			continue
		}
		params, err := ProviderSchema(t.Schema, f)
		if err == nil && f == ToolsGemini {
			err = geminiName(t.Name)
		}
		if err != nil {
			refused = append(refused, RefusedTool{Name: t.Name, Reason: err.Error()})
			continue
		}
		switch f {
		case ToolsOpenAIStrict:
			strict := true
			openai = append(openai, FunctionTool{Type: "function", Function: FunctionSpec{Name: t.Name, Description: t.Description, Parameters: params, Strict: &strict}})
		case ToolsResponses:
			responses = append(responses, ResponsesTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params, Strict: true})
		case ToolsAnthropic:
			anthropic = append(anthropic, AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: params})
		case ToolsGemini:
			d := GeminiDeclaration{Name: t.Name, Description: t.Description}
			if !noArguments(params) {
				d.Parameters = params
			}
			decls = append(decls, d)
		default:
			openai = append(openai, FunctionTool{Type: "function", Function: FunctionSpec{Name: t.Name, Description: t.Description, Parameters: params}})
		}
	}
	switch f {
	case ToolsResponses:
		return responses, refused
	case ToolsAnthropic:
		return anthropic, refused
	case ToolsGemini:
		if len(decls) == 0 {
			return []GeminiTool{}, refused
		}
		return []GeminiTool{{FunctionDeclarations: decls}}, refused
	}
	return openai, refused
}

// geminiName checks a name against Gemini's rule for function names: a
// letter or an underscore first (tooldispatch's names allow a digit or a
// dash there).
func geminiName(name string) error {
	if name == "" || !(name[0] == '_' || name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z') {
		return &SchemaRefusal{Format: ToolsGemini, Reason: fmt.Sprintf("the name %q does not start with a letter or an underscore, as Gemini's function names must", name)}
	}
	return nil
}

// noArguments reports whether a converted Gemini schema declares no
// property: the declaration then goes without parameters.
func noArguments(params json.RawMessage) bool {
	var p struct {
		Properties map[string]json.RawMessage `json:"properties"`
		AnyOf      json.RawMessage            `json:"anyOf"`
	}
	return json.Unmarshal(params, &p) == nil && len(p.Properties) == 0 && p.AnyOf == nil
}

// FoundSchema is a tool's schema as find_tools hands it out in the view's
// format, or its own schema and why it cannot be given in that format.
func (v *View) FoundSchema(t *Tool) (json.RawMessage, string) {
	f := v.Format()
	if f == ToolsOpenAI || t.SchemaError != "" {
		return t.Schema, ""
	}
	params, err := ProviderSchema(t.Schema, f)
	if err == nil && f == ToolsGemini {
		err = geminiName(t.Name)
	}
	if err != nil {
		return t.Schema, err.Error()
	}
	return params, ""
}

// StrictArgs undoes, for a call of t in a view of a strict format, the
// one change of meaning the strict schema made: a null sent for an
// optional property that does not itself accept null means the property
// is absent, and is removed, so the full schema validates what the model
// meant. Other arguments, and every call in other formats, are returned
// as they are.
func (v *View) StrictArgs(t *Tool, a Args, lim Limits) (Args, error) {
	if !v.Format().Strict() || !bytes.Contains(a.Canonical, []byte("null")) {
		return a, nil
	}
	_, plan, err := convertSchema(t.Schema, v.Format())
	if err != nil || plan.empty() {
		return a, nil
	}
	cp := deepCopy(a.Value).(map[string]any)
	if !plan.apply(cp) {
		return a, nil
	}
	return ArgsFromValue(cp, lim)
}

// nullPlan is where, in a strict format's arguments, a null stands for an
// absent property: the properties of this object whose null is dropped,
// and the plans of its properties' values and of its items. The
// alternatives of an anyOf share their position's plan.
type nullPlan struct {
	drop  map[string]bool
	props map[string]*nullPlan
	items *nullPlan
}

func (p *nullPlan) propPlan(k string) *nullPlan {
	if p.props == nil {
		p.props = map[string]*nullPlan{}
	}
	if p.props[k] == nil {
		p.props[k] = &nullPlan{}
	}
	return p.props[k]
}

func (p *nullPlan) itemsPlan() *nullPlan {
	if p.items == nil {
		p.items = &nullPlan{}
	}
	return p.items
}

func (p *nullPlan) dropNull(k string) {
	if p.drop == nil {
		p.drop = map[string]bool{}
	}
	p.drop[k] = true
}

func (p *nullPlan) empty() bool {
	if p == nil {
		return true
	}
	if len(p.drop) > 0 {
		return false
	}
	for _, c := range p.props {
		if !c.empty() {
			return false
		}
	}
	return p.items.empty()
}

// apply removes from v the nulls the plan drops and reports whether it
// removed any.
func (p *nullPlan) apply(v any) bool {
	if p == nil {
		return false
	}
	changed := false
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if x == nil && p.drop[k] {
				delete(t, k)
				changed = true
				continue
			}
			if c := p.props[k]; c != nil && c.apply(x) {
				changed = true
			}
		}
	case []any:
		for _, x := range t {
			if p.items.apply(x) {
				changed = true
			}
		}
	}
	return changed
}

// deepCopy copies decoded arguments (maps and slices) deeply.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}
