package interact

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// schema compacts a JSON Schema literal; a literal that is not JSON is a
// programming mistake and panics at start-up.
func schema(s string) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(fmt.Sprintf("interact: schema literal is not JSON: %v", err))
	}
	return json.RawMessage(b.Bytes())
}
