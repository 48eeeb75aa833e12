// Package einotool turns cloudwego/eino tools into tooldispatch tools, so
// tools an agent program already has as eino tool.InvokableTool or
// tool.StreamableTool values (utils.InferTool, utils.NewTool, eino-ext
// tools) are dispatched by tooldispatch: validated against their schema,
// deduplicated, limited, confirmed and stored like any other tool.
//
//	t, err := einotool.New(ctx, weather, toolkit.Tool{Concurrent: true, ReadOnly: true})
//	if err != nil { … }
//	reg.Register(t)
//
// The name, description and argument schema come from the eino tool's Info;
// the eino tool receives the canonical arguments (validated, keys sorted),
// never the model's raw text. An input struct tagged for eino
// (`jsonschema:"description=…"`) also serves toolkit.Typed, which reads
// eino's tags as well as go-sdk's (see Example). This package lives in a
// module of its own so that the tooldispatch module does not depend on
// eino; its tests run with "go test ./..." inside toolkit/einotool.
package einotool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cloudwego/eino/components/tool"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// New returns the tooldispatch tool that runs et. Name, Description and
// Schema are taken from et.Info unless set in flags; every other field of
// flags (Concurrent, ReadOnly, Timeout, Paths, AlwaysInArray, …) is kept, so
// an eino tool is, like any tool, sequential and in need of approval unless
// flags say otherwise.
//
// A tool.StreamableTool is run with StreamableRun: each chunk is emitted as
// progress (a tool_call_text event) and the chunks joined are the result.
// Otherwise et must be a tool.InvokableTool. An error of the eino tool is the
// call's status error.
func New(ctx context.Context, et tool.BaseTool, flags toolkit.Tool) (toolkit.Tool, error) {
	info, err := et.Info(ctx)
	if err != nil {
		return toolkit.Tool{}, fmt.Errorf("einotool: Info: %w", err)
	}
	if info == nil {
		return toolkit.Tool{}, errors.New("einotool: Info returned no tool info")
	}
	t := flags
	if t.Name == "" {
		t.Name = info.Name
	}
	if t.Description == "" {
		t.Description = info.Desc
	}
	if len(t.Schema) == 0 {
		t.Schema = json.RawMessage(`{"type":"object"}`)
		if info.ParamsOneOf != nil {
			s, err := info.ParamsOneOf.ToJSONSchema()
			if err != nil {
				return toolkit.Tool{}, fmt.Errorf("einotool: %s: the schema: %w", t.Name, err)
			}
			if s != nil {
				if t.Schema, err = json.Marshal(s); err != nil {
					return toolkit.Tool{}, fmt.Errorf("einotool: %s: the schema: %w", t.Name, err)
				}
			}
		}
	}
	switch et := et.(type) {
	case tool.StreamableTool:
		t.Handler = func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			sr, err := et.StreamableRun(ctx, string(c.Args.Canonical))
			if err != nil {
				return toolkit.Result{}, err
			}
			defer sr.Close()
			var out strings.Builder
			for {
				chunk, err := sr.Recv()
				if errors.Is(err, io.EOF) {
					return toolkit.Result{Content: out.String()}, nil
				}
				if err != nil {
					return toolkit.Result{}, err
				}
				c.Emit(chunk)
				out.WriteString(chunk)
			}
		}
	case tool.InvokableTool:
		t.Handler = func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			out, err := et.InvokableRun(ctx, string(c.Args.Canonical))
			if err != nil {
				return toolkit.Result{}, err
			}
			return toolkit.Result{Content: out}, nil
		}
	default:
		return toolkit.Tool{}, fmt.Errorf("einotool: %s is neither a tool.InvokableTool nor a tool.StreamableTool", t.Name)
	}
	return t, nil
}
