package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStreamableHTTPURLHost: the URL of a Streamable HTTP server is dialled
// in the one host form of the web tools; a host that does not survive IDNA
// Lookup is a configuration error that says so.
func TestStreamableHTTPURLHost(t *testing.T) {
	for _, u := range []string{"http://xn--zz.example/mcp", "https://a..b.example/mcp", "http://1.2.3.4.5/mcp"} {
		err := Config{Servers: []ServerConfig{{Name: "a", URL: u}}}.Validate()
		if err == nil || !strings.Contains(err.Error(), "mcp.servers[0].url") || !strings.Contains(err.Error(), "not a valid host name") {
			t.Errorf("Validate(url %q) = %v; want an error saying the host is not a valid host name", u, err)
		}
	}
	for _, u := range []string{"http://API.Example.Test./mcp", "https://ap\u0130.example.test/mcp"} {
		if err := (Config{Servers: []ServerConfig{{Name: "a", URL: u}}}).Validate(); err != nil {
			t.Errorf("Validate(url %q) = %v", u, err)
		}
	}
}

// TestStreamableHTTPHeadersStayOnTheEndpoint: the configured headers (a
// credential) go only to the configured endpoint's origin; a server that
// redirects elsewhere does not hand them to the other host.
func TestStreamableHTTPHeadersStayOnTheEndpoint(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "other", Version: "1"}, nil)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	var saw []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		saw = append(saw, r.Header.Get("X-Test-Token"))
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(endpoint.Close)

	h := newHarness(t, []ServerConfig{{Name: "web", URL: endpoint.URL + "/mcp", Headers: map[string]string{"X-Test-Token": "s3cret"}}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_ = h.m.Start(ctx) // whether it connects through the redirect or not
	mu.Lock()
	defer mu.Unlock()
	for _, tok := range saw {
		if tok != "" {
			t.Errorf("the other host got the endpoint's header %q", tok)
		}
	}
}
