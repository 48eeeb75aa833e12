package secrets

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

func TestRedact(t *testing.T) {
	// A value with characters that every encoding changes.
	const v = "p@ss w/rd+=\"tok&en\""
	r := NewRedactor(map[string]string{"PW": v, "TOKEN": secretValue})
	jsonForm, _ := json.Marshal(v)
	tests := []struct {
		name, in, want string
	}{
		{name: "plain", in: "key=" + secretValue + ";", want: "key=[secret:TOKEN];"},
		{name: "twice", in: secretValue + secretValue, want: "[secret:TOKEN][secret:TOKEN]"},
		{name: "query escaped", in: "?pw=" + url.QueryEscape(v), want: "?pw=[secret:PW]"},
		{name: "path escaped", in: "/u/" + url.PathEscape(v) + "/x", want: "/u/[secret:PW]/x"},
		{name: "JSON escaped", in: `{"pw":` + string(jsonForm) + `}`, want: `{"pw":"[secret:PW]"}`},
		{name: "base64 std", in: "b=" + base64.StdEncoding.EncodeToString([]byte(v)), want: "b=[secret:PW]"},
		{name: "base64 url", in: base64.URLEncoding.EncodeToString([]byte(v)), want: "[secret:PW]"},
		{name: "base64 raw", in: base64.RawStdEncoding.EncodeToString([]byte(secretValue)) + ".", want: "[secret:TOKEN]."},
		{name: "base64 raw url", in: base64.RawURLEncoding.EncodeToString([]byte(v)), want: "[secret:PW]"},
		{name: "placeholder kept", in: "[secret:TOKEN]", want: "[secret:TOKEN]"},
		{name: "nothing to do", in: "nothing secret here", want: "nothing secret here"},
		{name: "empty", in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Redact(tt.in)
			if got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := r.Redact(got); again != got {
				t.Errorf("redacting twice changed %q into %q", got, again)
			}
		})
	}
}

func TestRedactInsideLongerBase64(t *testing.T) {
	r := NewRedactor(map[string]string{"TOKEN": secretValue})
	// The value at each byte offset modulo 3 inside a longer encoded text,
	// as in "Authorization: Basic base64(user:token)".
	for _, prefix := range []string{"user:", "users:", "userss:"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			header := "Basic " + enc.EncodeToString([]byte(prefix+secretValue+"@x"))
			got := r.Redact(header)
			if !strings.Contains(got, "[secret:TOKEN]") {
				t.Errorf("prefix %q: %q not redacted", prefix, got)
			}
			// What is left is the prefix's own encoding and a few
			// characters at the edges, which cannot give the value back.
			rest := strings.ReplaceAll(strings.TrimPrefix(got, "Basic "), "[secret:TOKEN]", "")
			if len(rest) > len(enc.EncodeToString([]byte(prefix)))+6 {
				t.Errorf("prefix %q: %d base64 characters left: %q", prefix, len(rest), got)
			}
		}
	}
}

func TestRedactNilAndEmpty(t *testing.T) {
	var r *Redactor
	if got := r.Redact("x" + secretValue); got != "x"+secretValue {
		t.Errorf("nil redactor changed the text: %q", got)
	}
	if got := (&Redactor{}).Redact("abc"); got != "abc" {
		t.Errorf("zero redactor changed the text: %q", got)
	}
	if got := NewRedactor(nil).Redact("abc"); got != "abc" {
		t.Errorf("empty redactor changed the text: %q", got)
	}
}

func TestRedactLongerValueFirst(t *testing.T) {
	r := NewRedactor(map[string]string{"SHORT": "abcdefgh", "LONG": "abcdefgh-ijklmnop"})
	if got := r.Redact("abcdefgh-ijklmnop abcdefgh"); got != "[secret:LONG] [secret:SHORT]" {
		t.Errorf("got %q", got)
	}
}

