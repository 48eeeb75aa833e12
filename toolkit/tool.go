package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Status is the outcome of one call; every call ends with exactly one.
type Status string

// The call statuses of SPEC section 9.
const (
	StatusOK             Status = "ok"
	StatusError          Status = "error"
	StatusTimeout        Status = "timeout"
	StatusCanceled       Status = "canceled"
	StatusOutcomeUnknown Status = "outcome_unknown"
	StatusUnknownTool    Status = "unknown_tool"
	StatusDeferred       Status = "deferred"
	StatusSchemaReturned Status = "schema_returned"
	StatusInvalidArgs    Status = "invalid_args"
	StatusDeduped        Status = "deduped"
	StatusSkipped        Status = "skipped"
	StatusClientPending  Status = "client_pending"
	// StatusAwaitingApproval: the call waits for a person's deferred
	// approval; the answer amends its message once.
	StatusAwaitingApproval Status = "awaiting_approval"
)

// Source tells where a tool comes from.
type Source string

// Tool sources, as printed by `tooldispatch tools --all`.
const (
	SourceBuiltin Source = "builtin"
	SourceMCP     Source = "mcp"
	SourceScript  Source = "script"
	SourceExt     Source = "ext"
	SourceHost    Source = "host"
	SourceClient  Source = "client"
)

// Default timeouts.
const (
	DefaultToolTimeout = 60 * time.Second
)

// Args is a call's arguments after strict parsing: the canonical bytes
// (sorted keys, compact, RFC 8785 style) and the decoded value built from
// them. Numbers in Value are json.Number. Every consumer — the gate, the
// validator, the de-duplication key and the handler — sees these.
type Args struct {
	Canonical []byte
	Value     map[string]any
}

// String returns the string argument key, or "" when absent or not a string.
func (a Args) String(key string) string {
	s, _ := a.Value[key].(string)
	return s
}

// Bool returns the boolean argument key, or false.
func (a Args) Bool(key string) bool {
	b, _ := a.Value[key].(bool)
	return b
}

// Int returns the integer argument key, or def when absent or not an integer.
func (a Args) Int(key string, def int64) int64 {
	n, ok := a.Value[key].(json.Number)
	if !ok {
		return def
	}
	i, err := n.Int64()
	if err != nil {
		return def
	}
	return i
}

