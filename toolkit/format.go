package toolkit

import (
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FormatPolicy is how argument schemas treat the `format` keyword. The same
// policy holds for every draft (draft-07, 2019-09, 2020-12 and schemas
// without `$schema`): which draft a schema declares never decides whether
// `"format": "email"` is checked.
type FormatPolicy string

const (
	// FormatAssert checks the formats listed in AssertedFormats and treats
	// every other format as an annotation. The default.
	FormatAssert FormatPolicy = "assert"
	// FormatAnnotate treats every format as an annotation.
	FormatAnnotate FormatPolicy = "annotate"
)

// AssertedFormats lists the formats FormatAssert checks, each against its
// RFC and in agreement with every test of the JSON-Schema-Test-Suite's
// optional format tests, draft-07 and 2020-12 alike
// (TestJSONSchemaFormatSuite): date, date-time, time and duration per RFC
// 3339; email per RFC 5321 and idn-email per RFC 6531; hostname per RFC
// 1123 with A-labels and idn-hostname per IDNA2008 (RFC 5890–5893, through
// golang.org/x/net/idna); ipv4 and ipv6; uri, uri-reference, iri and
// iri-reference per RFC 3986/3987; json-pointer and relative-json-pointer
// per RFC 6901; uri-template per RFC 6570; uuid per RFC 4122; regex per
// ECMA-262. Formats not listed (the validator library's non-standard period
// and semver, unknown names) are annotations.
var AssertedFormats = []string{
	"date", "date-time", "duration", "email", "hostname", "idn-email", "idn-hostname", "ipv4", "ipv6",
	"iri", "iri-reference", "json-pointer", "regex", "relative-json-pointer",
	"time", "uri", "uri-reference", "uri-template", "uuid",
}

// annotatedKnownFormats are the formats the validator library would check on
// its own but FormatAssert leaves as annotations.
var annotatedKnownFormats = []string{"period", "semver"}

// checkers are this package's format checkers, in place of the validator
// library's where it has its own (which let "example.", "@example.com" or
// "http://example.com/a b" through). The library's date, date-time, time,
// uuid, json-pointer and relative-json-pointer checkers agree with the
// suite and stay; regex is checked by the schema's regular expression
// engine (regexp.go).
var checkers = map[string]func(any) error{
	"duration":      validateDuration,
	"email":         validateEmail,
	"hostname":      validateHostname,
	"idn-email":     validateIDNEmail,
	"idn-hostname":  validateIDNHostname,
	"ipv4":          validateIPv4,
	"ipv6":          validateIPv6,
	"iri":           validateIRI,
	"iri-reference": validateIRIReference,
	"uri":           validateURI,
	"uri-reference": validateURIReference,
	"uri-template":  validateURITemplate,
}

// Validate names a bad policy.
func (p FormatPolicy) Validate() error {
	switch p {
	case FormatAssert, FormatAnnotate:
		return nil
	}
	return fmt.Errorf("format policy %q: want %q or %q", string(p), FormatAssert, FormatAnnotate)
}

// annotates tells whether the policy leaves format name unchecked.
func (p FormatPolicy) annotates(name string) bool {
	return p == FormatAnnotate || !slices.Contains(AssertedFormats, name)
}

// apply sets the policy on a compiler: formats are asserted in every draft
// with this package's checkers, and each format the policy annotates gets a
// checker that accepts anything.
func (p FormatPolicy) apply(c *jsonschema.Compiler) {
	c.AssertFormat()
	for name, check := range checkers {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: check})
	}
	for _, name := range append(slices.Clone(AssertedFormats), annotatedKnownFormats...) {
		if p.annotates(name) {
			c.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(any) error { return nil }})
		}
	}
}
