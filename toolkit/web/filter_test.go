package web

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// gardenPassages are paragraphs of a long page about several subjects.
var gardenPassages = []string{
	"Tomatoes need at least six hours of direct sunlight every day to produce a good crop.",
	"Water tomatoes deeply twice a week; shallow watering leads to weak roots and cracked fruit.",
	"Use well-drained soil rich in compost, with a pH between 6.2 and 6.8.",
	"Cookie policy: we use cookies to improve your experience and for analytics.",
	"Aphids and whitefly are the usual pests; marigolds keep whitefly away.",
	"Subscribe to our newsletter for weekly gardening tips delivered to your inbox.",
	"Blight shows as brown patches on the leaves of tomatoes in wet summers; remove affected leaves.",
}

func TestBM25Filter(t *testing.T) {
	total := totalLen(gardenPassages)
	tests := []struct {
		name     string
		query    string
		budget   int
		keep     []int
		note     []string // parts of the note; nil: no note
		noteNone bool
	}{
		{name: "everything fits", query: "tomato", budget: total, keep: []int{0, 1, 2, 3, 4, 5, 6}, noteNone: true},
		{name: "watering", query: "watering roots", budget: 120, keep: []int{1},
			note: []string{`kept the passages most relevant to "watering roots"`, "within the budget of 120 characters", "kept 1 of 7 passages", "cut 6 (passages 1, 3-7)", "“Tomatoes need at least six hours"}},
		{name: "pests, in document order", query: "whitefly blight pests", budget: 200, keep: []int{4, 6},
			note: []string{"kept 2 of 7 passages", "cut 5 (passages 1-4, 6)"}},
		{name: "plural and case", query: "TOMATO Leaves", budget: 100, keep: []int{6}},
		{name: "no query keeps the head", query: "", budget: 200, keep: []int{0, 1},
			note: []string{"kept the first passages (pass query", "cut 5 (passages 3-7)"}},
		{name: "nothing matches", query: "helicopter", budget: 200, keep: []int{0, 1},
			note: []string{`no passage matched "helicopter"; kept the first passages`}},
		{name: "stopwords only", query: "the and of", budget: 200, keep: []int{0, 1},
			note: []string{"kept the first passages"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := BM25Filter{}.Filter(context.Background(), FilterRequest{Tool: FetchPageName, Query: tt.query, Passages: gardenPassages, Budget: tt.budget})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.keep, res.Keep); diff != "" {
				t.Errorf("keep (-want +got):\n%s", diff)
			}
			if tt.noteNone && res.Note != "" {
				t.Errorf("note %q, want none", res.Note)
			}
			mustContain(t, res.Note, tt.note...)
			kept := 0
			for _, i := range res.Keep {
				kept += runeLen(gardenPassages[i])
			}
			if kept > tt.budget {
				t.Errorf("kept %d characters, budget %d", kept, tt.budget)
			}
		})
	}
}

func TestBM25Ranking(t *testing.T) {
	// The rarer term weighs more, and a passage that repeats a term gains
	// less than linearly.
	passages := []string{
		"tomato tomato tomato tomato garden",
		"tomato blight",
		"garden garden tools",
		"tomato soil",
	}
	scores := BM25Filter{}.scores(uniqueTerms(tokenize("tomato blight")), statsOf(passages))
	if !(scores[1] > scores[0] && scores[0] > scores[3] && scores[3] > 0 && scores[2] == 0) {
		t.Errorf("scores %v: want blight passage first, repeated tomato above single, garden tools 0", scores)
	}
	if got := strings.Join(tokenize("The Tomatoes, the BERRIES and 3 classes: x"), " "); got != "tomato berry 3 class" {
		t.Errorf("tokenize = %q", got)
	}
}

func TestFilterCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (BM25Filter{}).Filter(ctx, FilterRequest{Query: "x", Passages: gardenPassages, Budget: 10}); err == nil {
		t.Error("a canceled filter returned no error")
	}
}

// TestRuneLenCountsLikeUTF8: the budget counts runes as
// utf8.RuneCountInString does, invalid bytes one each, whatever the mix of
// ASCII runs and other bytes and wherever they fall in an 8-byte block.
func TestRuneLenCountsLikeUTF8(t *testing.T) {
	pieces := []string{"", "a", "abcdefg", "abcdefgh", "abcdefghi", "é", "日本語", "\xff", "\x80\x80", "\xe6\x97", "🍅", "\xf0\x9f\x8d", strings.Repeat("x", 17)}
	for _, a := range pieces {
		for _, b := range pieces {
			for _, c := range pieces {
				s := a + b + c
				if got, want := runeLen(s), utf8.RuneCountInString(s); got != want {
					t.Errorf("runeLen(%q) = %d, want %d", s, got, want)
				}
			}
		}
	}
}

func TestPreviewCollapsesAndCuts(t *testing.T) {
	// reference is the plain definition: words joined by one space, cut
	// after previewChars characters.
	reference := func(s string) string {
		s = strings.Join(strings.Fields(s), " ")
		if utf8.RuneCountInString(s) <= previewChars {
			return s
		}
		return string([]rune(s)[:previewChars]) + "…"
	}
	long := strings.Repeat("word ", 30)
	exact := strings.Repeat("x", previewChars)
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"spaces only", " \t\n "},
		{"short", "  a   short\n\tpassage  "},
		{"long", long},
		{"exactly the limit", exact},
		{"the limit then spaces", exact + "   \n"},
		{"the limit then a word", exact + " y"},
		{"a space at the cut", strings.Repeat("x", previewChars-1) + "  yz"},
		{"one over", exact + "y"},
		{"multibyte", strings.Repeat("é ü ", 20)},
		{"unicode spaces", "a\u00a0b\u2003c" + long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := preview(tt.in), reference(tt.in); got != want {
				t.Fatalf("preview(%q) = %q, want %q", tt.in, got, want)
			}
		})
	}
}