// Strings returns the argument key as a list of strings (a lone string gives
// a list of one); other elements are skipped.
func (a Args) Strings(key string) []string {
	switch v := a.Value[key].(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Call is what a handler receives.
type Call struct {
	Session string
	Run     string
	Turn    int64
	ID      string
	Name    string
	Args    Args
	// Emit streams a piece of output as a tool_call_text event. Safe to call
	// from the handler's goroutines until the handler returns; never nil.
	Emit func(text string)
	// View is the set of tools the run can see (for find_tools).
	View *View
	// Ask puts a question to the human behind the run and waits for the
	// answer (ask_user, store_secret). Never nil.
	Ask Asker
	// Redactor takes secret values out of text; a tool that cuts its
	// output applies it first (Call.Redact, Call.RedactStream) and cuts
	// outside markers (SafeCut). Nil when no secrets are configured.
	Redactor Redactor
	// Tasks, when set, takes the id of the task an outside server runs the
	// call as (Call.NoteTask); nil outside a dispatcher's turn.
	Tasks func(ctx context.Context, id string) error
}

// NoteTask tells the dispatcher the id of the task an outside server runs
// the call as (an MCP task), as soon as the server gave it: the call's
// intent record keeps it, so that after a crash the server can be asked
// for the call's outcome instead of the call reading outcome_unknown. It
// returns once the id is durable, or with the reason it could not be
// written (the call goes on either way: only a crash's outcome depends on
// it). Without a dispatcher's turn behind the call it does nothing.
func (c *Call) NoteTask(ctx context.Context, id string) error {
	if c == nil || c.Tasks == nil {
		return nil
	}
	return c.Tasks(ctx, id)
}

// Result is what a handler returns on success.
type Result struct {
	Content string
	// Parts are media the tool returns beside Content (an MCP tool's
	// images and audio), in order; Content holds a placeholder for each.
	// They are committed with the call's tool message, and the reply
	// shapes that carry media hand them to the model.
	Parts []Part
	// Fetched names tools whose full schemas this result handed to the model
	// (find_tools); they are marked fetched for the run when the turn commits.
	Fetched []string
	// Cache, when set, is written to the result cache in the turn's commit
	// (pass 3 writes it only for http_request GET; fetch_page and
	// search_web write their own through a Cache).
	Cache *CacheEntry
}

// Part is one piece of media of a result.
type Part struct {
	// Kind is PartImage or PartAudio.
	Kind     string
	MIMEType string
	Data     []byte
	// URI names the resource the media came from, when known.
	URI string
}

// The kinds of Part.
const (
	PartImage = "image"
	PartAudio = "audio"
)

// CacheEntry is one value for the 30-minute result cache. It is an alias of
// an unnamed struct type, so a store that declares the same struct
// (cachestore.CacheEntry) satisfies the small interfaces that mention it
// (web.CacheStore) without toolkit importing the store.
type CacheEntry = struct {
	Key     string
	Value   []byte
	Expires time.Time
}

// Cache is the result cache as tools see it: absolute expiry, checked
// against now (an injectable clock). Safe for concurrent use.
type Cache interface {
	Get(ctx context.Context, key string, now time.Time) ([]byte, bool, error)
	Put(ctx context.Context, e CacheEntry) error
}

// Call errors a handler may wrap to choose the call's status.
var (
	// ErrNotSent: the call was never handed to whatever runs it (an MCP
	// server that was down or restarting until the call's time ran out); it
	// did not run and is safe to retry. The call ends `error`.
	ErrNotSent = errors.New("toolkit: the call was not sent; it is safe to retry")
	// ErrOutcomeUnknown: the call was sent and the side that runs it failed
	// before answering (a crashed or hung MCP server); it may have run. The
	// call ends `outcome_unknown`.
	ErrOutcomeUnknown = errors.New("toolkit: the call's outcome is unknown")
	// ErrCanceled: the side that runs the call cancelled it (an MCP server
	// that cancelled the call's task). The call ends `canceled`.
	ErrCanceled = errors.New("toolkit: the call was cancelled by the side that runs it")
)

// Handler runs one call. A returned error becomes status error with the
// error's text; a context that ended becomes timeout or canceled. Handlers
// must honour ctx.
type Handler func(ctx context.Context, c *Call) (Result, error)

// Tool is one tool the dispatcher can run.
//
// Whether the model sees a tool directly depends on the turn's tools-array
// policy (see ArrayPolicy). Under ArrayLazy, the default for every provider
// but "all" and "claude-code", a registered tool is not in the tools array:
// the model finds it with find_tools and calls it through run_tool, and a
// direct call comes back deferred. Set AlwaysInArray to list a tool
// directly under every policy; typed tools (Typed) are no exception.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments (an object schema). Draft-07
	// and 2020-12 are both understood; without $schema, 2020-12.
	Schema json.RawMessage
	// OutputSchema, when set, is the JSON Schema of the tool's structured
	// result (an MCP tool's outputSchema): shown with the tool (find_tools,
	// tools --all); the tool checks its results against it.
	OutputSchema json.RawMessage
	// Concurrent tools run in parallel under the limit; others run alone, in
	// call order.
	Concurrent bool
	// ReadOnly is the tool's confirm policy when ReadOnlyFunc is nil.
	ReadOnly bool
	// ReadOnlyFunc, when set, decides from the canonical arguments whether a
	// call is read-only (http_request GET is, other methods are not).
	ReadOnlyFunc func(Args) bool
	// Timeout of one call; zero means DefaultToolTimeout.
	Timeout time.Duration
	Handler Handler
	Source  Source

	// Paths returns the workspace paths a call reads (read-only tools) or
	// writes (mutating tools), cleaned and relative to the workspace root;
	// used to invalidate de-duplication entries.
	Paths func(Args) []string
	// StaleOnMutation marks entries of this tool as invalidated by any
	// successful mutating call (find_files, run_command).
	StaleOnMutation bool
	// DedupScope groups tools whose writes change what their reads return
	// (the tools of one MCP server: "mcp__<server>__"). A successful call
	// of a tool of the scope that is not read-only drops every
	// de-duplication entry of the scope's tools in the run, as a
	// successful edit_file drops the read_files entries of its path.
	// Empty: no scope.
	DedupScope string
	// NoDedup: every call runs, even a repeat of one that succeeded in the
	// run (questions to the human, searches of a history that grows, a
	// mutating tool whose repeats are meant to act again). Without it a
	// repeat of a successful call in the same run is answered with the
	// first result (at most once per run; see README).
	NoDedup bool
	// Stamp, when set, returns what a call's result depends on outside the
	// run (read_files and file_history: each path's size, modification time
	// and content hash). It is taken before the call runs and kept with the
	// de-duplication entry; a repeat is answered from the entry only while a
	// fresh stamp is equal, otherwise it runs again.
	Stamp func(Args) string
	// Preview and FileState, set together on a tool that changes
	// workspace files, bind an approval to what the person saw (SPEC §16).
	// Preview is computed once, when a call asks for approval: what the
	// call would do to the files as they are then, shown with the
	// confirmation, and the State of the files it read. Just before an
	// approved call runs (after the earlier calls of its turn), FileState
	// reads that state again; when it differs, the call does not run
	// (skipped). Both must read the same paths and describe them the same
	// way (see Preview.State).
	Preview   PreviewFunc
	FileState FileStateFunc

	// ConfirmNote, when set, is shown with every confirmation of the
	// tool's calls (the tool_confirm event's note, the Approver's
	// request): what the person should know of the tool itself, such as
	// a trusted MCP server's destructiveHint.
	ConfirmNote string

	// SchemaError, when set, is why Schema does not compile (an MCP or client
	// tool whose schema the validator refuses). Such a tool is listed (tools
	// --all, find_tools) with the reason and left out of the tools array;
	// each call of it ends in error naming the reason.
	SchemaError string
	// AlwaysInArray puts the tool in every provider's tools array. Under
	// ArrayLazy it is then listed with its schema beside the core tools and
	// called directly, never deferred; under ArrayAll it is listed like
	// every tool and its schema is still fetched by its first call (or
	// AutoLoadSchemas), as SPEC §3 rule 6 says.
	AlwaysInArray bool
}

// IsReadOnly applies the tool's confirm policy to canonical arguments.
func (t *Tool) IsReadOnly(a Args) bool {
	if t.ReadOnlyFunc != nil {
		return t.ReadOnlyFunc(a)
	}
	return t.ReadOnly
}

// EffectiveTimeout returns the call timeout, filling in the default.
func (t *Tool) EffectiveTimeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultToolTimeout
}

// ReadOnlyLabel is the read_only column of `tools --all`: true, false or
// "depends on arguments".
func (t *Tool) ReadOnlyLabel() any {
	if t.ReadOnlyFunc != nil {
		return "depends on arguments"
	}
	return t.ReadOnly
}
