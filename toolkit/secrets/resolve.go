package secrets

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// refPrefix starts every secret reference.
const refPrefix = "${secret:"

// refPattern matches a secret reference ${secret:NAME}; the group is the
// name, checked against ValidName when resolved.
var refPattern = regexp.MustCompile(`\$\{secret:([^{}]*)\}`)

// Reference returns the reference text of the secret name: ${secret:NAME}.
func Reference(name string) string { return refPrefix + name + "}" }

// HasReference reports whether text holds a secret reference (even a
// malformed one), so that callers can treat it as carrying a credential.
func HasReference(text string) bool { return strings.Contains(text, refPrefix) }

// References returns the names referenced in text as ${secret:NAME}, in
// order of first appearance, without duplicates.
func References(text string) []string {
	var names []string
	for _, m := range refPattern.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// Resolve replaces every ${secret:NAME} in text with the secret's value,
// for a request to origin (normalised, see OriginOf), and returns the names
// it used. Every secret must be bound to origin, else nothing is resolved
// and the error matches ErrOrigin and names the origins the secret may go
// to. A missing secret gives an error matching ErrNotFound whose text says
// `secret "NAME" not found`; no error carries a value. A nil Store resolves
// texts without references and fails on the others.
func (s *Store) Resolve(ctx context.Context, origin, text string) (string, []string, error) {
	return s.ResolveEscaped(ctx, origin, text, nil)
}

// ResolveEscaped is Resolve with each value passed through escape before it
// is put in the text (url.QueryEscape for a URL); a nil escape keeps values
// as they are.
func (s *Store) ResolveEscaped(ctx context.Context, origin, text string, escape func(string) string) (string, []string, error) {
	if !HasReference(text) {
		return text, nil, nil
	}
	if strings.Count(text, refPrefix) != len(refPattern.FindAllStringIndex(text, -1)) {
		return "", nil, fmt.Errorf("%w: a secret reference is malformed; write it as ${secret:NAME}", ErrInvalidName)
	}
	names := References(text)
	values := make(map[string]string, len(names))
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		if !ValidName(n) {
			return "", nil, fmt.Errorf("%w: %q in a secret reference (use letters, digits, '_', '.', '-')", ErrInvalidName, n)
		}
		if s == nil {
			return "", nil, fmt.Errorf("secret %q not found: no secret store is configured", n)
		}
		v, allowed, err := s.lookup(ctx, n)
		if err != nil {
			return "", nil, err
		}
		if !slices.Contains(allowed, origin) {
			return "", nil, originError(n, origin, allowed)
		}
		if escape != nil {
			v = escape(v)
		}
		values[n] = v
	}
	out := refPattern.ReplaceAllStringFunc(text, func(ref string) string {
		return values[ref[len(refPrefix):len(ref)-1]]
	})
	return out, names, nil
}
