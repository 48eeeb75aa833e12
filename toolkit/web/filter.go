package web

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Filter is the result filter (the "decision model") that every fetch_page
// and search_web return goes through, from the cache or fresh: it decides
// which passages of a result the model gets. Implementations must be safe
// for concurrent use. An error makes the tool fall back to keeping the
// first passages that fit the budget.
type Filter interface {
	Filter(ctx context.Context, req FilterRequest) (FilterResult, error)
}

// FilterFunc adapts a function to Filter.
type FilterFunc func(ctx context.Context, req FilterRequest) (FilterResult, error)

// Filter calls f.
func (f FilterFunc) Filter(ctx context.Context, req FilterRequest) (FilterResult, error) {
	return f(ctx, req)
}

// FilterRequest is one result to filter.
type FilterRequest struct {
	// Tool is fetch_page or search_web.
	Tool string
	// Query is what the model is looking for (fetch_page's query argument,
	// search_web's search query); may be empty.
	Query string
	// Passages are the result's parts in document order: paragraphs of a
	// page, or one search result each.
	Passages []string
	// Budget is how many characters of passages the model should get at
	// most.
	Budget int
}

// FilterResult is the filter's decision.
type FilterResult struct {
	// Keep lists the indices of the passages to keep. The tool shows them
	// in document order and stops at the budget whatever the filter says.
	Keep []int
	// Note tells the model what was cut and why; empty when nothing was.
	Note string
}

// BM25 parameters of the default filter.
const (
	defaultK1 = 1.2
	defaultB  = 0.75
	// notePreviews is how many cut passages the note quotes the start of.
	notePreviews = 4
	previewChars = 48
)

// BM25Filter is the default Filter: when a result is larger than the
// budget, it ranks the passages with Okapi BM25 against the query and keeps
// the best-scoring ones that fit, in document order; passages that share no
// term with the query are cut. Without a query, or when no passage matches
// it, it keeps the first passages that fit. Its note counts what was cut,
// lists the cut passages' numbers and quotes the start of a few.
//
// The zero value uses k1 = 1.2 and b = 0.75.
type BM25Filter struct {
	K1, B float64
}

// Filter implements Filter.
func (f BM25Filter) Filter(ctx context.Context, req FilterRequest) (FilterResult, error) {
	st := statsOf(req.Passages)
	total := st.total
	if total <= req.Budget || len(req.Passages) == 0 {
		all := make([]int, len(req.Passages))
		for i := range all {
			all[i] = i
		}
		return FilterResult{Keep: all}, nil
	}
	if err := ctx.Err(); err != nil {
		return FilterResult{}, err
	}
	query := uniqueTerms(tokenize(req.Query))
	if len(query) > 0 {
		scores := f.scores(query, st)
		order := make([]int, 0, len(scores))
		for i, s := range scores {
			if s > 0 {
				order = append(order, i)
			}
		}
		if len(order) > 0 {
			slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
			var keep []int
			used := 0
			for _, i := range order {
				if n := st.runes[i]; used+n <= req.Budget {
					keep = append(keep, i)
					used += n
				}
			}
			slices.Sort(keep)
			return FilterResult{Keep: keep, Note: cutNote(req, keep, st.runes, total,
				fmt.Sprintf("kept the passages most relevant to %q", req.Query))}, nil
		}
	}
	keep := HeadWithin(req.Passages, req.Budget)
	why := "kept the first passages"
	switch {
	case len(query) > 0:
		why = fmt.Sprintf("no passage matched %q; kept the first passages", req.Query)
	case req.Query == "":
		why = "kept the first passages (pass query to keep the passages most relevant to what you look for)"
	}
	return FilterResult{Keep: keep, Note: cutNote(req, keep, st.runes, total, why)}, nil
}

// HeadWithin returns the indices of the leading passages whose total length
// fits budget characters.
func HeadWithin(passages []string, budget int) []int {
	var keep []int
	used := 0
	for i, p := range passages {
		n := runeLen(p)
		if used+n > budget {
			break
		}
		keep = append(keep, i)
		used += n
	}
	return keep
}

