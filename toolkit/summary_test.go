package toolkit

import "testing"

// TestFirstLineCutsAtRealSentenceEnds: a tool's summary in the turn-context
// text ends where its first sentence ends, not at an abbreviation's dot or
// inside parentheses.
func TestFirstLineCutsAtRealSentenceEnds(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "Read files. Then more.", "Read files."},
		{"e.g. in parentheses", "Render a template to a workspace file (e.g. a report page). It escapes HTML.", "Render a template to a workspace file (e.g. a report page)."},
		{"i.e. outside parentheses", "Remove one file, i.e. never a directory. More text.", "Remove one file, i.e. never a directory."},
		{"etc.", "Reads text, JSON, etc. and more. Second.", "Reads text, JSON, etc. and more."},
		{"dot inside parentheses", "Fetch a page (GET. HEAD too) and return it. Next.", "Fetch a page (GET. HEAD too) and return it."},
		{"first line only", "One line\nsecond line.", "One line"},
		{"no sentence end", "Evaluate an expression", "Evaluate an expression"},
		{"version number", "Uses v1.2 of the API. More.", "Uses v1.2 of the API."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := firstLine(tt.in); got != tt.want {
				t.Errorf("firstLine(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestFirstLineBalancesParentheses: a summary does not end inside an open
// parenthesis.
func TestFirstLineBalancesParentheses(t *testing.T) {
	long := "Render a Go html/template with JSON data and write the result to a workspace file (e.g. a report " +
		"page or an index.html): the data is escaped for its context. Scripts are not run."
	got := firstLine(long)
	open := 0
	for _, r := range got {
		switch r {
		case '(':
			open++
		case ')':
			open--
		}
	}
	if open != 0 {
		t.Errorf("summary %q leaves a parenthesis open", got)
	}
}
