package toolkit

import (
	"strings"
	"testing"
)

// TestFormatCheckers checks values beyond the JSON-Schema-Test-Suite's:
// the ones found to pass before each format had its own checker, and the
// corners of each grammar.
func TestFormatCheckers(t *testing.T) {
	tests := []struct {
		format string
		value  string
		valid  bool
	}{
		{"hostname", "example.", false},
		{"hostname", "example.com", true},
		{"hostname", "XN--9N2BP8Q.XN--9T4B11YI5A", true},
		{"hostname", "xn--", false},
		{"hostname", "ab--c.example", true},
		{"hostname", "exa mple.com", false},
		{"hostname", strings.Repeat("a.", 126) + "a", true},
		{"hostname", strings.Repeat("a.", 127) + "a", false},
		{"idn-hostname", "¡.com", false},
		{"idn-hostname", "©.com", false},
		{"idn-hostname", "ᄀ.com", false},
		{"idn-hostname", "bücher.example", true},
		{"idn-hostname", "BÜCHER.example", false},
		{"uri", "http://example.com/a b", false},
		{"uri", "http://example.com/a%20b", true},
		{"uri", "http://例子.测试/", false},
		{"uri", "urn:isbn:0451450523", true},
		{"uri", "http://user:pa%20ss@host:8080/p?q=1#f", true},
		{"uri", "ftp://[v7.host]/", true},
		{"uri", "http://[::1", false},
		{"uri", "http://[::1]x/", false},
		{"uri", "http://host:80:90/", false},
		{"uri", "", false},
		{"uri-reference", "//[::1]:8080", true},
		{"uri-reference", "a:b", true},
		{"uri-reference", "%zz", false},
		{"iri", "http://例子.测试/", true},
		{"iri", "http://example.com/\ue000", false},
		{"iri", "http://example.com/?\ue000", true},
		{"iri-reference", "例子", true},
		{"email", "@example.com", false},
		{"email", "a@b", true},
		{"email", "a@[IPv6:::1]", true},
		{"email", "a@[IPv6:1.2.3.4]", false},
		{"email", `"a\"b"@example.com`, true},
		{"email", `"a"b"@example.com`, false},
		{"email", "δοκιμή@example.com", false},
		{"idn-email", "δοκιμή@παράδειγμα.δοκιμή", true},
		{"idn-email", "a@example.", false},
		{"duration", "P1Y1D", false},
		{"duration", "P1Y2M3DT4H5M6S", true},
		{"duration", "PT1H2S", false},
		{"duration", "P1DT", false},
		{"duration", "P1W", true},
		{"ipv4", "+1.2.3.4", false},
		{"ipv4", "01.2.3.4", false},
		{"ipv4", "1.2.3.4", true},
		{"ipv6", "fe80::1%eth0", false},
		{"ipv6", "::ffff:1.2.3.4", true},
		{"uri-template", "a'b{c}", true},
		{"uri-template", "a\"b", false},
	}
	c := NewSchemaCache()
	for _, tc := range tests {
		t.Run(tc.format+" "+tc.value, func(t *testing.T) {
			s := mustCompile(t, c, `{"format":"`+tc.format+`"}`)
			err := s.validate(tc.value)
			if got := err == nil; got != tc.valid {
				t.Errorf("%s %q: valid = %v, want %v (%v)", tc.format, tc.value, got, tc.valid, err)
			}
		})
	}
}