func TestStoreRedactorFollowsChanges(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, cachestore.NewMemory(), nil)
	r := s.Redactor()
	if got := r.Redact(secretValue); got != secretValue {
		t.Fatalf("redacted before Put: %q", got)
	}
	if err := s.Put(ctx, "TOKEN", secretValue, ""); err != nil {
		t.Fatal(err)
	}
	if got := r.Redact("a " + secretValue); got != "a [secret:TOKEN]" {
		t.Errorf("after Put: %q", got)
	}
	if err := s.Put(ctx, "TOKEN", "new-value-1234", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "TOKEN"); err != nil {
		t.Fatal(err)
	}
	// Values once known stay redacted: they may still be in a history.
	if got := r.Redact(secretValue + " new-value-1234"); got != "[secret:TOKEN] [secret:TOKEN]" {
		t.Errorf("after Delete: %q", got)
	}
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, cachestore.NewMemory(), nil)
	const api = "https://api.example.com:443"
	if err := s.Put(ctx, "TOKEN", secretValue, "", "https://API.example.com"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "PW", "a b&c/d", "", api, "http://other.example:8080"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "NOWHERE", "nowhere-1234", ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		in     string
		escape func(string) string
		want   string
		used   []string
		err    string
		is     error
		origin string // default api
	}{
		{name: "no reference", in: "plain text", want: "plain text"},
		{name: "one", in: "Bearer ${secret:TOKEN}", want: "Bearer " + secretValue, used: []string{"TOKEN"}},
		{name: "repeated and two", in: "${secret:PW}:${secret:TOKEN}:${secret:PW}",
			want: "a b&c/d:" + secretValue + ":a b&c/d", used: []string{"PW", "TOKEN"}},
		{name: "escaped", in: "https://x/?k=${secret:PW}", escape: url.QueryEscape,
			want: "https://x/?k=a+b%26c%2Fd", used: []string{"PW"}},
		{name: "missing", in: "${secret:NOPE}", err: `secret "NOPE" not found`, is: ErrNotFound},
		{name: "invalid name", in: "${secret:a b}", err: `"a b"`, is: ErrInvalidName},
		{name: "empty name", in: "${secret:}", is: ErrInvalidName},
		{name: "not closed", in: "x ${secret:TOKEN", err: "malformed", is: ErrInvalidName},
		{name: "other origin", origin: "https://evil.example:443", in: "Bearer ${secret:TOKEN}",
			err: `secret "TOKEN" may only be sent to https://api.example.com:443, not to https://evil.example:443`, is: ErrOrigin},
		{name: "other port", origin: "https://api.example.com:8443", in: "${secret:TOKEN}", is: ErrOrigin},
		{name: "other scheme", origin: "http://api.example.com:80", in: "${secret:TOKEN}", is: ErrOrigin},
		{name: "one of two refused", origin: "http://other.example:8080", in: "${secret:PW} ${secret:TOKEN}",
			err: `secret "TOKEN" may only be sent to`, is: ErrOrigin},
		{name: "second origin", origin: "http://other.example:8080", in: "${secret:PW}", want: "a b&c/d", used: []string{"PW"}},
		{name: "bound nowhere", in: "${secret:NOWHERE}", err: `secret "NOWHERE" is bound to no origin`, is: ErrOrigin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := tt.origin
			if origin == "" {
				origin = api
			}
			got, used, err := s.ResolveEscaped(ctx, origin, tt.in, tt.escape)
			if tt.is != nil || tt.err != "" {
				if err == nil {
					t.Fatalf("want an error, got %q", got)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("error %v is not %v", err, tt.is)
				}
				if !strings.Contains(err.Error(), tt.err) {
					t.Errorf("error %q does not say %q", err, tt.err)
				}
				if strings.Contains(err.Error(), secretValue) || strings.Contains(err.Error(), "a b&c/d") {
					t.Errorf("error holds a value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if strings.Join(used, ",") != strings.Join(tt.used, ",") {
				t.Errorf("used %v, want %v", used, tt.used)
			}
		})
	}

	var none *Store
	if _, _, err := none.Resolve(ctx, api, "${secret:X}"); err == nil || !strings.Contains(err.Error(), `secret "X" not found`) {
		t.Errorf("nil store: %v", err)
	}
	if got, _, err := none.Resolve(ctx, api, "plain"); err != nil || got != "plain" {
		t.Errorf("nil store, no reference: %q, %v", got, err)
	}
	if !HasReference("a ${secret:X") || HasReference("a $secret") {
		t.Error("HasReference")
	}
	if got := References("${secret:A} ${secret:B} ${secret:A}"); strings.Join(got, ",") != "A,B" {
		t.Errorf("References = %v", got)
	}
}

