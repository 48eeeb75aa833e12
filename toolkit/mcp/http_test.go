package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// textResult is a tool result of one text block.
func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func TestStreamableHTTPInProcess(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "web-test", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{
		Name:        "greet",
		Description: "Greets someone.",
		// No $schema: the MCP default, 2020-12, applies.
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		return textResult("hello, " + args.Name), nil
	})
	cancelled := make(chan struct{}, 1)
	srv.AddTool(&mcp.Tool{
		Name:        "block",
		Description: "Waits until cancelled.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			offer(cancelled, struct{}{})
			return nil, ctx.Err()
		case <-time.After(waitLimit):
			return textResult("not cancelled"), nil
		}
	})
	srv.AddTool(&mcp.Tool{
		Name:        "fail",
		Description: "Always fails.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the widget is jammed"}}}, nil
	})
	srv.AddTool(&mcp.Tool{
		Name:        "mixed",
		Description: "Returns several kinds of content.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "chart follows"},
			&mcp.ImageContent{MIMEType: "image/png", Data: tinyPNG},
			&mcp.ResourceLink{URI: "file:///tmp/report.csv", Name: "report", MIMEType: "text/csv"},
		}}, nil
	})

	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Token") != "s3cret" {
			http.Error(w, "missing token", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	// Runs after the manager's Close (cleanups run last first).
	t.Cleanup(ts.Close)

	h := newHarness(t, []ServerConfig{{
		Name: "web", URL: ts.URL, Trusted: true, Headers: map[string]string{"X-Test-Token": "s3cret"},
		Timeout: 300 * time.Millisecond,
	}})
	h.start()

	t.Run("call", func(t *testing.T) {
		got, err := h.call(context.Background(), "mcp__web__greet", `{"name":"Ada"}`)
		if err != nil || got != "hello, Ada" {
			t.Errorf("greet = %q, %v", got, err)
		}
		if !h.tool("mcp__web__greet").ReadOnly || h.tool("mcp__web__block").ReadOnly {
			t.Errorf("read-only: greet %v, block %v; want true, false", h.tool("mcp__web__greet").ReadOnly, h.tool("mcp__web__block").ReadOnly)
		}
	})

	t.Run("2020-12 schema without $schema", func(t *testing.T) {
		sch, err := h.reg.Schemas.Compile(h.tool("mcp__web__greet").Schema)
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(map[string]any{"name": "", "extra": true}); err == nil ||
			!strings.Contains(err.Error(), `field "extra": not allowed`) || !strings.Contains(err.Error(), `field "name": at least 1 character`) {
			t.Errorf("validation error %v; want both problems named", err)
		}
	})

	t.Run("isError", func(t *testing.T) {
		_, err := h.call(context.Background(), "mcp__web__fail", `{}`)
		var te *ToolError
		if !errors.As(err, &te) || err.Error() != "the widget is jammed" {
			t.Errorf("fail: %v; want a *ToolError with the server's text", err)
		}
	})

	t.Run("other content summarised", func(t *testing.T) {
		got, err := h.call(context.Background(), "mcp__web__mixed", `{}`)
		want := "chart follows\n[image 1: image/png, 70 bytes]\n[resource link: file:///tmp/report.csv (report), text/csv]"
		if err != nil || got != want {
			t.Errorf("mixed = %q, %v; want %q", got, err, want)
		}
	})

	t.Run("timeout tells the server", func(t *testing.T) {
		began := time.Now()
		_, err := h.call(context.Background(), "mcp__web__block", `{}`)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("block: %v; want a deadline error", err)
		}
		next(t, "the server-side cancellation", cancelled)
		t.Logf("server saw the cancellation %s after the call began", time.Since(began).Round(time.Millisecond))
	})

	t.Run("list_changed adds and removes tools", func(t *testing.T) {
		srv.AddTool(&mcp.Tool{Name: "later", Description: "Added at run time.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult("late"), nil
			})
		waitUntil(t, "mcp__web__later", h.ev.synced, func() bool { _, ok := h.reg.Lookup("mcp__web__later"); return ok })
		if got, err := h.call(context.Background(), "mcp__web__later", `{}`); err != nil || got != "late" {
			t.Errorf("later = %q, %v", got, err)
		}
		srv.RemoveTools("greet")
		waitUntil(t, "greet removed", h.ev.synced, func() bool { _, ok := h.reg.Lookup("mcp__web__greet"); return !ok })
		if got := strings.Join(h.names(""), " "); got != "mcp__web__block mcp__web__fail mcp__web__later mcp__web__mixed" {
			t.Errorf("registered after the changes: %s", got)
		}
	})
}

func TestStreamableHTTPEverything(t *testing.T) {
	argv := serverCommand(t, "server-everything", "streamableHttp")
	port := freePort(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "listening on port") {
				close(ready)
				signalled = true
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-scanDone
		_ = cmd.Wait()
	})
	next(t, "server-everything listening", ready)

	h := newHarness(t, []ServerConfig{{Name: "everything-http", URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp", Trusted: true}})
	h.start()
	got, err := h.call(context.Background(), "mcp__everything-http__echo", `{"message":"over HTTP"}`)
	if err != nil || got != "Echo: over HTTP" {
		t.Errorf("echo = %q, %v", got, err)
	}
	got, err = h.call(context.Background(), "mcp__everything-http__get-sum", `{"a":40,"b":2}`)
	if err != nil || got != "The sum of 40 and 2 is 42." {
		t.Errorf("get-sum = %q, %v", got, err)
	}
	if !h.tool("mcp__everything-http__echo").ReadOnly {
		t.Error("echo of a trusted server is not read-only")
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
