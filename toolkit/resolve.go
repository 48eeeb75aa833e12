package toolkit

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The rules of pass 1 that say which tool a call runs and with which
// arguments (SPEC section 3, rules 1 to 3). The dispatcher applies them to
// every call; anything that reads calls afterwards (the chaos report, a
// client result naming its call) applies the same functions, so a call is
// read one way everywhere.

// leakedToken starts the special tokens some models leak into a tool name
// ("read_file<|channel|>commentary").
const leakedToken = "<|"

// NormaliseName is the tool name a call names: name without surrounding
// white space, cut at the first leaked special token ("<|") and trimmed
// again. It applies to a call's own name and to the inner name of run_tool.
func NormaliseName(name string) string {
	name = strings.TrimSpace(name)
	if i := strings.Index(name, leakedToken); i >= 0 {
		name = strings.TrimSpace(name[:i])
	}
	return name
}

// RunToolError says why a run_tool call cannot be unwrapped; the message is
// written for the model that made the call.
type RunToolError struct{ Msg string }

// Error returns Msg.
func (e *RunToolError) Error() string { return e.Msg }

// UnwrapRunTool returns the inner call of a run_tool call, given run_tool's
// parsed arguments: the inner tool's normalised name and its arguments,
// parsed under lim. The inner arguments may be an object, a JSON string
// holding one, or absent ({}). Refused, as *RunToolError: keys other than
// "name" and "arguments", a name that is missing, not a string, empty or
// run_tool itself, and inner arguments that are neither an object nor a
// string that parses as one.
func UnwrapRunTool(args Args, lim Limits) (string, Args, error) {
	refuse := func(format string, a ...any) (string, Args, error) {
		return "", Args{}, &RunToolError{Msg: fmt.Sprintf(format, a...)}
	}
	for k := range args.Value {
		if k != "name" && k != "arguments" {
			return refuse("run_tool takes only \"name\" and \"arguments\", not %q", clipText(k, 80))
		}
	}
	name, ok := args.Value["name"].(string)
	if !ok {
		return refuse("run_tool needs \"name\", the tool to call, as a string")
	}
	name = NormaliseName(name)
	if name == RunToolName {
		return refuse("run_tool cannot call run_tool; call the tool you want through a single run_tool")
	}
	if name == "" {
		return refuse("run_tool needs \"name\", the tool to call")
	}
	var inner Args
	var err error
	switch v := args.Value["arguments"].(type) {
	case nil:
		inner, err = ParseArgs("", lim)
	case map[string]any:
		inner, err = ArgsFromValue(v, lim)
	case string:
		inner, err = ParseArgs(v, lim)
	default:
		b, _ := json.Marshal(v)
		return refuse("run_tool \"arguments\" must be an object or a JSON string holding one, got %s", clipText(string(b), 80))
	}
	if err != nil {
		return refuse("run_tool arguments of %s: %s", name, err.Error())
	}
	return name, inner, nil
}

// ResolvedCall is a tool call as pass 1 reads it.
type ResolvedCall struct {
	// Name is the tool the call runs: the normalised name, or run_tool's
	// normalised inner name once unwrapped.
	Name string
	// Args are the arguments that tool gets (run_tool's inner ones).
	Args Args
	// ViaRunTool reports that the call came through run_tool.
	ViaRunTool bool
}

// ResolveCall reads a call's name and arguments text the way pass 1 does:
// NormaliseName, ParseArgs under lim, then UnwrapRunTool for run_tool. When
// the arguments or the run_tool wrapping are refused, the error says why
// (*ArgsError or *RunToolError) and the returned ResolvedCall still has the
// normalised outer name, which is the name a refused call is reported
// under.
func ResolveCall(name, arguments string, lim Limits) (ResolvedCall, error) {
	c := ResolvedCall{Name: NormaliseName(name)}
	args, err := ParseArgs(arguments, lim)
	if err != nil {
		return c, err
	}
	if c.Name != RunToolName {
		c.Args = args
		return c, nil
	}
	inner, innerArgs, err := UnwrapRunTool(args, lim)
	if err != nil {
		return c, err
	}
	return ResolvedCall{Name: inner, Args: innerArgs, ViaRunTool: true}, nil
}

// clipText shortens s to at most n bytes, cut on a character boundary, and
// marks the cut with "…".
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
