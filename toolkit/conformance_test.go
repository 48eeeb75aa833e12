package toolkit

// Conformance against data written outside the project, read from the shared
// test data folder beside the repository (see shared/testdata/README.md):
//   - JSON-Schema-Test-Suite (json-schema-org, MIT licence) required tests for
//     draft-07 and draft 2020-12, with its remotes, and its optional
//     ecmascript-regex and non-bmp-regex tests (and its optional format
//     tests, in format_suite_test.go);
//   - Berkeley Function Calling Leaderboard non-live sample calls (Apache-2.0);
//   - τ-bench retail and airline expected calls (Sierra, MIT licence).
// Each licence text is in the LICENSE file of its folder.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sharedTestdata returns the shared/testdata folder, found by walking up from
// the working directory to the directory that holds both the repository and
// shared/, or skips the test when it is absent.
func sharedTestdata(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		cand := filepath.Join(dir, "shared", "testdata")
		if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skip("shared/testdata not found beside the repository (looked upwards from the working directory); conformance data unavailable")
		}
		dir = parent
	}
}

// remotesLoader maps the suite's http://localhost:1234/ remotes to files.
type remotesLoader string

func (dir remotesLoader) Load(url string) (any, error) {
	rest, ok := strings.CutPrefix(url, "http://localhost:1234/")
	if !ok {
		return nil, errors.New("only http://localhost:1234/ is served in tests")
	}
	f, err := os.Open(filepath.Join(string(dir), filepath.FromSlash(rest)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return jsonschema.UnmarshalJSON(f)
}

// decodeNumbers decodes JSON text with numbers as json.Number.
func decodeNumbers(tb testing.TB, raw []byte) any {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

// suiteGroup is one group of a JSON-Schema-Test-Suite file: a schema and
// its tests.
type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// readSuiteFile reads the groups of one suite file.
func readSuiteFile(tb testing.TB, file string) []suiteGroup {
	tb.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	var groups []suiteGroup
	if err := json.Unmarshal(raw, &groups); err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
	return groups
}

func TestJSONSchemaTestSuite(t *testing.T) {
	root := filepath.Join(sharedTestdata(t), "json-schema-test-suite")
	// The required 2020-12 tests expect format to be an annotation (the
	// draft's own default), so that draft runs under FormatAnnotate; draft-07
	// expects assertion, which is the default policy.
	drafts := []struct {
		name    string
		dir     string
		draft   *jsonschema.Draft
		formats FormatPolicy
		want    int
	}{
		{name: "draft7", dir: "draft7", draft: jsonschema.Draft7, formats: FormatAssert, want: 927},
		{name: "draft2020-12", dir: "draft2020-12", draft: jsonschema.Draft2020, formats: FormatAnnotate, want: 1299},
		{name: "draft7-optional-regex", dir: "draft7/optional", draft: jsonschema.Draft7, formats: FormatAssert, want: 86},
		{name: "draft2020-12-optional-regex", dir: "draft2020-12/optional", draft: jsonschema.Draft2020, formats: FormatAssert, want: 86},
	}
	for _, d := range drafts {
		t.Run(d.name, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join(root, "tests", d.dir, "*.json"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no suite files in %s: %v", d.dir, err)
			}
			if strings.HasSuffix(d.dir, "optional") {
				files = slices.DeleteFunc(files, func(f string) bool {
					b := filepath.Base(f)
					return b != "ecmascript-regex.json" && b != "non-bmp-regex.json"
				})
			}
			cache := NewSchemaCache(
				WithDefaultDraft(d.draft),
				WithFormatPolicy(d.formats),
				WithSchemaLoader(remotesLoader(filepath.Join(root, "remotes"))),
			)
			pass, total, fast := 0, 0, 0
			for _, file := range files {
				groups := readSuiteFile(t, file)
				base := filepath.Base(file)
				for _, g := range groups {
					sch, err := cache.Compile(g.Schema)
					if err != nil {
						total += len(g.Tests)
						t.Errorf("%s / %s: compile: %v", base, g.Description, err)
						continue
					}
					for _, tc := range g.Tests {
						total++
						data := decodeNumbers(t, tc.Data)
						if sch.fast != nil {
							fast++
							if sch.fast.valid(data) && !tc.Valid {
								t.Errorf("%s / %s / %s: the fast path accepts invalid data", base, g.Description, tc.Description)
							}
						}
						err := sch.validate(data)
						if got := err == nil; got != tc.Valid {
							t.Errorf("%s / %s / %s: valid = %v, want %v (%v)", base, g.Description, tc.Description, got, tc.Valid, err)
							continue
						}
						if err != nil {
							var ve *ValidationError
							if !errors.As(err, &ve) || len(ve.Fields) == 0 || ve.Error() == "" {
								t.Errorf("%s / %s / %s: error %T %v is not a phrased *ValidationError", base, g.Description, tc.Description, err, err)
								continue
							}
						}
						pass++
					}
				}
			}
			t.Logf("%s: %d/%d tests pass (%d of them also checked on the fast path)", d.name, pass, total, fast)
			if total != d.want {
				t.Logf("%s: the suite copy holds %d tests (expected %d)", d.name, total, d.want)
			}
		})
	}
}

// argumentsText returns a call's arguments as ParseArgs receives them: a
// JSON string holding the object, or the object's own text.
func argumentsText(tb testing.TB, raw json.RawMessage) string {
	tb.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

func TestBFCLCallsValidate(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(sharedTestdata(t), "bfcl", "nonlive-sample-calls.json"))
	if err != nil {
		t.Fatal(err)
	}
	var calls []struct {
		ID          string          `json:"id"`
		Tool        string          `json:"tool"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Arguments   json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		t.Fatal(err)
	}
	// The README expects every call to validate, but two calls of this copy
	// break their own schemas (BFCL's ground truth lists acceptable values and
	// uses None for defaults); a correct validator must refuse them.
	knownInvalid := map[string]string{
		"simple_python_96": `field "conditions[0].field": want string, got array`,
		"parallel_152":     `field "mod": want number, got null`,
	}
	cache := NewSchemaCache()
	pass, refused := 0, 0
	for _, c := range calls {
		args, err := ParseArgs(argumentsText(t, c.Arguments), Limits{})
		if err != nil {
			t.Errorf("%s: ParseArgs: %v", c.ID, err)
			continue
		}
		sch, err := cache.Compile(c.InputSchema)
		if err != nil {
			t.Errorf("%s: compile: %v", c.ID, err)
			continue
		}
		err = sch.Validate(args.Value)
		if want, ok := knownInvalid[c.ID]; ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: Validate = %v, want an error containing %s", c.ID, err, want)
				continue
			}
			refused++
			continue
		}
		if err != nil {
			t.Errorf("%s (%s): %v", c.ID, c.Tool, err)
			continue
		}
		pass++
	}
	t.Logf("bfcl: %d/%d calls validate; %d known-invalid calls refused as they should be", pass, len(calls), refused)
	if refused != len(knownInvalid) {
		t.Errorf("known-invalid calls refused: %d, want %d", refused, len(knownInvalid))
	}
	if len(calls) == 0 {
		t.Fatal("no bfcl calls")
	}
}

// tauBench is the shape of tau-bench/expected-calls.json.
type tauBench map[string]struct {
	Tools map[string]struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
	Calls []struct {
		Split     string          `json:"split"`
		Task      int             `json:"task"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"calls"`
}

var (
	tauOnce sync.Once
	tauData tauBench
	tauErr  error
)

// loadTauBench reads the τ-bench calls once per test binary.
func loadTauBench(tb testing.TB) tauBench {
	tb.Helper()
	dir := sharedTestdata(tb)
	tauOnce.Do(func() {
		var raw []byte
		raw, tauErr = os.ReadFile(filepath.Join(dir, "tau-bench", "expected-calls.json"))
		if tauErr == nil {
			tauErr = json.Unmarshal(raw, &tauData)
		}
	})
	if tauErr != nil {
		tb.Fatal(tauErr)
	}
	return tauData
}

func TestTauBenchCallsValidate(t *testing.T) {
	data := loadTauBench(t)
	cache := NewSchemaCache()
	for _, domain := range []string{"retail", "airline"} {
		t.Run(domain, func(t *testing.T) {
			d, ok := data[domain]
			if !ok {
				t.Fatalf("no %s domain", domain)
			}
			pass := 0
			for i, c := range d.Calls {
				tool, ok := d.Tools[c.Name]
				if !ok {
					t.Errorf("call %d (%s task %d): unknown tool %s", i, c.Split, c.Task, c.Name)
					continue
				}
				args, err := ParseArgs(argumentsText(t, c.Arguments), Limits{})
				if err != nil {
					t.Errorf("call %d (%s): ParseArgs: %v", i, c.Name, err)
					continue
				}
				sch, err := cache.Compile(tool.Parameters)
				if err != nil {
					t.Errorf("%s: compile: %v", c.Name, err)
					continue
				}
				if err := sch.Validate(args.Value); err != nil {
					t.Errorf("call %d (%s task %d %s): %v", i, c.Split, c.Task, c.Name, err)
					continue
				}
				pass++
			}
			t.Logf("tau-bench %s: %d/%d calls validate (%d tools)", domain, pass, len(d.Calls), len(d.Tools))
			if len(d.Calls) == 0 {
				t.Fatal("no calls")
			}
		})
	}
}