// scores returns the BM25 score of every passage for the query terms.
func (f BM25Filter) scores(query []string, st passageStats) []float64 {
	k1, b := f.K1, f.B
	if k1 == 0 {
		k1 = defaultK1
	}
	if b == 0 {
		b = defaultB
	}
	n := len(st.terms)
	// Only the query's terms are counted: BM25 needs each passage's length
	// (all its terms) and, per query term, its count in the passage and how
	// many passages hold it. No per-passage term map (that was most of the
	// cost of a cached fetch_page).
	uq := uniqueTerms(query)
	tf := make([]int32, n*len(uq)) // tf[i*len(uq)+j]: count of uq[j] in passage i
	df := make([]int, len(uq))
	lengths := make([]int, n)
	sum := 0
	for i, terms := range st.terms {
		row := tf[i*len(uq) : (i+1)*len(uq)]
		for _, t := range terms {
			for j, q := range uq {
				if q == t {
					row[j]++
					break
				}
			}
		}
		lengths[i] = len(terms)
		sum += lengths[i]
		for j := range row {
			if row[j] > 0 {
				df[j]++
			}
		}
	}
	avg := float64(sum) / float64(n)
	if avg == 0 {
		avg = 1
	}
	scores := make([]float64, n)
	for _, q := range query {
		j := slices.Index(uq, q)
		d := df[j]
		if d == 0 {
			continue
		}
		idf := math.Log(1 + (float64(n)-float64(d)+0.5)/(float64(d)+0.5))
		for i := range n {
			c := float64(tf[i*len(uq)+j])
			if c == 0 {
				continue
			}
			norm := k1 * (1 - b + b*float64(lengths[i])/avg)
			scores[i] += idf * c * (k1 + 1) / (c + norm)
		}
	}
	return scores
}

// termMemo remembers the terms and lengths of recently filtered passages.
// A cached page is decoded once and its passages (the same strings) are
// filtered again on every hit with a new query: tokenizing them and
// counting their characters was most of a hit's cost. The memo is keyed by
// the passage's string data and holds the string itself, so that memory
// cannot be reused by another string while it is remembered; equal
// contents are still checked. One lock per page, not per passage.
type termMemo struct {
	mu    sync.Mutex
	byPtr map[*byte]memoTerms // guarded by mu
	order []*byte             // guarded by mu; oldest first
}

type memoTerms struct {
	s     string
	terms []string
	runes int
}

const (
	termMemoPassages = 8192
	termMemoMinLen   = 16 // shorter passages are measured every time
)

var terms = &termMemo{byPtr: map[*byte]memoTerms{}}

// passageStats are the terms (tokenize) and lengths in characters
// (runeLen) of a result's passages; the terms must not be modified.
type passageStats struct {
	terms [][]string
	runes []int
	total int // sum of runes
}

// statsOf measures passages, from the memo where it can.
func statsOf(passages []string) passageStats {
	st := passageStats{terms: make([][]string, len(passages)), runes: make([]int, len(passages))}
	known := make([]bool, len(passages))
	terms.mu.Lock()
	for i, p := range passages {
		if len(p) < termMemoMinLen {
			continue
		}
		if e, ok := terms.byPtr[unsafe.StringData(p)]; ok && e.s == p {
			st.terms[i], st.runes[i], known[i] = e.terms, e.runes, true
		}
	}
	terms.mu.Unlock()
	missed := 0
	for i, p := range passages {
		if !known[i] {
			st.terms[i], st.runes[i] = tokenize(p), runeLen(p)
			if len(p) >= termMemoMinLen {
				missed++
			}
		}
		st.total += st.runes[i]
	}
	if missed == 0 {
		return st
	}
	terms.mu.Lock()
	defer terms.mu.Unlock()
	for i, p := range passages {
		if known[i] || len(p) < termMemoMinLen {
			continue
		}
		key := unsafe.StringData(p)
		if _, ok := terms.byPtr[key]; !ok {
			if len(terms.order) >= termMemoPassages {
				delete(terms.byPtr, terms.order[0])
				terms.order = terms.order[1:]
			}
			terms.order = append(terms.order, key)
		}
		terms.byPtr[key] = memoTerms{s: p, terms: st.terms[i], runes: st.runes[i]}
	}
	return st
}

