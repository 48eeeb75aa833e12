package host

import (
	"encoding/json"
	"path"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Handlers are the host's implementations of the tools that need an outside
// service. A nil handler leaves its tool out. Each handler receives the
// call's canonical arguments, validated against the tool's schema (see the
// package documentation), and must honour ctx.
type Handlers struct {
	// Subagents runs one subagent per task, in parallel, and returns their
	// results once all have finished.
	Subagents toolkit.Handler
	// BackgroundSubagents starts one subagent per task and returns their ids
	// at once, without waiting.
	BackgroundSubagents toolkit.Handler
	// ListChatbot lists the chatbots the model can talk to.
	ListChatbot toolkit.Handler
	// SendToChatbot sends a message to one chatbot and returns its reply.
	SendToChatbot toolkit.Handler
	// GenerateAudio turns text into speech.
	GenerateAudio toolkit.Handler
	// GenerateImage draws images from a prompt.
	GenerateImage toolkit.Handler
}

// spec is one host tool: everything but the handler.
type spec struct {
	name        string
	description string
	schema      json.RawMessage
	concurrent  bool
	readOnly    bool
	timeout     time.Duration
	// outputPath names the argument holding a workspace file the tool
	// writes, for Tool.Paths; empty when it writes none.
	outputPath string
	handler    func(Handlers) toolkit.Handler
}

// Timeouts of the host tools.
const (
	subagentsTimeout           = 30 * time.Minute
	backgroundSubagentsTimeout = time.Minute
	listChatbotTimeout         = 30 * time.Second
	sendToChatbotTimeout       = 10 * time.Minute
	generateTimeout            = 5 * time.Minute
)

// tasksSchema is the argument schema shared by subagents and
// background_subagents.
const tasksSchema = `{
	"type": "object",
	"properties": {
		"tasks": {
			"type": "array",
			"description": "The tasks, one subagent each; they run in parallel.",
			"minItems": 1,
			"maxItems": 10,
			"items": {
				"type": "object",
				"description": "One subagent's task.",
				"properties": {
					"task": {
						"type": "string",
						"description": "What the subagent must do and what it must report back. It does not see this conversation: make it self-contained.",
						"minLength": 1,
						"maxLength": 20000
					},
					"name": {
						"type": "string",
						"description": "Optional short label for the subagent, used in the results.",
						"maxLength": 64
					},
					"context": {
						"type": "string",
						"description": "Optional facts, file paths or constraints the subagent needs.",
						"maxLength": 50000
					},
					"tools": {
						"type": "array",
						"description": "Optional names of the tools the subagent may use (default: the host's choice).",
						"items": {"type": "string", "minLength": 1, "maxLength": 64},
						"maxItems": 100
					}
				},
				"required": ["task"],
				"additionalProperties": false
			}
		}
	},
	"required": ["tasks"],
	"additionalProperties": false
}`

// specs are the host tools in name order; the flags follow SPEC section 5.
var specs = []spec{
	{
		name: "background_subagents",
		description: "Start subagents that work on tasks in the background and return their ids at once, without " +
			"waiting. Use it for long, independent work; their results arrive later, as the host reports them.",
		schema:     toolkit.SchemaLiteral(tasksSchema),
		concurrent: true,
		timeout:    backgroundSubagentsTimeout,
		handler:    func(h Handlers) toolkit.Handler { return h.BackgroundSubagents },
	},
	{
		name: "generate_audio",
		description: "Turn text into speech. The host's speech service renders it; the result names the audio file " +
			"or link it produced.",
		schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"text": {"type": "string", "description": "The text to speak.", "minLength": 1, "maxLength": 20000},
				"voice": {"type": "string", "description": "Optional voice name, as the host's service knows them.", "maxLength": 100},
				"format": {"type": "string", "description": "Audio format (default mp3).", "enum": ["mp3", "wav", "ogg"]},
				"output_path": {"type": "string", "description": "Optional workspace file to save the audio to (e.g. audio/intro.mp3).", "minLength": 1}
			},
			"required": ["text"],
			"additionalProperties": false
		}`),
		timeout:    generateTimeout,
		outputPath: "output_path",
		handler:    func(h Handlers) toolkit.Handler { return h.GenerateAudio },
	},
	{
		name: "generate_image",
		description: "Draw images from a text prompt. The host's image service renders them; the result names the " +
			"image files or links it produced.",
		schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"prompt": {"type": "string", "description": "What the image shows, in detail.", "minLength": 1, "maxLength": 4000},
				"size": {"type": "string", "description": "Width x height in pixels (default 1024x1024).", "enum": ["256x256", "512x512", "1024x1024", "1024x1792", "1792x1024"]},
				"count": {"type": "integer", "description": "How many images to draw (default 1).", "minimum": 1, "maximum": 4},
				"output_path": {"type": "string", "description": "Optional workspace file to save the image to (e.g. images/logo.png); with count above 1, a number is added to each name.", "minLength": 1}
			},
			"required": ["prompt"],
			"additionalProperties": false
		}`),
		timeout:    generateTimeout,
		outputPath: "output_path",
		handler:    func(h Handlers) toolkit.Handler { return h.GenerateImage },
	},
	{
		name:        "list_chatbot",
		description: "List the chatbots you can talk to with send_to_chatbot: their names and what each is good at.",
		schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"query": {"type": "string", "description": "Optional keywords to keep only matching chatbots.", "maxLength": 200}
			},
			"additionalProperties": false
		}`),
		concurrent: true,
		readOnly:   true,
		timeout:    listChatbotTimeout,
		handler:    func(h Handlers) toolkit.Handler { return h.ListChatbot },
	},
	{
		name: "send_to_chatbot",
		description: "Send a message to another chatbot (see list_chatbot) and return its reply. Pass the " +
			"conversation_id of an earlier reply to continue that conversation.",
		schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"chatbot": {"type": "string", "description": "Name of the chatbot, as list_chatbot gives it.", "minLength": 1, "maxLength": 200},
				"message": {"type": "string", "description": "The message to send.", "minLength": 1, "maxLength": 50000},
				"conversation_id": {"type": "string", "description": "Optional id of the conversation to continue, from an earlier reply.", "maxLength": 200}
			},
			"required": ["chatbot", "message"],
			"additionalProperties": false
		}`),
		concurrent: true,
		timeout:    sendToChatbotTimeout,
		handler:    func(h Handlers) toolkit.Handler { return h.SendToChatbot },
	},
	{
		name: "subagents",
		description: "Hand tasks to subagents that work on them in parallel, and wait for their results. Each subagent " +
			"starts fresh: give it everything it needs in task and context. Use it for independent pieces of work.",
		schema:     toolkit.SchemaLiteral(tasksSchema),
		concurrent: true,
		timeout:    subagentsTimeout,
		handler:    func(h Handlers) toolkit.Handler { return h.Subagents },
	},
}

