package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// followEvents follows a session's event stream on a member (client c)
// and sends each event to the returned channel until ctx ends.
func followEvents(t *testing.T, ctx context.Context, c *http.Client, base, session string) <-chan map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions/"+session+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("event stream of %s: status %d", session, resp.StatusCode)
	}
	out := make(chan map[string]any, 64)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			var ev map[string]any
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev) != nil {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// waitEvent returns the first event of kind from evs, or fails when ctx
// ends first.
func waitEvent(t *testing.T, ctx context.Context, evs <-chan map[string]any, kind string) map[string]any {
	t.Helper()
	var seen []any
	for {
		select {
		case ev := <-evs:
			if ev["event"] == kind {
				return ev
			}
			seen = append(seen, ev["event"])
		case <-ctx.Done():
			t.Fatalf("no %s event arrived (saw %v)", kind, seen)
		}
	}
}

// postJSON posts body to url with client c and returns the status and
// the reply's body.
func postJSON(ctx context.Context, c *http.Client, url string, body any, header ...string) (int, string, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(rb), nil
}

func toolCall(id, name string, args map[string]any) map[string]any {
	a, _ := json.Marshal(args)
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(a)}}
}

// TestClusterAnswerOnAnotherMember runs ask_user and store_secret on the
// member that owns their session and answers both through the other
// member's HTTP API: the questions reach the other member's event stream,
// the answers reach the waiting calls (the secret narrowed to one of the
// two origins proposed), a second answer is refused as already answered
// by the owner, and the secret's value appears in no event, reply or log.
func TestClusterAnswerOnAnotherMember(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	const secret = "cr0ss-MEMBER-5e4d3c2b1a"
	ms, ports := startCluster(t, 2, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	first, err := postTurn(ctx, ms[0].http, "asks", "", commandCall("warm", "true"))
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ports, 2, first.Member)
	other := ms[1-owner]
	c := http.DefaultClient
	evs := followEvents(t, ctx, c, other.http, "asks")

	// The turn goes to the owner itself: nothing of it passes the other
	// member but the events and the answers.
	type result struct {
		code int
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, body, err := postJSON(ctx, c, ms[owner].http+"/v1/sessions/asks/turns", map[string]any{
			"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
			"message": map[string]any{"role": "assistant", "tool_calls": []any{
				toolCall("q1", "ask_user", map[string]any{"question": "Which colour?"}),
				toolCall("s1", "store_secret", map[string]any{"name": "TOKEN", "description": "the test service",
					"origins": []string{"https://a.example", "https://b.example"}}),
			}}})
		done <- result{code, body, err}
	}()

	q := waitEvent(t, ctx, evs, "ask_user")
	if q["call_id"] != "q1" {
		t.Fatalf("question event %v", q)
	}
	code, body, err := postJSON(ctx, c, other.http+"/v1/sessions/asks/answer/q1", map[string]any{"text": "blue"})
	if err != nil || code != 200 {
		t.Fatalf("answer on the other member: %d %s %v\nowner log:\n%s", code, body, err, ms[owner].log)
	}
	code, body, _ = postJSON(ctx, c, other.http+"/v1/sessions/asks/answer/q1", map[string]any{"text": "red"})
	if code != http.StatusConflict || !strings.Contains(body, "already_answered") {
		t.Errorf("a second answer on the other member: %d %s, want 409 already_answered", code, body)
	}

	s := waitEvent(t, ctx, evs, "secret_request")
	if s["call_id"] != "s1" {
		t.Fatalf("secret event %v", s)
	}
	code, body, err = postJSON(ctx, c, other.http+"/v1/sessions/asks/answer/s1",
		map[string]any{"text": secret, "origins": []string{"https://b.example"}})
	if err != nil || code != 200 {
		t.Fatalf("secret answer on the other member: %d %s %v", code, body, err)
	}

	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the turn never ended")
	}
	if res.err != nil || res.code != 200 {
		t.Fatalf("turn: %d %s %v", res.code, res.body, res.err)
	}
	var tr turnReply
	if err := json.Unmarshal([]byte(res.body), &tr); err != nil || len(tr.Messages) != 2 {
		t.Fatalf("turn reply %s: %v", res.body, err)
	}
	if m := tr.Messages[0]; m.Status != "ok" || !strings.Contains(m.Content, "blue") {
		t.Errorf("ask_user answered on the other member: %+v", m)
	}
	if m := tr.Messages[1]; m.Status != "ok" || !strings.Contains(m.Content, "only to https://b.example") ||
		strings.Contains(m.Content, "a.example") {
		t.Errorf("store_secret answered on the other member, narrowed to b.example: %+v", m)
	}
	t.Logf("answers on %s for a session owned by %s: %s | %s", other.http, first.Member, tr.Messages[0].Content, tr.Messages[1].Content)

	// An unknown call id: no pending question, from either member.
	code, _, _ = postJSON(ctx, c, other.http+"/v1/sessions/asks/answer/nope", map[string]any{"text": "x"})
	if code != http.StatusNotFound {
		t.Errorf("an answer to no question: %d, want 404", code)
	}
	for i, m := range ms {
		if strings.Contains(m.log.String(), secret) {
			t.Errorf("member %d's log holds the secret", i)
		}
	}
	if strings.Contains(res.body, secret) {
		t.Error("the turn's reply holds the secret")
	}
}
