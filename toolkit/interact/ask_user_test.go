package interact

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

func TestAskUser(t *testing.T) {
	// answerAfter replies with a after d, or gives up when ctx ends.
	answerAfter := func(d time.Duration, a toolkit.Answer) toolkit.Asker {
		return func(ctx context.Context, q toolkit.Question) (toolkit.Answer, error) {
			select {
			case <-time.After(d):
				return a, nil
			case <-ctx.Done():
				return toolkit.Answer{}, ctx.Err()
			}
		}
	}
	tests := []struct {
		name        string
		args        string
		ask         toolkit.Asker
		want        string // content; "" when an error is wanted
		wantSkipped string // part of the skipped reason
		wantWait    time.Duration
	}{
		{
			name: "answered",
			args: `{"question":"Which database?"}`,
			ask:  answerAfter(time.Minute, toolkit.Answer{Text: " PostgreSQL \n"}),
			want: "The user answered: PostgreSQL",
		},
		{
			name: "option picked by number",
			args: `{"question":"Which database?","options":["SQLite","PostgreSQL"]}`,
			ask:  answerAfter(time.Second, toolkit.Answer{Text: "2"}),
			want: "The user answered: 2 (option 2: PostgreSQL)",
		},
		{
			name: "option picked by text",
			args: `{"question":"Which database?","options":["SQLite","PostgreSQL"]}`,
			ask:  answerAfter(time.Second, toolkit.Answer{Text: "sqlite"}),
			want: "The user answered: sqlite (option 1)",
		},
		{
			name:        "declined",
			args:        `{"question":"Deploy now?"}`,
			ask:         answerAfter(time.Second, toolkit.Answer{Declined: true}),
			wantSkipped: "declined to answer",
		},
		{
			name:        "empty answer",
			args:        `{"question":"Deploy now?"}`,
			ask:         answerAfter(time.Second, toolkit.Answer{Text: "  "}),
			wantSkipped: "empty answer",
		},
		{
			name: "nobody listening",
			args: `{"question":"Deploy now?"}`,
			ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				return toolkit.Answer{}, toolkit.ErrNobodyToAsk
			},
			wantSkipped: "nobody is there",
		},
		{
			name:        "default timeout",
			args:        `{"question":"Deploy now?"}`,
			ask:         answerAfter(time.Hour, toolkit.Answer{Text: "too late"}),
			wantSkipped: "did not answer within 5m0s",
			wantWait:    300 * time.Second,
		},
		{
			name:        "own timeout",
			args:        `{"question":"Deploy now?","timeout_seconds":20}`,
			ask:         answerAfter(time.Hour, toolkit.Answer{Text: "too late"}),
			wantSkipped: "did not answer within 20s",
			wantWait:    20 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := toolkit.NewRegistry()
				Register(reg, Deps{})
				start := time.Now()
				out, err := callTool(t, reg, context.Background(), "ask_user", tt.args, tt.ask)
				if tt.wantSkipped != "" {
					var sk *toolkit.SkippedError
					if !errors.As(err, &sk) || !strings.Contains(sk.Reason, tt.wantSkipped) {
						t.Fatalf("got %q, %v; want skipped with %q", out, err, tt.wantSkipped)
					}
					if !strings.Contains(sk.Reason, "without the answer") {
						t.Errorf("skipped reason does not tell the model to go on: %q", sk.Reason)
					}
				} else if err != nil || out != tt.want {
					t.Fatalf("got %q, %v; want %q", out, err, tt.want)
				}
				if tt.wantWait > 0 {
					if waited := time.Since(start); waited != tt.wantWait {
						t.Errorf("waited %s, want %s", waited, tt.wantWait)
					}
				}
			})
		})
	}
}

func TestAskUserQuestion(t *testing.T) {
	var got []toolkit.Question
	ask := func(_ context.Context, q toolkit.Question) (toolkit.Answer, error) {
		got = append(got, q)
		return toolkit.Answer{Text: "yes"}, nil
	}
	reg := toolkit.NewRegistry()
	Register(reg, Deps{})
	if _, err := callTool(t, reg, context.Background(), "ask_user", `{"question":"Go on?","options":["yes","no"]}`, ask); err != nil {
		t.Fatal(err)
	}
	want := []toolkit.Question{{Kind: toolkit.QuestionText, Text: "Go on?\nOptions:\n1. yes\n2. no"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("question (-want +got):\n%s", diff)
	}
}

func TestAskUserCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ask := func(ctx context.Context, _ toolkit.Question) (toolkit.Answer, error) {
		cancel()
		<-ctx.Done()
		return toolkit.Answer{}, ctx.Err()
	}
	reg := toolkit.NewRegistry()
	Register(reg, Deps{})
	_, err := callTool(t, reg, ctx, "ask_user", `{"question":"Go on?"}`, ask)
	var sk *toolkit.SkippedError
	if !errors.Is(err, context.Canceled) || errors.As(err, &sk) {
		t.Errorf("a canceled call must end with the context's error, not skipped: %v", err)
	}
}

func TestAskUserRefusesBadArguments(t *testing.T) {
	reg := toolkit.NewRegistry()
	Register(reg, Deps{})
	for _, args := range []string{`{}`, `{"question":"x","timeout_seconds":3601}`, `{"question":"x","timeout_seconds":0}`, `{"question":"x","channel":"sms"}`} {
		if _, err := callTool(t, reg, context.Background(), "ask_user", args, nil); err == nil {
			t.Errorf("%s was accepted", args)
		}
	}
}
