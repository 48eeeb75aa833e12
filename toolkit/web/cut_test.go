package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// minFragment is the shortest piece of tokenValue counted as a leak.
const minFragment = 5

// fragmentOf returns the longest piece (at least minFragment bytes) of
// value that text holds, or "".
func fragmentOf(text, value string) string {
	for n := len(value); n >= minFragment; n-- {
		for i := 0; i+n <= len(value); i++ {
			if strings.Contains(text, value[i:i+n]) {
				return value[i : i+n]
			}
		}
	}
	return ""
}

// endsWithPrefix returns the longest start of value that text ends with
// (trailing line breaks aside), or "".
func endsWithPrefix(text, value string) string {
	text = strings.TrimRight(text, "\n")
	for n := len(value) - 1; n > 0; n-- {
		if strings.HasSuffix(text, value[:n]) {
			return value[:n]
		}
	}
	return ""
}

// brokenMarker reports whether text holds the start of a redaction marker
// without its end.
func brokenMarker(text, name string) bool {
	return strings.Count(text, "[secret:") != strings.Count(text, "[secret:"+name+"]")
}

// TestHTTPRequestCutNeverShowsASecretPrefix: the secret's own origin echoes
// it, and the model picks max_chars (and the padding before the value) so
// that the cut falls inside it. Nothing of the value may show: the body is
// redacted whole, then cut, and never inside the marker.
func TestHTTPRequestCutNeverShowsASecretPrefix(t *testing.T) {
	a := newSite(t)
	deps := testDeps(newFakeClock())
	deps.Secrets = boundSecrets(t, "T", tokenValue, origin(t, a.URL))
	w := newWeb(t, deps)
	args := func(maxChars int) obj {
		return obj{"url": a.URL + "/echo/" + strings.Repeat("p", 150), "headers": obj{"X-Api-Key": "${secret:T}"}, "max_chars": maxChars}
	}
	res, err := call(t, w, HTTPRequestName, "s1", args(maxResponseChars))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(res.Content, "\n\n")
	at := strings.Index(body, "[secret:T]")
	if at < 100 {
		t.Fatalf("the echo does not hold the marker past 100 characters:\n%s", res.Content)
	}
	// Every cut inside the value as the server sent it, and inside the
	// marker that replaces it.
	for k := 1; k < len(tokenValue); k++ {
		res, err := call(t, w, HTTPRequestName, "s1", args(at+k))
		if err != nil {
			t.Fatal(err)
		}
		shown, _, _ := strings.Cut(res.Content, "\n[body cut")
		if p := endsWithPrefix(shown, tokenValue); p != "" {
			t.Errorf("max_chars %d: the cut body ends with %q, %d of the secret's %d characters", at+k, p, len(p), len(tokenValue))
		}
		if f := fragmentOf(res.Content, tokenValue); f != "" {
			t.Errorf("max_chars %d: the result holds %q of the secret", at+k, f)
		}
		if brokenMarker(res.Content, "T") {
			t.Errorf("max_chars %d: the cut landed inside the marker: …%q", at+k, shown[max(0, len(shown)-30):])
		}
	}
}

