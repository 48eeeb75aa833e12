package toolkit

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// SchemaLiteral compacts a JSON Schema written in the source as a string
// literal, for Tool.Schema. A literal that is not JSON is a programming
// mistake: it panics at registration, at start-up.
func SchemaLiteral(s string) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(fmt.Sprintf("toolkit: schema literal is not JSON: %v", err))
	}
	return json.RawMessage(b.Bytes())
}
