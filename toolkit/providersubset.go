package toolkit

import (
	"encoding/json"
	"slices"
	"sort"
)

// SubsetViolations lists what in a converted schema format's provider
// would refuse: a keyword outside the format's subset, a strict object
// that allows extra properties or leaves a property optional, a Gemini
// type that is not one name of Gemini's Type enum, a Gemini enum value
// that is not a string. It is empty for a schema ProviderSchema produced,
// and for every schema in ToolsOpenAI and ToolsAnthropic (which take JSON
// Schema whole).
func SubsetViolations(format ToolsFormat, schema json.RawMessage) []string {
	var allowed []string
	switch {
	case format.Strict():
		allowed = strictKeywords
	case format == ToolsGemini:
		allowed = geminiKeywords
	default:
		return nil
	}
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	return subsetViolations(format, allowed, v, "")
}

func subsetViolations(format ToolsFormat, allowed []string, v any, path string) []string {
	n, ok := v.(map[string]any)
	if !ok {
		return []string{path + " is not a schema object"}
	}
	var out []string
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			out = append(out, path+" has "+k)
		}
	}
	if format == ToolsGemini {
		if ty, ok := n["type"]; ok {
			if s, ok := ty.(string); !ok || !slices.Contains([]string{"STRING", "NUMBER", "INTEGER", "BOOLEAN", "OBJECT", "ARRAY", "NULL"}, s) {
				out = append(out, path+" has a type that is not one of Gemini's")
			}
		}
		if e, ok := n["enum"].([]any); ok {
			for _, x := range e {
				if _, ok := x.(string); !ok {
					out = append(out, path+" has an enum value that is not a string")
					break
				}
			}
		}
	}
	if props, ok := n["properties"].(map[string]any); ok {
		if format.Strict() {
			req, _ := n["required"].([]any)
			if n["additionalProperties"] != false || len(req) != len(props) {
				out = append(out, path+" is an object that is not strict")
			}
		}
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			out = append(out, subsetViolations(format, allowed, props[k], path+"/properties/"+escapePointer(k))...)
		}
	} else if format.Strict() && (n["type"] == "object" || slices.Contains(anySlice(n["type"]), any("object"))) {
		out = append(out, path+" is an object without properties")
	}
	if it, ok := n["items"]; ok {
		out = append(out, subsetViolations(format, allowed, it, path+"/items")...)
	}
	if alts, ok := n["anyOf"].([]any); ok {
		for _, a := range alts {
			out = append(out, subsetViolations(format, allowed, a, path+"/anyOf")...)
		}
	}
	return out
}

func anySlice(v any) []any { s, _ := v.([]any); return s }