// cutNote describes what a filter left out. runes are the passages'
// lengths in characters; nil counts them.
func cutNote(req FilterRequest, keep []int, runes []int, total int, why string) string {
	if len(keep) == len(req.Passages) {
		return ""
	}
	kept := 0
	for _, i := range keep {
		if runes != nil {
			kept += runes[i]
		} else {
			kept += runeLen(req.Passages[i])
		}
	}
	cut := make([]int, 0, len(req.Passages)-len(keep))
	for i := range req.Passages {
		if _, found := slices.BinarySearch(keep, i); !found {
			cut = append(cut, i)
		}
	}
	var b strings.Builder
	b.Grow(256 + len(why) + notePreviews*(previewChars+16))
	fmt.Fprintf(&b, "filter: %s within the budget of %d characters: kept %d of %d passages (%d of %d characters); cut %d (%s)",
		why, req.Budget, len(keep), len(req.Passages), kept, total, len(cut), ranges(cut))
	for k, i := range cut[:min(len(cut), notePreviews)] {
		if k == 0 {
			b.WriteString(", starting ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString("“")
		writePreview(&b, req.Passages[i])
		b.WriteString("”")
	}
	if len(cut) > notePreviews {
		fmt.Fprintf(&b, " and %d more", len(cut)-notePreviews)
	}
	b.WriteString(".")
	return b.String()
}

// ranges writes passage indices, counted from 1, as "2-5, 9".
func ranges(idx []int) string {
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]+1))
		} else {
			parts = append(parts, strconv.Itoa(idx[i]+1)+"-"+strconv.Itoa(idx[j]+1))
		}
		i = j + 1
	}
	prefix := "passage "
	if len(idx) > 1 {
		prefix = "passages "
	}
	return prefix + strings.Join(parts, ", ")
}

// preview returns the start of a passage on one line: its words joined by
// single spaces, cut after previewChars characters with "…".
func preview(s string) string {
	var b strings.Builder
	b.Grow(previewChars + len("…"))
	writePreview(&b, s)
	return b.String()
}

// writePreview writes preview(s) to b, reading only as much of s as it
// shows.
func writePreview(b *strings.Builder, s string) {
	n := 0
	space := false // a space is due before the next word
	for i, r := range s {
		if unicode.IsSpace(r) {
			space = n > 0
			continue
		}
		if space && n < previewChars {
			b.WriteByte(' ')
			n++
		}
		space = false
		if r == '[' {
			// A redaction marker is shown whole or not at all.
			if l := toolkit.MarkerLen(s[i:]); l > 0 && n+l > previewChars {
				b.WriteString("…")
				return
			}
		}
		if n == previewChars {
			// More follows the cut.
			b.WriteString("…")
			return
		}
		b.WriteRune(r)
		n++
	}
}

// runeLen is utf8.RuneCountInString(s) (an invalid byte counts as one rune),
// eight ASCII bytes at a time: it runs several times over every passage of
// every page a filter sees.
func runeLen(s string) int {
	n := 0
	for len(s) > 0 {
		if len(s) >= 8 {
			_ = s[7]
			if s[0]|s[1]|s[2]|s[3]|s[4]|s[5]|s[6]|s[7] < utf8.RuneSelf {
				n += 8
				s = s[8:]
				continue
			}
		}
		if s[0] < utf8.RuneSelf {
			n++
			s = s[1:]
			continue
		}
		_, size := utf8.DecodeRuneInString(s)
		n++
		s = s[size:]
	}
	return n
}

// stopwords are common English words that carry no meaning for ranking.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be but by for from has have how i if in into is it its
		of on or that the their then there these this to was were what when where which who why will with you your
		do does did can could should would about not no so than too very via`) {
		m[w] = true
	}
	return m
}()

// tokenize splits text into lower-case terms of letters and digits, without
// stopwords, with a light plural stemming.
func tokenize(s string) []string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := words[:0]
	for _, w := range words {
		if stopwords[w] || (utf8.RuneCountInString(w) < 2 && !unicode.IsDigit([]rune(w)[0])) {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// stem removes common English plural endings.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes")):
		return w[:len(w)-2]
	case len(w) > 5 && strings.HasSuffix(w, "oes"):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

func uniqueTerms(terms []string) []string {
	var out []string
	for _, t := range terms {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