// TestStreamRedactsAsWhole: a text redacted in pieces, split anywhere,
// comes out exactly as the whole text redacted at once, and nothing of a
// secret is handed out before it is known not to be one.
func TestStreamRedactsAsWhole(t *testing.T) {
	values := map[string]string{
		"TOKEN":   secretValue,
		"SHORT":   "abcdefgh",
		"LONG":    "abcdefgh-ijklmnop",
		"PERIOD":  "abababab",
		"UNICODE": "pässwörd-ü",
		"ODD":     "[secret:TOKEN]x",
	}
	r := NewRedactor(values)
	var pieces []string
	for _, v := range values {
		for _, f := range forms(v) {
			pieces = append(pieces, f, f[:len(f)/2], f[len(f)/2:])
		}
	}
	pieces = append(pieces, "ab", "a", "b", "[secret:", "]", " ", "\n", "x", "[secret:SHORT]", "ü")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text := b.String()
		want := r.Redact(text)
		st := r.NewStream()
		var got strings.Builder
		for rest := text; rest != ""; {
			n := min(len(rest), 1+rng.IntN(9))
			out := st.Write(rest[:n])
			rest = rest[n:]
			got.WriteString(out)
			if !strings.HasPrefix(want, got.String()) {
				t.Fatalf("text %q: after %q the stream handed out %q, not a start of %q", text, text[:len(text)-len(rest)], got.String(), want)
			}
		}
		got.WriteString(st.Flush())
		if got.String() != want {
			t.Fatalf("text %q: streamed %q, whole %q", text, got.String(), want)
		}
	}
}

// TestStreamHoldsBackOnlyWhatMayBeASecret: text that cannot start a secret
// passes at once; the start of one waits for the rest.
func TestStreamHoldsBackOnlyWhatMayBeASecret(t *testing.T) {
	r := NewRedactor(map[string]string{"TOKEN": secretValue})
	st := r.NewStream()
	if got := st.Write("plain line\n"); got != "plain line\n" {
		t.Errorf("plain text: %q", got)
	}
	if got := st.Write("key: " + secretValue[:5]); got != "key: " {
		t.Errorf("the start of the secret: %q", got)
	}
	if got := st.Write(secretValue[5:] + " end"); got != "[secret:TOKEN] end" {
		t.Errorf("the rest of the secret: %q", got)
	}
	if got := st.Write(secretValue[:3]); got != "" {
		t.Errorf("a start at the end: %q", got)
	}
	if got := st.Flush(); got != secretValue[:3] {
		t.Errorf("Flush: %q", got)
	}
	var nilR *Redactor
	if got := nilR.NewStream().Write(secretValue); got != secretValue {
		t.Errorf("a nil redactor's stream: %q", got)
	}
}

// TestRedactOtherEncodersForms: a server that echoes a request writes the
// value as its own encoder does, not as Go's: PHP's json_encode escapes
// "/" as "\/" (base64 tokens hold "/"), Python's json.dumps writes every
// non-ASCII character as \uXXXX (surrogate pairs beyond the BMP), Java's
// and .NET's encoders with upper-case hex digits, and many servers
// percent-encode with lower-case hex digits.
func TestRedactOtherEncodersForms(t *testing.T) {
	const v = "tok+EN/abc=DEF-0123ä😀<x>"
	r := NewRedactor(map[string]string{"K": v})
	tests := []struct{ name, in string }{
		{"PHP json_encode", `tok+EN\/abc=DEF-0123\u00e4\ud83d\ude00<x>`},
		{"PHP json_encode, unicode kept", `tok+EN\/abc=DEF-0123ä😀<x>`},
		{"PHP json_encode with HTML escapes", `tok+EN\/abc=DEF-0123\u00e4\ud83d\ude00\u003cx\u003e`},
		{"Python json.dumps", `tok+EN/abc=DEF-0123\u00e4\ud83d\ude00<x>`},
		{"upper-case hex escapes", `tok+EN/abc=DEF-0123\u00E4\uD83D\uDE00\u003Cx\u003E`},
		{"lower-case percent-encoding, query", lowerHex(url.QueryEscape(v))},
		{"lower-case percent-encoding, path", lowerHex(url.PathEscape(v))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := `{"echo":"` + tt.in + `"}`
			if got, want := r.Redact(in), `{"echo":"[secret:K]"}`; got != want {
				t.Errorf("Redact(%s) = %s, want %s", in, got, want)
			}
		})
	}
}

// lowerHex writes the hex digits of esc's percent-escapes in lower case.
func lowerHex(esc string) string {
	var b strings.Builder
	for i := 0; i < len(esc); i++ {
		if esc[i] == '%' && i+2 < len(esc) {
			b.WriteString(strings.ToLower(esc[i : i+3]))
			i += 2
			continue
		}
		b.WriteByte(esc[i])
	}
	return b.String()
}
