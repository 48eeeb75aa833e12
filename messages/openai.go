package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Helpers for the OpenAI chat-completions JSON shapes that callers send
// (the run command's input and the service's request bodies).

// ContentText reads the content of an assistant message: a string, null,
// or an array of content parts whose text parts are joined by newlines.
func ContentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case raw[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", errors.New(`must be a string, null or an array of content parts ({"type":"text","text":…})`)
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", fmt.Errorf("must be a string, null or an array of content parts, not %s", JSONKind(raw))
}

// ArgumentsText returns a call's arguments as the JSON text the dispatcher
// takes: a JSON string as it is, any other value compacted (key order and
// duplicate keys kept, so the dispatcher's strict parser sees them; a value
// that is not an object is refused for that call alone), null as "".
func ArgumentsText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// JSONKind names the kind of a valid JSON value, for error messages.
func JSONKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
