package hostform

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/idna"
)

func TestHost(t *testing.T) {
	tests := []struct {
		name, in, want string // want "" for a refusal
	}{
		{"ascii", "api.example.test", "api.example.test"},
		{"upper case", "API.Example.TEST", "api.example.test"},
		{"trailing dot", "api.example.test.", "api.example.test"},
		{"dotless I with a dot", "ap\u0130.example.test", "xn--api-bec.example.test"},
		{"umlaut", "B\u00fccher.example", "xn--bcher-kva.example"},
		{"fullwidth", "\uff41\uff50\uff49.example.test", "api.example.test"},
		{"fullwidth dot", "api\uff0eexample.test", "api.example.test"},
		{"punycode", "xn--api-bec.example.test", "xn--api-bec.example.test"},
		{"punycode upper", "XN--API-BEC.example.test", "xn--api-bec.example.test"},
		{"ipv4", "127.0.0.1", "127.0.0.1"},
		{"ipv4 one number", "2130706433", "127.0.0.1"},
		{"ipv4 hex", "0x7f.1", "127.0.0.1"},
		{"ipv4 octal", "0177.0.0.01", "127.0.0.1"},
		{"ipv4 two parts", "10.65535", "10.0.255.255"},
		{"ipv4 trailing dot", "127.0.0.1.", "127.0.0.1"},
		{"ipv4 fullwidth", "\uff11\uff12\uff17.0.0.1", "127.0.0.1"},
		{"ipv4 0x alone", "0x.0.0.1", "0.0.0.1"},
		{"ipv6", "::1", "::1"},
		{"ipv6 upper", "FE80::A", "fe80::a"},
		{"ipv6 mapped", "::FFFF:7F00:1", "::ffff:127.0.0.1"},
		{"empty", "", ""},
		{"only a dot", ".", ""},
		{"empty label", "a..b.example", ""},
		{"two trailing dots", "example.com..", ""},
		{"bad punycode", "xn--zz.example", ""},
		{"leading hyphen", "-x.example", ""},
		{"joiner out of context", "exa\u200dmple.com", ""},
		{"space", "exa mple.com", ""},
		{"underscore", "under_score.example", ""},
		{"five parts", "1.2.3.4.5", ""},
		{"part too large", "256.1.1.1", ""},
		{"last part too large", "1.2.65536", ""},
		{"number too large", "4294967296", ""},
		{"name ending in a number", "example.123", ""},
		{"bad octal", "09.1.1.1", ""},
		{"ipv6 zone", "fe80::1%eth0", ""},
		{"not ipv6", "a:b", ""},
		{"label too long", strings.Repeat("a", 64) + ".example", ""},
		{"name too long", strings.Repeat(strings.Repeat("a", 60)+".", 5) + "example", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Host(tt.in)
			if tt.want == "" {
				var he *Error
				if err == nil || !errors.Is(err, ErrInvalid) || !errors.As(err, &he) || he.Host != tt.in {
					t.Fatalf("Host(%q) = %q, %v; want a refusal", tt.in, got, err)
				}
				if !strings.Contains(err.Error(), "is not a valid host name: ") {
					t.Errorf("message %q", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Host(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			if again, err := Host(got); err != nil || again != got {
				t.Errorf("Host(Host(%q)) = %q, %v; want it unchanged", tt.in, again, err)
			}
			if !IsForm(got) || (got != tt.in && IsForm(tt.in)) {
				t.Errorf("IsForm(%q) = %v, IsForm(%q) = %v", got, IsForm(got), tt.in, IsForm(tt.in))
			}
			// A name is what the Go HTTP client dials for it.
			if !strings.Contains(got, ":") && !endsInNumber(strings.Split(got, ".")) {
				if dialled, _ := idna.Lookup.ToASCII(tt.in); strings.TrimSuffix(dialled, ".") != got {
					t.Errorf("the client dials %q, the form is %q", dialled, got)
				}
			}
		})
	}
}

func TestURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://ap\u0130.example.test/p?q=1#f", "http://xn--api-bec.example.test/p?q=1#f"},
		{"https://API.example.test.:0443/x", "https://api.example.test:443/x"},
		{"http://u:p@0x7f.1:8080/", "http://u:p@127.0.0.1:8080/"},
		{"http://[::FFFF:7F00:1]:80/", "http://[::ffff:127.0.0.1]:80/"},
		{"http://example.com:/", "http://example.com/"},
		{"http://example.com:0/", ""},
		{"http://example.com:65536/", ""},
		{"http://a..b/", ""},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		host := u.Host
		got, err := URL(u)
		if u.Host != host {
			t.Errorf("URL changed its argument's host to %q", u.Host)
		}
		if tt.want == "" {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("URL(%q) = %v, %v; want a refusal", tt.in, got, err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("URL(%q) = %v, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
