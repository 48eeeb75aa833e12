package bench

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

func TestTurnBodyIsTheTurnRequest(t *testing.T) {
	var got struct {
		Run             string `json:"run"`
		Provider        string `json:"provider"`
		Approve         string `json:"approve"`
		AutoLoadSchemas bool   `json:"auto_load_schemas"`
		Message         struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	}
	b := turnBody([]byte("stale"), 7, 3)[len("stale"):]
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if got.Run != "load" || got.Provider != toolkit.ProviderClaudeCode || got.Approve != actors.ApproveAll || !got.AutoLoadSchemas ||
		got.Message.Role != "assistant" || len(got.Message.ToolCalls) != 3 {
		t.Fatalf("body %s", b)
	}
	for i, c := range got.Message.ToolCalls {
		var args struct{ Expression string }
		if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
			t.Fatalf("call %d arguments %q: %v", i, c.Function.Arguments, err)
		}
		if c.ID != "c"+strconv.Itoa(i) || c.Type != "function" || c.Function.Name != "calculate" || args.Expression != strconv.Itoa(21+i)+" * 3" {
			t.Fatalf("call %d: %+v", i, c)
		}
	}
}
