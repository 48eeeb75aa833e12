package toolkit

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormaliseName(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "read_file", "read_file"},
		{"white space", " \tread_file\n", "read_file"},
		{"leaked token", "read_file<|channel|>commentary", "read_file"},
		{"token after space", "read_file <|end|>", "read_file"},
		{"only a token", "<|end|>", ""},
		{"empty", "", ""},
		{"run_tool with a token", "run_tool<|call|>", RunToolName},
		{"a lone bar is kept", "a|b", "a|b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormaliseName(tt.in); got != tt.want {
				t.Errorf("NormaliseName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestResolveCall(t *testing.T) {
	tests := []struct {
		name, call, args string
		want             string // tool name
		canonical        string // canonical arguments of that tool, "" when refused
		via              bool
		refused          string // part of the error, "" when accepted
	}{
		{name: "plain", call: "read_file", args: `{ "path" : "a" }`, want: "read_file", canonical: `{"path":"a"}`},
		{name: "empty arguments", call: "now", args: "", want: "now", canonical: `{}`},
		{name: "run_tool object", call: "run_tool", args: `{"name":"read_file","arguments":{"path":"a"}}`,
			want: "read_file", canonical: `{"path":"a"}`, via: true},
		{name: "run_tool string", call: "run_tool", args: `{"name":"read_file","arguments":"{\"path\":\"a\"}"}`,
			want: "read_file", canonical: `{"path":"a"}`, via: true},
		{name: "run_tool no arguments", call: "run_tool", args: `{"name":"now"}`, want: "now", canonical: `{}`, via: true},
		// The token is cut before the run_tool check, so the call is
		// unwrapped like any run_tool call.
		{name: "run_tool with a leaked token", call: "run_tool<|channel|>", args: `{"name":"read_file","arguments":{"path":"a"}}`,
			want: "read_file", canonical: `{"path":"a"}`, via: true},
		{name: "inner name with a leaked token", call: " run_tool ", args: `{"name":"read_file<|end|>","arguments":{}}`,
			want: "read_file", canonical: `{}`, via: true},
		{name: "bad outer arguments", call: "run_tool<|x|>", args: `{"name":`, want: RunToolName, refused: "invalid JSON"},
		{name: "extra key", call: "run_tool", args: `{"name":"a","extra":1}`, want: RunToolName, refused: `not "extra"`},
		{name: "name not a string", call: "run_tool", args: `{"name":1}`, want: RunToolName, refused: "as a string"},
		{name: "empty inner name", call: "run_tool", args: `{"name":"<|x|>"}`, want: RunToolName, refused: `needs "name"`},
		{name: "nested run_tool", call: "run_tool", args: `{"name":"run_tool<|x|>","arguments":{}}`, want: RunToolName, refused: "cannot call run_tool"},
		{name: "inner arguments an array", call: "run_tool", args: `{"name":"a","arguments":[1]}`, want: RunToolName, refused: "must be an object"},
		{name: "inner arguments bad JSON", call: "run_tool", args: `{"name":"a","arguments":"{"}`, want: RunToolName, refused: "run_tool arguments of a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ResolveCall(tt.call, tt.args, DefaultLimits)
			if c.Name != tt.want {
				t.Errorf("Name = %q, want %q", c.Name, tt.want)
			}
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("err = %v, want one saying %q", err, tt.refused)
				}
				var ae *ArgsError
				var re *RunToolError
				if !errors.As(err, &ae) && !errors.As(err, &re) {
					t.Errorf("err is %T, want *ArgsError or *RunToolError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(c.Args.Canonical) != tt.canonical || c.ViaRunTool != tt.via {
				t.Errorf("got (%s, via %v), want (%s, via %v)", c.Args.Canonical, c.ViaRunTool, tt.canonical, tt.via)
			}
		})
	}
}

// TestUnwrapRunToolClipsOnACharacter: inner arguments of the wrong type
// are quoted in the refusal cut on a character boundary.
func TestUnwrapRunToolClipsOnACharacter(t *testing.T) {
	args, err := ParseArgs(`{"name":"a","arguments":["x`+strings.Repeat("é", 100)+`"]}`, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = UnwrapRunTool(args, DefaultLimits)
	if err == nil || !utf8.ValidString(err.Error()) {
		t.Fatalf("err = %q, want a refusal in valid UTF-8", err)
	}
}
