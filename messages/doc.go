// Package messages holds the protobuf messages that cross the boundary of a
// tooldispatch actor system: turns to dispatch, their results, tool messages,
// events and confirmation replies, and the turn record as persisted; and the
// one JSON codec of the shapes callers speak: an assistant message in the
// OpenAI chat-completions shape, OpenAI Responses output items, an Anthropic
// Messages message or a Gemini content in (Assistant, Convert, ClientTool),
// with one pairing rule for call ids (ids.go); tool results out as OpenAI
// tool messages or function_call_output items (with statuses, or strict),
// an Anthropic user message of tool_result blocks or a Gemini content of
// functionResponse parts (Reply, ReplyTo); events and a session's history as
// JSON. The run command and the service use it, and so can an embedder.
//
// It knows nothing of actors, storage or tools.
package messages

//go:generate protoc --go_out=. --go_opt=paths=source_relative tooldispatch.proto
