package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

func TestParseOrigin(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"https://API.Example.com", "https://api.example.com:443"},
		{"https://api.example.com/", "https://api.example.com:443"},
		{"HTTP://api.example.com", "http://api.example.com:80"},
		{"http://api.example.com:8080", "http://api.example.com:8080"},
		{"https://api.example.com.:443", "https://api.example.com:443"},
		{" https://127.0.0.1:9000 ", "https://127.0.0.1:9000"},
		{"https://[::1]", "https://[::1]:443"},
		{"ftp://example.com", ""},
		{"api.example.com", ""},
		{"https://api.example.com/v1", ""},
		{"https://u:p@api.example.com", ""},
		{"https://api.example.com?x=1", ""},
		{"https://api.example.com#f", ""},
		{"https://", ""},
		{"https://api.example.com:http", ""},
		{"https://${secret:X}.example.com", ""},
	}
	for _, tt := range tests {
		got, err := ParseOrigin(tt.in)
		if tt.want == "" {
			if err == nil || !errors.Is(err, ErrInvalidOrigin) {
				t.Errorf("ParseOrigin(%q) = %q, %v; want ErrInvalidOrigin", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := ParseOrigins(slices.Repeat([]string{"https://a.example"}, MaxOrigins+1)); err == nil {
		t.Error("too many origins accepted")
	}
}

// TestOriginIsTheHostThatIsDialled: an origin names the host in the form
// the HTTP client dials it (IDNA Lookup, lower case, no trailing dot,
// canonical IP forms), so a look-alike name never matches another host's
// origin; a host that does not survive IDNA Lookup is refused.
func TestOriginIsTheHostThatIsDialled(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		// U+0130 lower-cases to "i" with strings.ToLower, but the client
		// dials xn--api-bec: another host.
		{"http://ap\u0130.example.test", "http://xn--api-bec.example.test:80"},
		{"https://B\u00dcCHER.example", "https://xn--bcher-kva.example:443"},
		{"https://\uff41\uff50\uff49.example.test", "https://api.example.test:443"}, // fullwidth
		{"https://API.Example.Test.", "https://api.example.test:443"},
		{"http://xn--api-bec.example.test:8080", "http://xn--api-bec.example.test:8080"},
		{"http://2130706433", "http://127.0.0.1:80"},
		{"http://0x7f.1:9000", "http://127.0.0.1:9000"},
		{"http://[::FFFF:7F00:1]", "http://[::ffff:127.0.0.1]:80"},
		{"https://api.example.com:0443", "https://api.example.com:443"},
		{"https://xn--zz.example", ""},        // not valid punycode
		{"https://a..b.example", ""},          // empty label
		{"https://exa\u200dmple.com", ""},     // a joiner out of context
		{"https://1.2.3.4.5", ""},             // ends in a number, not an IPv4 address
		{"https://256.1.1.1", ""},             // the same
		{"https://api.example.com:70000", ""}, // no such port
	}
	for _, tt := range tests {
		got, err := ParseOrigin(tt.in)
		if tt.want == "" {
			if err == nil || !errors.Is(err, ErrInvalidOrigin) {
				t.Errorf("ParseOrigin(%q) = %q, %v; want ErrInvalidOrigin", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestStoredOriginsAreRenormalised: a record written when hosts were only
// lower-cased reads back with its origins in today's form (what the human
// confirmed, dialled as the client dials it); one that no longer parses is
// dropped, never matched loosely.
func TestStoredOriginsAreRenormalised(t *testing.T) {
	ctx := context.Background()
	kv := cachestore.NewMemory()
	s, keyFile := openTest(t, kv, nil)
	plain, err := json.Marshal(record{Value: "value-aaaa", Created: 1,
		Origins: []string{"https://b\u00fccher.example:443", "https://a..b.example:443", "https://api.example.test:443"}})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.seal("OLD", plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.KVPut(ctx, Namespace, "OLD", sealed); err != nil {
		t.Fatal(err)
	}
	reopened := openWithKeyFile(t, kv, keyFile, nil)
	got, err := reopened.Origins(ctx, "OLD")
	if want := []string{"https://api.example.test:443", "https://xn--bcher-kva.example:443"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Origins = %q, %v; want %q", got, err, want)
	}
}

// TestOriginsPersist: origins are stored with the value, survive a
// reopen, add up with the operator's bindings, and a record written
// before origins existed reads back with none.
func TestOriginsPersist(t *testing.T) {
	ctx := context.Background()
	kv := cachestore.NewMemory()
	s, keyFile := openTest(t, kv, nil)
	if err := s.Put(ctx, "A", "value-aaaa", "", "https://a.example", "https://A.example:443/"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "B", "value-bbbb", "", "nope"); err == nil || !errors.Is(err, ErrInvalidOrigin) {
		t.Fatalf("a bad origin was stored: %v", err)
	}
	if ok, _ := s.Has(ctx, "B"); ok {
		t.Fatal("B was stored despite its bad origin")
	}
	// A record as the first release wrote it: no "o" field.
	plain := []byte(`{"v":"value-old1","t":1}`)
	sealed, err := s.seal("OLD", plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.KVPut(ctx, Namespace, "OLD", sealed); err != nil {
		t.Fatal(err)
	}

	s2 := openWithKeyFile(t, kv, keyFile, nil)
	if err := s2.Bind("A", "https://mirror.example"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Bind("LATER", "https://later.example"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Bind("A", "not an origin"); err == nil {
		t.Error("Bind accepted a bad origin")
	}
	got, err := s2.Origins(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://a.example:443,https://mirror.example:443"; strings.Join(got, ",") != want {
		t.Errorf("origins of A = %v, want %s", got, want)
	}
	if got, err := s2.Origins(ctx, "OLD"); err != nil || len(got) != 0 {
		t.Errorf("origins of OLD = %v, %v", got, err)
	}
	if v, err := s2.Get(ctx, "OLD"); err != nil || v != "value-old1" {
		t.Errorf("OLD = %q, %v", v, err)
	}
	if _, err := s2.Origins(ctx, "LATER"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a bound but unstored secret: %v", err)
	}
	list, err := s2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.Name == "A" && len(in.Origins) != 2 {
			t.Errorf("List: %+v", in)
		}
	}
	err = s2.CheckOrigin(ctx, "https://evil.example:443", "A")
	if !errors.Is(err, ErrOrigin) || !strings.Contains(err.Error(), "https://a.example:443, https://mirror.example:443") ||
		strings.Contains(err.Error(), "value-aaaa") {
		t.Errorf("CheckOrigin: %v", err)
	}
	// Replacing the secret replaces its stored origins; the binding stays.
	if err := s2.Put(ctx, "A", "value-cccc", "", "https://c.example"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.Origins(ctx, "A"); strings.Join(got, ",") != "https://c.example:443,https://mirror.example:443" {
		t.Errorf("after replacing: %v", got)
	}
}
