package script

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

func TestExtTools(t *testing.T) {
	type seen struct {
		method, contentType, auth, body string
	}
	requests := make(chan seen, 16)
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		requests <- seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(body)}
		switch r.URL.Path {
		case "/upper":
			io.WriteString(w, strings.ToUpper(string(body)))
		case "/big":
			io.WriteString(w, strings.Repeat("x", 1000))
		case "/broken":
			http.Error(w, "database is down", http.StatusServiceUnavailable)
		case "/redirect":
			http.Redirect(w, r, "/upper", http.StatusTemporaryRedirect)
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer ts.Close()
	defer close(release)

	cfg := Config{Ext: ExtConfig{Tools: []ExtSpec{
		{
			Name: "upper", Description: "Upper-cases.", URL: ts.URL + "/upper", Concurrent: true, ReadOnly: true,
			Headers: map[string]string{"Authorization": "Bearer s3cret"},
			Schema:  `{"type": "object", "properties": {"text": {"type": "string"}}}`,
			Example: `{"text":"hi"}`,
		},
		{Name: "big", URL: ts.URL + "/big", MaxOutput: 256},
		{Name: "broken", URL: ts.URL + "/broken"},
		{Name: "redirect", URL: ts.URL + "/redirect"},
		{Name: "slow", URL: ts.URL + "/slow", Timeout: 200 * time.Millisecond},
	}}}
	reg := toolkit.NewRegistry()
	infos, err := Register(reg, cfg, t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if in := infos[0]; in.Name != "ext_upper" || in.Source != toolkit.SourceExt || !in.ReadOnly || !in.Concurrent || string(in.Example) != `{"text":"hi"}` {
		t.Errorf("ext_upper registered as %+v", in)
	}
	if tool, _ := reg.Lookup("ext_big"); tool.Concurrent || tool.ReadOnly {
		t.Errorf("ext_big concurrent %v read-only %v; want false, false", tool.Concurrent, tool.ReadOnly)
	}

	t.Run("POST of the canonical arguments", func(t *testing.T) {
		got, err := call(t, context.Background(), reg, "ext_upper", `{"text": "hello", "n": 1}`)
		if err != nil || got != `{"N":1,"TEXT":"HELLO"}` {
			t.Errorf("upper = %q, %v", got, err)
		}
		r := <-requests
		want := seen{"POST", "application/json", "Bearer s3cret", `{"n":1,"text":"hello"}`}
		if r != want {
			t.Errorf("request %+v, want %+v", r, want)
		}
	})

	t.Run("body cut at max_output", func(t *testing.T) {
		got, err := call(t, context.Background(), reg, "ext_big", `{}`)
		<-requests
		if err != nil || !strings.HasPrefix(got, strings.Repeat("x", 256)+"\n[… answer cut at 256 bytes") {
			t.Errorf("big = %q, %v", got, err)
		}
	})

	t.Run("error status", func(t *testing.T) {
		_, err := call(t, context.Background(), reg, "ext_broken", `{}`)
		<-requests
		if err == nil || !strings.Contains(err.Error(), "HTTP 503 Service Unavailable") || !strings.Contains(err.Error(), "database is down") {
			t.Errorf("broken: %v", err)
		}
	})

	t.Run("redirects are not followed", func(t *testing.T) {
		_, err := call(t, context.Background(), reg, "ext_redirect", `{}`)
		<-requests
		if err == nil || !strings.Contains(err.Error(), "HTTP 307") {
			t.Errorf("redirect: %v", err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		began := time.Now()
		_, err := call(t, context.Background(), reg, "ext_slow", `{}`)
		<-requests
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("slow: %v; want a deadline error", err)
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Errorf("timed-out call returned after %s", d)
		}
	})
}