// Flags returns the flags of the host tool name (SPEC section 5), whether
// or not a handler for it is registered; ok is false for any other name.
func Flags(name string) (concurrent, readOnly, ok bool) {
	for _, s := range specs {
		if s.name == name {
			return s.concurrent, s.readOnly, true
		}
	}
	return false, false, false
}

// Names returns the names of every host tool, in name order.
func Names() []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.name
	}
	return out
}

// Tools returns the host tools whose handler h supplies, in name order,
// with Source toolkit.SourceHost.
func Tools(h Handlers) []toolkit.Tool {
	var out []toolkit.Tool
	for _, s := range specs {
		handler := s.handler(h)
		if handler == nil {
			continue
		}
		t := toolkit.Tool{
			Name:        s.name,
			Description: s.description,
			Schema:      s.schema,
			Concurrent:  s.concurrent,
			ReadOnly:    s.readOnly,
			Timeout:     s.timeout,
			Handler:     handler,
			Source:      toolkit.SourceHost,
		}
		if arg := s.outputPath; arg != "" {
			t.Paths = func(a toolkit.Args) []string { return relPath(a.String(arg)) }
		}
		out = append(out, t)
	}
	return out
}

// Register adds the host tools whose handler h supplies to reg. Like
// toolkit.Registry.Register, it panics on a registration mistake.
func Register(reg *toolkit.Registry, h Handlers) {
	for _, t := range Tools(h) {
		reg.Register(t)
	}
}

// relPath is the cleaned form of a relative path inside the workspace, or
// nothing (absolute paths and escapes are the handler's to refuse).
func relPath(p string) []string {
	if p == "" || path.IsAbs(p) {
		return nil
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return nil
	}
	return []string{c}
}
