package memory

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of keyword extraction.
const (
	minKeywordRunes = 3
	maxKeywordRunes = 40
	// maxScanBytes is how much of a text keywords looks at: error texts can
	// carry a whole command's output, and the words that identify an error
	// are near its start.
	maxScanBytes = 32 << 10
)

// stopwords are words too common in error texts to tell two errors apart.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`
		the and for with that this from into not was were are has have had but its can cannot could
		did does doesn isn wasn won you your our any all when then than there their what which while
		will would should been being also only other some such more most very just because after before
		error errors failed fail fails failure failing call calls tool tools tried try got get use used
		using via next status unable while please`) {
		stopwords[normalize(w)] = true
	}
}

// keywords returns the distinct keywords of s, lowercased and normalised,
// in order of first appearance: words of letters and digits of at least
// three characters that are not stopwords; numbers only when they have three
// digits (HTTP statuses, errno-like codes), since other numbers are mostly
// line numbers, sizes and ids.
func keywords(s string) []string {
	if len(s) > maxScanBytes {
		s = s[:maxScanBytes]
	}
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		n := utf8.RuneCountInString(w)
		if n < minKeywordRunes || n > maxKeywordRunes {
			continue
		}
		if allDigits(w) && n != 3 {
			continue
		}
		w = normalize(w)
		if stopwords[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// normalize lowercases a word and drops a plural "s", so "Permissions"
// and "permission" are the same keyword.
func normalize(w string) string {
	w = strings.ToLower(w)
	if len(w) > 4 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
		w = w[:len(w)-1]
	}
	return w
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// keywordSet is a set of keywords.
type keywordSet map[string]bool

func newKeywordSet(texts ...string) keywordSet {
	set := keywordSet{}
	for _, t := range texts {
		for _, k := range keywords(t) {
			set[k] = true
		}
	}
	return set
}

// has reports whether the set holds k, or, for a k of four characters or
// more, a keyword that starts with it ("perm" finds "permission").
func (s keywordSet) has(k string) bool {
	if s[k] {
		return true
	}
	if len(k) < 4 {
		return false
	}
	for w := range s {
		if strings.HasPrefix(w, k) {
			return true
		}
	}
	return false
}

// oneLine folds whitespace runs (newlines included) into single spaces and
// clips the result to n bytes (at a rune boundary), marking a cut with "…".
func oneLine(s string, n int) string {
	return clip(strings.Join(strings.Fields(s), " "), n)
}

// clip cuts s to at most n bytes at a rune boundary, marking a cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
