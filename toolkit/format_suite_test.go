package toolkit

// The JSON-Schema-Test-Suite's optional format tests (json-schema-org, MIT
// licence; see conformance_test.go), for draft-07 and draft 2020-12.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// formatScore is how a format fared in one draft's optional format tests.
type formatScore struct {
	pass, total int
	// wrong lists the tests the policy got wrong, as
	// "description: data (valid = got, want want)".
	wrong []string
}

// runFormatSuite runs every file of tests/<dir>/optional/format under
// policy and scores each file (named for its format; ecmascript-regex holds
// further tests of the regex format).
func runFormatSuite(tb testing.TB, dir string, draft *jsonschema.Draft, policy FormatPolicy) map[string]*formatScore {
	tb.Helper()
	root := filepath.Join(sharedTestdata(tb), "json-schema-test-suite")
	files, err := filepath.Glob(filepath.Join(root, "tests", dir, "optional", "format", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no optional format tests in %s: %v", dir, err)
	}
	cache := NewSchemaCache(WithDefaultDraft(draft), WithFormatPolicy(policy),
		WithSchemaLoader(remotesLoader(filepath.Join(root, "remotes"))))
	scores := map[string]*formatScore{}
	for _, file := range files {
		groups := readSuiteFile(tb, file)
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		sc := scores[name]
		if sc == nil {
			sc = &formatScore{}
			scores[name] = sc
		}
		for _, g := range groups {
			sch, err := cache.Compile(g.Schema)
			if err != nil {
				tb.Fatalf("%s / %s: compile: %v", file, g.Description, err)
			}
			for _, tc := range g.Tests {
				sc.total++
				err := sch.validate(decodeNumbers(tb, tc.Data))
				if got := err == nil; got != tc.Valid {
					sc.wrong = append(sc.wrong, fmt.Sprintf("%s / %s: %s (valid = %v, want %v)", g.Description, tc.Description, tc.Data, got, tc.Valid))
					continue
				}
				sc.pass++
			}
		}
	}
	return scores
}

// TestJSONSchemaFormatSuite runs the suite's optional format tests for both
// drafts under the default policy: every asserted format must agree with
// every test, and every annotated format must accept every value.
func TestJSONSchemaFormatSuite(t *testing.T) {
	drafts := []struct {
		name  string
		dir   string
		draft *jsonschema.Draft
	}{
		{name: "draft7", dir: "draft7", draft: jsonschema.Draft7},
		{name: "draft2020-12", dir: "draft2020-12", draft: jsonschema.Draft2020},
	}
	var table strings.Builder
	table.WriteString("| format | draft | pass/total | policy |\n|---|---|---|---|\n")
	for _, d := range drafts {
		t.Run(d.name, func(t *testing.T) {
			scores := runFormatSuite(t, d.dir, d.draft, FormatAssert)
			names := slices.Sorted(func(yield func(string) bool) {
				for n := range scores {
					if !yield(n) {
						return
					}
				}
			})
			for _, name := range names {
				sc := scores[name]
				format := name
				if name == "ecmascript-regex" {
					format = "regex"
				}
				asserted := slices.Contains(AssertedFormats, format)
				policy := "annotation"
				if asserted {
					policy = "asserted"
				}
				fmt.Fprintf(&table, "| %s | %s | %d/%d | %s |\n", name, d.name, sc.pass, sc.total, policy)
				if !asserted {
					continue
				}
				for _, w := range sc.wrong {
					t.Errorf("format %s: %s", name, w)
				}
			}
		})
	}
	t.Logf("optional format suite under the default policy:\n%s", table.String())
}
