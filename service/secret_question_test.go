package service

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// dispatcherReplies hands answers and client results to a dispatcher and
// returns its errors as they are, as the serve command does.
type dispatcherReplies struct{ d *actors.Dispatcher }

func (r *dispatcherReplies) Answer(ctx context.Context, session, callID, text string) error {
	return r.d.Answer(ctx, session, callID, text, false)
}

func (r *dispatcherReplies) AnswerSecret(ctx context.Context, session, callID, value string, origins []string) error {
	return r.d.AnswerWith(ctx, session, callID, toolkit.Answer{Text: value, Origins: origins})
}

func (r *dispatcherReplies) ClientResult(ctx context.Context, session, callID, content string, isError bool) error {
	return r.d.ClientResult(ctx, session, callID, content, isError)
}

// TestSecretQuestion: a store_secret question is pending with the origins
// the model proposed, the operator page shows them with a hidden value
// field, and an answer through the API that keeps one origin stores the
// secret bound to that one only.
func TestSecretQuestion(t *testing.T) {
	t.Setenv(secrets.EnvKey, "")
	sec, err := secrets.Open(cachestore.NewMemory(), t.TempDir()+"/secret.key", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	r := &dispatcherReplies{}
	f := newFixture(t, fixtureOpts{replies: r, tools: []toolkit.Tool{secrets.StoreSecretTool(sec)}})
	r.d = f.disp
	events := f.openSSE("GET", "/v1/sessions/sec-s/events", nil, "")
	done := f.postTurnAsync(t.Context(), "sec-s", turn("r1", "all",
		call(t, "k1", "store_secret", map[string]any{"name": "K", "origins": []string{"https://a.example", "https://B.example:8443/"}})))
	events.until(toolkit.QuestionSecret, "k1")

	var pending struct {
		Questions []PendingQuestion `json:"questions"`
	}
	resp, body := f.do("GET", "/v1/pending", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("pending: %d %s", resp.StatusCode, body)
	}
	mustUnmarshal(t, body, &pending)
	want := []string{"https://a.example:443", "https://b.example:8443"}
	if len(pending.Questions) != 1 || pending.Questions[0].Secret != "K" || !slices.Equal(pending.Questions[0].Origins, want) ||
		!strings.Contains(pending.Questions[0].Question, "https://a.example:443, https://b.example:8443") {
		t.Fatalf("pending questions: %s", body)
	}

	_, body = f.do("GET", "/", nil)
	page := string(body)
	for _, part := range []string{
		`data-call-id="k1" data-secret="K"`,
		`<input type="password" class="answer-text"`,
		`<input type="checkbox" class="origin" value="https://a.example:443" checked>`,
		`<input type="checkbox" class="origin" value="https://b.example:8443" checked>`,
	} {
		if !strings.Contains(page, part) {
			t.Errorf("the page lacks %s", part)
		}
	}

	resp, body = f.do("POST", "/v1/sessions/sec-s/answer/k1", map[string]any{"text": "value-of-K-1234", "origins": []string{"https://b.example:8443"}})
	if resp.StatusCode != 200 {
		t.Fatalf("answer: %d %s", resp.StatusCode, body)
	}
	res := awaitTurn(t, done)
	if res.code != 200 || strings.Contains(res.body, "value-of-K-1234") || !strings.Contains(res.body, `"status":"ok"`) {
		t.Fatalf("turn: %d %s", res.code, res.body)
	}
	got, err := sec.Origins(context.Background(), "K")
	if err != nil || !slices.Equal(got, []string{"https://b.example:8443"}) {
		t.Errorf("stored origins %v, %v", got, err)
	}
}
