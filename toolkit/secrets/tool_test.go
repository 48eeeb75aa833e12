package secrets

import (
	"bytes"
	"context"
	"errors"
	"slices"
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
			args: `{"name":"GITHUB_TOKEN","description":"GitHub token with repo scope","origins":["https://api.github.com"]}`,
			ask: func(_ context.Context, q toolkit.Question) (toolkit.Answer, error) {
				if q.Kind != toolkit.QuestionSecret || q.Name != "GITHUB_TOKEN" || !strings.Contains(q.Text, "repo scope") {
					return toolkit.Answer{}, errors.New("unexpected question")
				}
				return toolkit.Answer{Text: "  " + secretValue + "\n"}, nil
			},
			stored: true},
		{name: "nobody to ask", args: `{"name":"A_KEY","origins":["https://a.example"]}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{}, toolkit.ErrNobodyToAsk
			},
			skipped: true},
		{name: "declined", args: `{"name":"A_KEY","origins":["https://a.example"]}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{Declined: true}, nil
			},
			skipped: true},
		{name: "empty answer", args: `{"name":"A_KEY","origins":["https://a.example"]}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{Text: "  "}, nil
			},
			skipped: true},
		{name: "nobody answered in time", args: `{"name":"A_KEY","origins":["https://a.example"]}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{}, context.DeadlineExceeded
			},
			skipped: true},
		{name: "call canceled", args: `{"name":"A_KEY","origins":["https://a.example"]}`,
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
		{name: "value too short", args: `{"name":"A_KEY","origins":["https://a.example"]}`,
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

// TestStoreSecretOrigins: the model proposes origins, the human sees them
// with the question and may keep fewer, never more; without origins
// nobody is asked.
func TestStoreSecretOrigins(t *testing.T) {
	s, _ := openTest(t, cachestore.NewMemory(), nil)
	tool := StoreSecretTool(s)
	if err := s.Bind("OPS_KEY", "https://ops.example"); err != nil {
		t.Fatal(err)
	}
	run := func(args string, ask toolkit.Asker) (toolkit.Result, error) {
		t.Helper()
		a, err := toolkit.ParseArgs(args, toolkit.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		return tool.Handler(context.Background(), &toolkit.Call{Name: StoreSecretName, Args: a, Ask: ask, Emit: func(string) {}})
	}
	var asked toolkit.Question
	answer := func(a toolkit.Answer) toolkit.Asker {
		return func(_ context.Context, q toolkit.Question) (toolkit.Answer, error) {
			asked = q
			return a, nil
		}
	}
	notAsked := func(context.Context, toolkit.Question) (toolkit.Answer, error) {
		t.Error("the human was asked")
		return toolkit.Answer{}, nil
	}
	two := `"origins":["https://API.one.example/","http://two.example:8080"]`

	// Proposed origins are shown, normalised, and stored when confirmed.
	res, err := run(`{"name":"K1",`+two+`}`, answer(toolkit.Answer{Text: secretValue}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://two.example:8080", "https://api.one.example:443"}; !slices.Equal(asked.Origins, want) {
		t.Errorf("question origins %v, want %v", asked.Origins, want)
	}
	for _, part := range []string{"sent only to: http://two.example:8080, https://api.one.example:443", "fewer"} {
		if !strings.Contains(asked.Text, part) {
			t.Errorf("question %q lacks %q", asked.Text, part)
		}
	}
	if !strings.Contains(res.Content, "sent only to http://two.example:8080, https://api.one.example:443") {
		t.Errorf("result: %q", res.Content)
	}
	if got, _ := s.Origins(context.Background(), "K1"); len(got) != 2 {
		t.Errorf("stored origins %v", got)
	}

	// The human keeps one of them.
	if _, err := run(`{"name":"K2",`+two+`}`, answer(toolkit.Answer{Text: secretValue, Origins: []string{"https://api.one.example"}})); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Origins(context.Background(), "K2"); !slices.Equal(got, []string{"https://api.one.example:443"}) {
		t.Errorf("narrowed origins %v", got)
	}

	// An answer cannot add an origin: nothing is stored.
	_, err = run(`{"name":"K3",`+two+`}`, answer(toolkit.Answer{Text: secretValue, Origins: []string{"https://evil.example"}}))
	if err == nil || !strings.Contains(err.Error(), "https://evil.example:443 was not among the origins asked about") {
		t.Errorf("widening answer: %v", err)
	}
	if ok, _ := s.Has(context.Background(), "K3"); ok {
		t.Error("a widening answer stored the secret")
	}

	// No origins and no binding: refused before anyone is asked.
	_, err = run(`{"name":"K4"}`, notAsked)
	if err == nil || !strings.Contains(err.Error(), "pass origins") {
		t.Errorf("no origins: %v", err)
	}
	_, err = run(`{"name":"K4","origins":["https://x.example/path"]}`, notAsked)
	if err == nil || !strings.Contains(err.Error(), "origins:") {
		t.Errorf("bad origin: %v", err)
	}

	// A secret the operator bound needs no proposal; the question says so.
	if _, err := run(`{"name":"OPS_KEY"}`, answer(toolkit.Answer{Text: secretValue})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(asked.Text, "The configuration lets it go to: https://ops.example:443") {
		t.Errorf("question: %q", asked.Text)
	}
	if got, _ := s.Origins(context.Background(), "OPS_KEY"); !slices.Equal(got, []string{"https://ops.example:443"}) {
		t.Errorf("operator-bound origins %v", got)
	}
}
