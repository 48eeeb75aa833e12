package secrets

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

func TestStoreSecretTool(t *testing.T) {
	var logs bytes.Buffer
	s, _ := openTest(t, cachestore.NewMemory(), &logs)
	tool := StoreSecretTool(s)

	reg := toolkit.NewRegistry()
	reg.Register(tool) // the schema compiles
	if tool.Concurrent || !tool.IsReadOnly(toolkit.Args{}) {
		t.Errorf("store_secret flags: concurrent %v, read-only %v; want false, true", tool.Concurrent, tool.IsReadOnly(toolkit.Args{}))
	}

	tests := []struct {
		name    string
		args    string
		ask     func(ctx context.Context, q toolkit.Question) (toolkit.Answer, error)
		ctx     func() context.Context
		stored  bool
		skipped bool
		err     string
	}{
		{name: "stored",
			args: `{"name":"GITHUB_TOKEN","description":"GitHub token with repo scope"}`,
			ask: func(_ context.Context, q toolkit.Question) (toolkit.Answer, error) {
				if q.Kind != toolkit.QuestionSecret || q.Name != "GITHUB_TOKEN" || !strings.Contains(q.Text, "repo scope") {
					return toolkit.Answer{}, errors.New("unexpected question")
				}
				return toolkit.Answer{Text: "  " + secretValue + "\n"}, nil
			},
			stored: true},
		{name: "nobody to ask", args: `{"name":"A_KEY"}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{}, toolkit.ErrNobodyToAsk
			},
			skipped: true},
		{name: "declined", args: `{"name":"A_KEY"}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{Declined: true}, nil
			},
			skipped: true},
		{name: "empty answer", args: `{"name":"A_KEY"}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{Text: "  "}, nil
			},
			skipped: true},
		{name: "nobody answered in time", args: `{"name":"A_KEY"}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{}, context.DeadlineExceeded
			},
			skipped: true},
		{name: "call canceled", args: `{"name":"A_KEY"}`,
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			ask: func(ctx context.Context, _ toolkit.Question) (toolkit.Answer, error) {
				<-ctx.Done()
				return toolkit.Answer{}, ctx.Err()
			},
			err: "context canceled"},
		{name: "value too short", args: `{"name":"A_KEY"}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{Text: "abc"}, nil
			},
			err: `storing the secret "A_KEY"`},
		{name: "bad name", args: `{"name":"a b"}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				t.Error("asked for a bad name")
				return toolkit.Answer{}, nil
			},
			err: "not a valid secret name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := toolkit.ParseArgs(tt.args, toolkit.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			res, err := tool.Handler(ctx, &toolkit.Call{Name: StoreSecretName, Args: args, Ask: tt.ask, Emit: func(string) {}})
			var skip *toolkit.SkippedError
			switch {
			case tt.skipped:
				if !errors.As(err, &skip) {
					t.Fatalf("want a skipped error, got %v", err)
				}
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			}
			if err != nil && strings.Contains(err.Error(), secretValue) {
				t.Errorf("error holds the value: %v", err)
			}
			if strings.Contains(res.Content, secretValue) {
				t.Errorf("result holds the value: %q", res.Content)
			}
			if tt.stored {
				if !strings.Contains(res.Content, "${secret:GITHUB_TOKEN}") {
					t.Errorf("result does not show the reference: %q", res.Content)
				}
				if got, err := s.Get(context.Background(), "GITHUB_TOKEN"); err != nil || got != secretValue {
					t.Errorf("stored %q, %v; want the trimmed answer", got, err)
				}
			}
		})
	}
	if has, _ := s.Has(context.Background(), "A_KEY"); has {
		t.Error("a skipped or failed call stored a value")
	}
	if strings.Contains(logs.String(), secretValue) {
		t.Errorf("logs hold the value:\n%s", logs.String())
	}
}
