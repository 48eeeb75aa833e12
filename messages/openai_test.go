package messages

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestJSONTypeName decodes values of the wrong type into fields of each
// kind and names the type the field wanted.
func TestJSONTypeName(t *testing.T) {
	var dst struct {
		S string            `json:"s"`
		B bool              `json:"b"`
		I int64             `json:"i"`
		U uint8             `json:"u"`
		F float64           `json:"f"`
		L []string          `json:"l"`
		A [2]int            `json:"a"`
		M map[string]string `json:"m"`
		O struct{}          `json:"o"`
		P *struct{}         `json:"p"`
	}
	tests := []struct{ name, body, want string }{
		{"string", `{"s":1}`, "a string"},
		{"bool", `{"b":"yes"}`, "a boolean"},
		{"int", `{"i":"1"}`, "a number"},
		{"uint", `{"u":true}`, "a number"},
		{"float", `{"f":[]}`, "a number"},
		{"slice", `{"l":{}}`, "an array"},
		{"array", `{"a":"x"}`, "an array"},
		{"map", `{"m":[]}`, "an object"},
		{"struct", `{"o":1}`, "an object"},
		{"pointer", `{"p":"x"}`, "an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var te *json.UnmarshalTypeError
			if err := json.Unmarshal([]byte(tt.body), &dst); !errors.As(err, &te) {
				t.Fatalf("Unmarshal(%s) = %v, want a type error", tt.body, err)
			}
			if got := JSONTypeName(te.Type.Kind()); got != tt.want {
				t.Errorf("JSONTypeName(%s) = %q, want %q", te.Type.Kind(), got, tt.want)
			}
		})
	}
}
