package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
)

// inputTurn is one turn read from run input: the assistant message and the
// envelope fields that came with it ("" and nil when absent).
type inputTurn struct {
	// Index is the turn's position in the input, from 1.
	Index int
	// Offset is the byte offset at which the turn's JSON value starts.
	Offset int64

	Session, Run, Provider, TurnID, Approve string
	// ClientTools and Exclude are declarations for the run; HasClientTools
	// and HasExclude tell an absent field from an empty list.
	ClientTools    []*messages.ToolSpec
	HasClientTools bool
	Exclude        []string
	HasExclude     bool
	// AutoLoadSchemas is the envelope's auto_load_schemas, when
	// HasAutoLoadSchemas.
	AutoLoadSchemas    bool
	HasAutoLoadSchemas bool
	// Chaos is the turn's chaos policy as JSON, "" when none.
	Chaos string
	// Traceparent is the caller's W3C trace context, "" when none.
	Traceparent string
	// Format is the shape the message came in (the envelope's format, or
	// detected), "" for OpenAI chat completions; its results go back in
	// the matching shape.
	Format messages.Format
	// ToolsFormat is the envelope's tools_format, "" when absent (the
	// message's format then names it).
	ToolsFormat string

	Message *messages.AssistantMessage
}

// Wire shapes of run input.
type (
	wireEnvelope struct {
		Session         string                `json:"session"`
		Run             string                `json:"run"`
		Provider        string                `json:"provider"`
		ClientTools     []messages.ClientTool `json:"client_tools"`
		Message         *messages.Assistant   `json:"message"`
		TurnID          string                `json:"turn_id"`
		Approve         string                `json:"approve"`
		Exclude         []string              `json:"exclude"`
		AutoLoadSchemas bool                  `json:"auto_load_schemas"`
		Chaos           json.RawMessage       `json:"chaos"`
		Traceparent     string                `json:"traceparent"`
		Format          string                `json:"format"`
		ToolsFormat     string                `json:"tools_format"`
	}
	// wireItemsEnvelope is an envelope whose message is an array: the
	// output items of a Responses response, read by the messages codec.
	wireItemsEnvelope struct {
		wireEnvelope
		Message json.RawMessage `json:"message"`
	}
)

// envelopeFields are the fields an envelope may have.
var envelopeFields = []string{"session", "run", "provider", "client_tools", "message", "turn_id", "approve", "exclude", "auto_load_schemas", "chaos", "traceparent", "format", "tools_format"}

// parseTurn parses one JSON value, which starts at byte offset at, as an
// assistant message or an envelope. Errors are *inputError (Turn unset)
// pointing as close to the fault as the JSON decoder tells.
func parseTurn(raw []byte, at int64) (*inputTurn, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, &inputError{Offset: at + max(se.Offset-1, 0), Err: fmt.Errorf("invalid JSON: %s", se.Error())}
		case errors.As(err, &te):
			return nil, &inputError{Offset: at, Err: fmt.Errorf("a turn must be a JSON object (an assistant message or an envelope), not %s", messages.JSONKind(raw))}
		}
		return nil, &inputError{Offset: at, Err: err}
	}
	if keys == nil {
		return nil, &inputError{Offset: at, Err: errors.New("a turn must be a JSON object (an assistant message or an envelope), not null")}
	}
	t := &inputTurn{}
	if _, ok := keys["message"]; ok {
		for k := range keys {
			if !slices.Contains(envelopeFields, k) {
				return nil, &inputError{Offset: at, Err: fmt.Errorf("unknown envelope field %q (an envelope has %s)", k, strings.Join(envelopeFields, ", "))}
			}
		}
		var env wireEnvelope
		if m := bytes.TrimSpace(keys["message"]); len(m) > 0 && m[0] == '[' {
			var items wireItemsEnvelope
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, typeError(err, at)
			}
			env = items.wireEnvelope
			var err error
			if env.Message, err = messages.DecodeAssistant(items.Message, "message."); err != nil {
				return nil, &inputError{Offset: at, Err: err}
			}
		} else if err := json.Unmarshal(raw, &env); err != nil {
			return nil, typeError(err, at)
		}
		if env.Message == nil {
			return nil, &inputError{Offset: at, Err: errors.New("the envelope's message is null: it must be an assistant message")}
		}
		t.Session, t.Run, t.Provider, t.TurnID, t.Approve = env.Session, env.Run, env.Provider, env.TurnID, env.Approve
		t.ToolsFormat = env.ToolsFormat
		t.AutoLoadSchemas = env.AutoLoadSchemas
		t.Traceparent = env.Traceparent
		_, t.HasAutoLoadSchemas = keys["auto_load_schemas"]
		if len(env.Chaos) > 0 && string(env.Chaos) != "null" {
			// Checked by whoever uses it (the dispatcher, chaos plan).
			t.Chaos = string(env.Chaos)
		}
		_, t.HasExclude = keys["exclude"]
		t.Exclude = env.Exclude
		if _, t.HasClientTools = keys["client_tools"]; t.HasClientTools {
			specs, err := messages.ToolSpecs(env.ClientTools)
			if err != nil {
				return nil, &inputError{Offset: at, Err: err}
			}
			t.ClientTools = specs
		}
		if err := checkEnvelope(t); err != nil {
			return nil, &inputError{Offset: at, Err: err}
		}
		format, err := messages.ParseFormat(env.Format)
		if err != nil {
			return nil, &inputError{Offset: at, Err: err}
		}
		if t.Message, format, err = env.Message.Convert(format, "message."); err != nil {
			return nil, &inputError{Offset: at, Err: err}
		}
		t.setFormat(format)
		return t, nil
	}
	_, hasRole := keys["role"]
	_, hasCalls := keys["tool_calls"]
	_, hasParts := keys["parts"]
	if !hasRole && !hasCalls && !hasParts {
		return nil, &inputError{Offset: at, Err: errors.New("a turn must be an assistant message (with role and tool_calls), a Gemini content (with parts) or an envelope (with message)")}
	}
	var m messages.Assistant
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, typeError(err, at)
	}
	msg, format, err := m.Convert("", "")
	if err != nil {
		return nil, &inputError{Offset: at, Err: err}
	}
	t.Message = msg
	t.setFormat(format)
	return t, nil
}

// setFormat records the format the message came in, "" for OpenAI chat
// completions (the default shape).
func (t *inputTurn) setFormat(f messages.Format) {
	if f != messages.FormatOpenAI {
		t.Format = f
	}
}

// typeError turns a decoding error of a turn into an inputError.
func typeError(err error, at int64) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the turn"
		}
		return &inputError{Offset: at + max(te.Offset-1, 0), Err: fmt.Errorf("%s must be %s, not %s", field, messages.JSONTypeName(te.Type.Kind()), te.Value)}
	}
	return &inputError{Offset: at, Err: err}
}

// checkEnvelope checks the envelope fields the dispatcher would refuse.
func checkEnvelope(t *inputTurn) error {
	switch t.Approve {
	case "", actors.ApproveAsk, actors.ApproveAll, actors.ApproveNone:
	default:
		return fmt.Errorf("approve must be \"ask\", \"all\" or \"none\", not %q", t.Approve)
	}
	if t.Traceparent != "" {
		if err := checkTraceparent(t.Traceparent); err != nil {
			return err
		}
	}
	for _, id := range []struct{ name, v string }{{"session", t.Session}, {"run", t.Run}, {"turn_id", t.TurnID}} {
		if len(id.v) > maxIDLen {
			return fmt.Errorf("%s is longer than %d bytes", id.name, maxIDLen)
		}
	}
	return nil
}