// echoAt is a server that answers status with pad characters and then the
// value of the request's X-Api-Key header (pad and status from the query,
// which the model chooses).
func echoAt(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pad, _ := strconv.Atoi(r.URL.Query().Get("pad"))
		code, _ := strconv.Atoi(r.URL.Query().Get("status"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"%s%s","more":"%s"}`, strings.Repeat("x", pad), r.Header.Get("X-Api-Key"), strings.Repeat("y", 3000))
	}))
	t.Cleanup(s.Close)
	return s
}

// TestHTTPRequestErrorExcerptNeverShowsASecretPrefix: an error answer
// echoes the secret where the error's excerpt is cut.
func TestHTTPRequestErrorExcerptNeverShowsASecretPrefix(t *testing.T) {
	s := echoAt(t)
	deps := testDeps(newFakeClock())
	deps.Secrets = boundSecrets(t, "T", tokenValue, origin(t, s.URL))
	w := newWeb(t, deps)
	for _, status := range []int{401, 500} {
		// The excerpt is the collapsed body: {"error":"xxx…: 10 characters
		// before the padding.
		for _, pad := range []int{apiExcerptChars - 10 - 9, apiExcerptChars - 10 - 20} {
			_, err := call(t, w, HTTPRequestName, "s1", obj{"url": s.URL + "/?status=" + strconv.Itoa(status) + "&pad=" + strconv.Itoa(pad),
				"headers": obj{"X-Api-Key": "${secret:T}"}})
			if err == nil {
				t.Fatal("an error answer gave no error")
			}
			if f := fragmentOf(err.Error(), tokenValue); f != "" {
				t.Errorf("HTTP %d, pad %d: the error holds %q of the secret", status, pad, f)
			}
			if brokenMarker(err.Error(), "T") {
				t.Errorf("HTTP %d, pad %d: the excerpt was cut inside the marker", status, pad)
			}
		}
	}
}

// TestFetchPageRedactsBeforeItCuts: a page holds the secret where
// fetch_page cuts: at a passage's length, a link text's length, an error
// page's excerpt.
func TestFetchPageRedactsBeforeItCuts(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/paragraph", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>p</title></head><body><p>%s%s%s</p></body></html>",
			strings.Repeat("x", maxPassage-9), tokenValue, strings.Repeat("y", 1000))
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s%s%s", strings.Repeat("x", maxPassage-9), tokenValue, strings.Repeat("y", 1000))
	})
	mux.HandleFunc("/link", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><p>Links follow.</p><a href="/there">%s%s</a></body></html>`,
			strings.Repeat("z", maxLinkText-8), tokenValue)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "<html><body><p>%s%s</p></body></html>", strings.Repeat("q", excerptChars-9), tokenValue)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	deps := testDeps(newFakeClock())
	deps.Redactor = secrets.NewRedactor(map[string]string{"T": tokenValue})
	w := newWeb(t, deps)
	for _, path := range []string{"/paragraph", "/plain", "/link", "/missing"} {
		res, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + path})
		text := res.Content
		if err != nil {
			text = err.Error()
		}
		if f := fragmentOf(text, tokenValue); f != "" {
			t.Errorf("%s: the result holds %q of the secret: …%q", path, f, around(text, f))
		}
		if brokenMarker(text, "T") {
			t.Errorf("%s: a cut landed inside the marker:\n%s", path, text)
		}
	}
}

// TestSearchWebRedactsBeforeItCuts: a search result's snippet holds the
// secret where the snippet is cut.
func TestSearchWebRedactsBeforeItCuts(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		content := strings.Repeat("s", maxSnippet-9) + tokenValue
		fmt.Fprintf(w, `{"results":[{"url":"https://a.example/","title":"a","content":%q}],
			"infoboxes":[{"infobox":"box","content":%q}]}`, content, content)
	}))
	t.Cleanup(s.Close)
	deps := testDeps(newFakeClock())
	deps.Config.SearchURL = s.URL
	deps.Redactor = secrets.NewRedactor(map[string]string{"T": tokenValue})
	w := newWeb(t, deps)
	res, err := call(t, w, SearchWebName, "s1", obj{"query": "anything"})
	if err != nil {
		t.Fatal(err)
	}
	if f := fragmentOf(res.Content, tokenValue); f != "" {
		t.Errorf("the results hold %q of the secret: …%q", f, around(res.Content, f))
	}
	if brokenMarker(res.Content, "T") {
		t.Errorf("a cut landed inside the marker:\n%s", res.Content)
	}
}

// around returns the text around the first occurrence of f.
func around(text, f string) string {
	i := strings.Index(text, f)
	return text[max(0, i-30):min(len(text), i+len(f)+30)]
}
