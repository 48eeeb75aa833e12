package service

import (
	"net/http"
	"testing"
)

// TestRepliesWithTheDispatchersErrors: a Replies that returns the
// dispatcher's errors as they are (dispatcherReplies, as the serve command
// and a program that embeds the service do) gets 404 when nothing is
// pending, not a server error.
func TestRepliesWithTheDispatchersErrors(t *testing.T) {
	r := &dispatcherReplies{}
	f := newFixture(t, fixtureOpts{replies: r})
	r.d = f.disp
	for path, req := range map[string]any{
		"/v1/sessions/s/answer/q1":        map[string]any{"text": "x"},
		"/v1/sessions/s/client_result/c1": map[string]any{"content": "x"},
	} {
		resp, body := f.do("POST", path, req)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s with nothing pending: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
}
