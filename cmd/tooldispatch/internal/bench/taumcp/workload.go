package taumcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Domain is the τ-bench domain the workload uses.
const Domain = "airline"

// ErrNoCalls: the file holds no calls of the domain.
var ErrNoCalls = errors.New("taumcp: no airline calls in the file")

// Tool is one tool of the domain as τ-bench declares it.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage // the JSON Schema of its parameters
}

// Call is one recorded call.
type Call struct {
	// Session groups the calls of one τ-bench task ("<split>/<task>").
	Session string
	Name    string
	// Arguments is the call's arguments as compact JSON text.
	Arguments string
}

// Workload is the domain's tools and its calls in the recorded order.
type Workload struct {
	Tools []Tool
	Calls []Call
}

// Sessions is how many distinct sessions the calls belong to.
func (w *Workload) Sessions() int {
	seen := map[string]bool{}
	for _, c := range w.Calls {
		seen[c.Session] = true
	}
	return len(seen)
}

// Load reads the airline domain of τ-bench's expected-calls.json.
func Load(path string) (*Workload, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var data map[string]struct {
		Tools map[string]struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"tools"`
		Calls []struct {
			Split     string          `json:"split"`
			Task      int             `json:"task"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("taumcp: %s: %w", path, err)
	}
	d := data[Domain]
	if len(d.Calls) == 0 {
		return nil, ErrNoCalls
	}
	w := &Workload{}
	for name, t := range d.Tools {
		w.Tools = append(w.Tools, Tool{Name: name, Description: t.Description, Schema: t.Parameters})
	}
	for i, c := range d.Calls {
		text := c.Arguments
		var s string
		if json.Unmarshal(c.Arguments, &s) == nil { // arguments recorded as a JSON string
			text = []byte(s)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, text); err != nil {
			return nil, fmt.Errorf("taumcp: %s: call %d: arguments: %w", path, i, err)
		}
		if _, ok := d.Tools[c.Name]; !ok {
			return nil, fmt.Errorf("taumcp: %s: call %d names the unknown tool %q", path, i, c.Name)
		}
		w.Calls = append(w.Calls, Call{Session: c.Split + "/" + strconv.Itoa(c.Task), Name: c.Name, Arguments: buf.String()})
	}
	return w, nil
}
